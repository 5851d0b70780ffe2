// AsyncEncoder: how the Engine turns prompt texts into ids without running the BPE on its own event loop. Two
// implementations: TokenizerWorker (a worker thread; serving) and InlineEncoder (the calling thread; tests, tools).
import { InternalError, RequestAbortedError } from '../common/index.js';
import type { Tokenizer } from '../tokenizer/index.js';

/** Text → ids, asynchronously. One instance serves many requests; results come back in no particular order. */
export interface AsyncEncoder {
  /**
   * Encodes each text with the same options (Tokenizer.encode semantics: `addSpecialTokens` adds BOS/EOS as the
   * tokenizer config says).
   * @param signal aborting it rejects the promise with RequestAbortedError and drops the work where possible
   * @returns one id array [numTokens] per text, in the order of `texts`
   * @throws (rejects with) RequestAbortedError when `signal` aborts first; InvalidRequestError when the input cannot
   *   be tokenized within the implementation's limits (TokenizerWorker: time, memory); InternalError when the
   *   encoder is closed or broke for a reason unrelated to the input
   */
  encode(texts: readonly string[], addSpecialTokens: boolean, signal?: AbortSignal): Promise<number[][]>;
  /** Stops the encoder; pending and later `encode` calls reject with InternalError. Idempotent. */
  close(): Promise<void>;
}

/** The rejection of an `encode` whose signal aborted. */
export function encodeAbortedError(): RequestAbortedError {
  return new RequestAbortedError('The request was aborted while its input was being tokenized.');
}

/** The rejection of an `encode` on a closed encoder (the engine is shutting down). */
export function encoderClosedError(): InternalError {
  return new InternalError('The tokenizer is closed (the server is shutting down).');
}

/**
 * Encodes on the calling thread (synchronously inside the returned promise's executor): no isolation and no limits;
 * for tests, tools and `tokenizerWorker: false`. A huge single-word text blocks the caller for as long as it takes.
 */
export class InlineEncoder implements AsyncEncoder {
  private closed = false;

  constructor(private readonly tokenizer: Tokenizer) {}

  async encode(texts: readonly string[], addSpecialTokens: boolean, signal?: AbortSignal): Promise<number[][]> {
    if (signal?.aborted) throw encodeAbortedError();
    if (this.closed) throw encoderClosedError();
    return texts.map((t) => this.tokenizer.encode(t, { addSpecialTokens }));
  }

  async close(): Promise<void> {
    this.closed = true;
  }
}
