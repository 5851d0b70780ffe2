// The only place that maps an error to an HTTP status and body. SGLang's shapes
// (python/sglang/srt/entrypoints/http_server.py, openai/serving_base.py): request-validation errors →
// 400 {"object":"error","message","type":"Bad Request","param":null,"code":400}; handler errors →
// ErrorResponse with type "BadRequestError" / "InternalServerError" and param null; auth → 401 {"error":"Unauthorized"}.
import { TsglangError, type ErrorKind } from '../common/index.js';
import type { ErrorResponse } from '../protocol/index.js';
import type { Exchange } from './context.js';

/** An HTTP status with its JSON body. */
export interface HttpError {
  readonly status: number;
  readonly body: unknown;
}

const STATUS_OF_KIND: Record<ErrorKind, number> = {
  invalid_request: 400,
  context_length: 400,
  not_implemented: 400,
  not_found: 404,
  capacity: 503,
  aborted: 499,
  internal: 500,
  model_load: 500,
};

/** OpenAI-style error type names by status (SGLang's ErrorResponse.type). */
function typeOfStatus(status: number): string {
  if (status === 400) return 'BadRequestError';
  if (status === 404) return 'NotFoundError';
  if (status === 503) return 'ServiceUnavailableError';
  if (status === 499) return 'ClientClosedRequest';
  return 'InternalServerError';
}

/**
 * Builds SGLang's ErrorResponse object. `param` is always null: SGLang's handlers build every error with
 * `create_error_response(message, ...)`, which leaves it unset (the request-validation handler too), so the field a
 * tsglang error names (TsglangError `param`) stays internal.
 */
export function errorResponse(message: string, status: number, type = typeOfStatus(status)): ErrorResponse {
  return { object: 'error', message, type, param: null, code: status };
}

/**
 * Maps any thrown value to status + body. TsglangError kinds map through one table; anything else is a bug → 500.
 * @param err the caught value
 * @param validation true when the error comes from request parsing/validation (SGLang's RequestValidationError
 *   handler: type "Bad Request")
 */
export function toHttpError(err: unknown, validation = false): HttpError {
  if (err instanceof TsglangError) {
    const status = STATUS_OF_KIND[err.kind];
    return { status, body: errorResponse(err.message, status, validation && status === 400 ? 'Bad Request' : typeOfStatus(status)) };
  }
  const message = err instanceof Error ? err.message : String(err);
  return { status: 500, body: errorResponse(message, 500) };
}

/** Malformed JSON body (FastAPI's json_invalid validation error, rewritten to 400 by SGLang). */
export function invalidJsonError(detail: string): HttpError {
  return { status: 400, body: errorResponse(`JSON decode error: ${detail}`, 400, 'Bad Request') };
}

/**
 * A request body longer than the server accepts (uvicorn has no limit, but one JavaScript string cannot hold more
 * than ~512 MiB, and the body is decoded to one string before JSON.parse): 413 with SGLang's ErrorResponse.
 * @param bytes the body's size as received, bytes; limit the largest accepted, bytes
 */
export function bodyTooLargeError(bytes: number, limit: number): HttpError {
  const msg = `Request body too large: ${bytes} bytes (the limit is ${limit} bytes).`;
  return { status: 413, body: errorResponse(msg, 413, 'BadRequestError') };
}

/**
 * A JSON body whose bytes do not decode (invalid UTF-8, or UTF-16/32 in broken units; see json_body.ts). FastAPI
 * (fastapi/routing.py `get_request_handler`) turns any error of `await request.json()` other than a
 * JSONDecodeError, here Python's UnicodeDecodeError, into Starlette's `HTTPException(400, "There was an error parsing
 * the body")`. SGLang's HTTPException handler is registered for FastAPI's subclass of it, and Starlette looks handlers
 * up along the raised class's MRO, so FastAPI's default handler answers, with its `{"detail"}` body.
 */
export const BODY_PARSE_ERROR: HttpError = { status: 400, body: { detail: 'There was an error parsing the body' } };

/** Wrong or missing API key (SGLang's api-key middleware). */
export const UNAUTHORIZED: HttpError = { status: 401, body: { error: 'Unauthorized' } };

/** Unknown route (FastAPI default). */
export const ROUTE_NOT_FOUND: HttpError = { status: 404, body: { detail: 'Not Found' } };

/** Known route, wrong method (FastAPI default). */
export const METHOD_NOT_ALLOWED: HttpError = { status: 405, body: { detail: 'Method Not Allowed' } };

/** Content-Type other than application/json on the OpenAI routes. */
export function unsupportedMediaError(contentType: string | undefined): HttpError {
  const msg = `Unsupported Media Type: Only 'application/json' is allowed (got '${contentType ?? ''}')`;
  return { status: 400, body: errorResponse(msg, 400, 'Bad Request') };
}

/** `GET /v1/models/{model}` for an unknown model (SGLang's body). */
export function modelNotFoundError(model: string): HttpError {
  return {
    status: 404,
    body: { error: { message: `The model '${model}' does not exist`, type: 'invalid_request_error', param: 'model', code: 'model_not_found' } },
  };
}

/**
 * The error response for an engine finish reason of type abort that carries a statusCode (400 validation, 503 queue
 * timeout, 500 transfer failure); an abort without one (/abort_request) is a normal finish and never comes here.
 * @param nativeApi true for /generate (body `{"error": {"message"}}`), false for the OpenAI routes (ErrorResponse)
 */
export function abortHttpError(message: string, statusCode: number | undefined, nativeApi = false): HttpError {
  const status = statusCode ?? 500;
  return { status, body: nativeApi ? { error: { message } } : errorResponse(message, status) };
}

/**
 * Errors of the native /generate route: SGLang answers `{"error": {"message": ...}}` (400 for bad input, the
 * error's own status otherwise) instead of the OpenAI ErrorResponse.
 */
export function toGenerateHttpError(err: unknown): HttpError {
  const e = toHttpError(err);
  const message = (e.body as { message?: string }).message ?? String(err);
  return { status: e.status, body: { error: { message } } };
}

/**
 * Runs a request-body validation; if it throws, replies with the mapped error (OpenAI routes: a 400 validation
 * body) and returns null, so a handler can `if (req === null) return;`.
 * @param parse validates the body and returns the typed request (throws on invalid input)
 * @param toError error → status + body (default: the OpenAI request-validation mapping)
 * @returns the parsed request, or null after an error response was sent
 */
export function parseOrReply<T>(ex: Exchange, parse: () => T, toError: (err: unknown) => HttpError = (err) => toHttpError(err, true)): T | null {
  try {
    return parse();
  } catch (err) {
    const e = toError(err);
    ex.sendJson(e.status, e.body);
    return null;
  }
}
