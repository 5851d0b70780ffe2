// Owns the error hierarchy of tsglang. Knows nothing of HTTP: server/http_errors.ts maps `kind` to a status.

/** What went wrong, independent of transport. server/http_errors.ts maps each kind to an HTTP status. */
export type ErrorKind =
  | 'invalid_request'
  | 'context_length'
  | 'capacity'
  | 'not_found'
  | 'not_implemented'
  | 'aborted'
  | 'internal'
  | 'model_load';

/** Base of every error tsglang throws on purpose. `kind` classifies it; `cause` keeps the underlying error. */
export class TsglangError extends Error {
  readonly kind: ErrorKind;
  constructor(kind: ErrorKind, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.kind = kind;
    this.name = 'TsglangError';
  }
}

/** Bad user input (a flag, a request field). `param` names the offending field when known. */
export class InvalidRequestError extends TsglangError {
  readonly param: string | null;
  constructor(message: string, param: string | null = null, options?: { cause?: unknown }) {
    super('invalid_request', message, options);
    this.name = 'InvalidRequestError';
    this.param = param;
  }
}

/** A prompt (plus requested output) longer than the model's context length. */
export class ContextLengthExceededError extends TsglangError {
  constructor(message: string) {
    super('context_length', message);
    this.name = 'ContextLengthExceededError';
  }
}

/** Admission failure: a request can never fit in the KV pool. (Running out during decode is a retract, not this.) */
export class OutOfKVCacheError extends TsglangError {
  constructor(message: string) {
    super('capacity', message);
    this.name = 'OutOfKVCacheError';
  }
}

/** A checkpoint that cannot be loaded: the message names the file and, when relevant, the tensor. */
export class ModelLoadError extends TsglangError {
  readonly file: string | null;
  readonly tensor: string | null;
  constructor(message: string, where: { file?: string; tensor?: string } = {}, options?: { cause?: unknown }) {
    super('model_load', message, options);
    this.name = 'ModelLoadError';
    this.file = where.file ?? null;
    this.tensor = where.tensor ?? null;
  }
}

/** A flag or feature that is parsed but not built (yet), or not possible on this machine. */
export class UnsupportedFeatureError extends TsglangError {
  constructor(message: string) {
    super('not_implemented', message);
    this.name = 'UnsupportedFeatureError';
  }
}

/** Something that does not exist (a model name, a route, a request id). */
export class NotFoundError extends TsglangError {
  constructor(message: string) {
    super('not_found', message);
    this.name = 'NotFoundError';
  }
}

/** A request aborted by its client (disconnect, abort call) or by the server (shutdown). */
export class RequestAbortedError extends TsglangError {
  constructor(message: string) {
    super('aborted', message);
    this.name = 'RequestAbortedError';
  }
}

/** A broken invariant inside tsglang: always a bug. */
export class InternalError extends TsglangError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('internal', message, options);
    this.name = 'InternalError';
  }
}

/**
 * A collective or rank-to-rank fault: a peer rank or node that died, never joined, or did not answer within
 * `--dist-timeout`. The message names the group, the ranks (and node / `--dist-init-addr` when known).
 */
export class DistributedError extends TsglangError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('internal', message, options);
    this.name = 'DistributedError';
  }
}
