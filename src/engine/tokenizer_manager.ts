// TokenizerManager: main-thread half of the engine (SGLang managers/tokenizer_manager.py): tokenizes (through an
// AsyncEncoder: the tokenizer worker thread when serving), validates (context length, sampling params, logprob
// options), fans n > 1 out into per-choice requests. No model math; of the tokenizer, only the linear-time
// over-length pre-check (Tokenizer.minTokenCount) runs on this thread.
import { ContextLengthExceededError, InvalidRequestError, pyListRepr } from '../common/index.js';
import { normalizeSamplingParams, type SamplingParams } from '../sampling/index.js';
import { validateInputIdsInVocab, type TokenizedReq } from '../scheduler/index.js';
import type { Tokenizer } from '../tokenizer/index.js';
import { InlineEncoder, type AsyncEncoder } from './async_encoder.js';
import type { DetokOptions } from './messages.js';
import type { EngineInfo, GenerateRequest } from './types.js';

/** One prepared request: its choices as the scheduler receives them. */
export interface PreparedRequest {
  readonly inputIds: readonly number[];
  readonly params: SamplingParams;
  readonly choices: readonly { readonly req: TokenizedReq; readonly detok: DetokOptions }[];
}

/** Tokenization and validation with SGLang's error messages. */
export class TokenizerManager {
  private readonly tokenizer: Tokenizer | null;
  private readonly encoder: AsyncEncoder | null;
  private readonly info: EngineInfo;
  private readonly allowAutoTruncate: boolean;
  private readonly baseSeed: number;
  private counter = 0;

  /**
   * @param tokenizer this thread's tokenizer, for the over-length pre-check (null with --skip-tokenizer-init)
   * @param baseSeed --random-seed: seeds of requests without their own seed derive from it
   * @param encoder where texts are encoded (the tokenizer worker when serving); default: `tokenizer` on this thread
   */
  constructor(tokenizer: Tokenizer | null, info: EngineInfo, allowAutoTruncate: boolean, baseSeed: number, encoder?: AsyncEncoder | null) {
    this.tokenizer = tokenizer;
    this.encoder = encoder ?? (tokenizer ? new InlineEncoder(tokenizer) : null);
    this.info = info;
    this.allowAutoTruncate = allowAutoTruncate;
    this.baseSeed = baseSeed;
  }

  /**
   * Tokenizes and validates one request (TokenizerManager._validate_one_request). Cheap checks come first, and a
   * text that provably cannot fit the context is refused before it is tokenized (see tokenizeText).
   * @param nowMs the request's arrival time (performance.now() ms)
   * @param signal aborts the tokenization (the client left)
   * @throws (rejects with) InvalidRequestError for bad fields (named: negative or fractional input_ids,
   *   top_logprobs_num outside [0, vocabSize], sampling params; prompt ids ≥ vocabSize, from input_ids or from the
   *   tokenizer, with SGLang's `_validate_input_ids_in_vocab` message) and for a text the encoder could not tokenize within
   *   its limits, ContextLengthExceededError for over-long requests, RequestAbortedError when `signal` aborts first
   */
  async prepare(req: GenerateRequest, nowMs: number, signal?: AbortSignal): Promise<PreparedRequest> {
    if (typeof req.text === 'string' && req.textSegments !== undefined) throw new InvalidRequestError('Only one of text and text segments should be provided.', 'text');
    const hasText = typeof req.text === 'string' || Array.isArray(req.textSegments);
    const hasIds = Array.isArray(req.inputIds);
    if (hasText === hasIds) throw new InvalidRequestError('Either text or input_ids should be provided.', hasText ? 'text' : 'input_ids');
    const vocabSize = this.info.vocabSize;
    const requestedTopLogprobs = req.topLogprobsNum ?? 0;
    if (!Number.isInteger(requestedTopLogprobs) || requestedTopLogprobs < 0 || requestedTopLogprobs > vocabSize) {
      // SGLang TokenizerManager: a bound on the top-k work per position, checked before any tokenization
      throw new InvalidRequestError(`top_logprobs_num must be in [0, ${vocabSize}], got ${String(requestedTopLogprobs)}.`, 'top_logprobs_num');
    }
    let inputIds: number[];
    if (hasText) {
      if (!this.tokenizer || !this.encoder) {
        throw new InvalidRequestError(
          'The engine initialized with skip_tokenizer_init=True cannot accept text prompts. Please provide input_ids or re-initialize the engine with skip_tokenizer_init=False.',
          'text',
        );
      }
      inputIds = await this.tokenizeText(this.tokenizer, this.encoder, req, signal);
    } else {
      inputIds = [...req.inputIds!];
      // (ids ≥ the vocabulary size are refused below, after the length checks, with SGLang's message)
      for (const id of inputIds) {
        if (!Number.isInteger(id) || id < 0) {
          throw new InvalidRequestError(`input_ids must be integers in [0, ${this.info.vocabSize - 1}], got ${String(id)}.`, 'input_ids');
        }
      }
    }
    if (inputIds.length === 0) throw new InvalidRequestError('The input is empty.', hasText ? 'text' : 'input_ids');
    const params0 = normalizeSamplingParams(req.samplingParams, this.info.vocabSize);
    // SGLang sampling_params.py raise_if_tokenizer_required (the values in Python's repr)
    if (!this.tokenizer && params0.stopStrs.length > 0) {
      throw new InvalidRequestError(`stop=${pyListRepr(params0.stopStrs)} is unavailable when skip_tokenizer_init=True (requires tokenizer to decode tokens to text for matching).`, 'stop');
    }
    if (!this.tokenizer && params0.minNewTokens > 0) {
      throw new InvalidRequestError(`min_new_tokens=${params0.minNewTokens} is unavailable when skip_tokenizer_init=True (requires tokenizer for eos_token_id).`, 'min_new_tokens');
    }
    const ctx = this.info.contextLength;
    let maxNew = params0.maxNewTokens;
    if (inputIds.length >= ctx) {
      if (!this.allowAutoTruncate) throw inputTooLongError(String(inputIds.length), ctx);
      inputIds = inputIds.slice(0, ctx - 1);
    }
    if (maxNew !== null && inputIds.length + maxNew >= ctx) {
      if (!this.allowAutoTruncate) {
        throw new ContextLengthExceededError(
          `Requested token count exceeds the model's maximum context length of ${ctx} tokens. You requested a total of ${inputIds.length + maxNew} tokens: ${inputIds.length} tokens from the input messages and ${maxNew} tokens for the completion. Please reduce the number of tokens in the input messages or the completion to fit within the limit.`,
        );
      }
      maxNew = Math.max(0, ctx - inputIds.length - 1);
    }
    if (inputIds.length > this.info.maxReqInputLen) {
      if (!this.allowAutoTruncate) {
        throw new InvalidRequestError(
          `Input length (${inputIds.length} tokens) exceeds the maximum allowed length (${this.info.maxReqInputLen} tokens). Use a shorter input or enable --allow-auto-truncate.`,
          'input_ids',
        );
      }
      inputIds = inputIds.slice(0, this.info.maxReqInputLen);
    }
    // Ids the model cannot embed: given as input_ids, or produced by a tokenizer whose vocabulary is larger than the
    // model's (--tokenizer-path); checked here so that such a request never reaches a forward.
    validateInputIdsInVocab(inputIds, vocabSize);
    const params: SamplingParams = maxNew === params0.maxNewTokens ? params0 : { ...params0, maxNewTokens: maxNew };
    const returnLogprob = req.returnLogprob ?? false;
    const logprobStartLen = returnLogprob ? req.logprobStartLen ?? -1 : -1;
    if (logprobStartLen >= inputIds.length) {
      throw new InvalidRequestError(`logprob_start_len (${logprobStartLen}) is greater than or equal to the input length (${inputIds.length}).`, 'logprob_start_len');
    }
    const topLogprobsNum = returnLogprob ? requestedTopLogprobs : 0;
    const detok: DetokOptions = { skipSpecialTokens: params.skipSpecialTokens, stop: params.stopStrs, noStopTrim: params.noStopTrim };
    const seed0 = params.seed ?? (this.baseSeed * 1000003 + ++this.counter * 7919) % 2147483647;
    const choices = Array.from({ length: params.n }, (_, i) => ({
      req: {
        rid: params.n === 1 ? req.rid : `${req.rid}-${i}`,
        inputIds,
        params,
        rngSeed: seed0 + i,
        returnLogprob,
        logprobStartLen,
        topLogprobsNum,
        stream: req.stream ?? false,
        arrivalMs: nowMs,
        ...(req.requireReasoning ? { requireReasoning: true } : {}),
        ...(req.bootstrap?.[i] ? { bootstrap: req.bootstrap[i] } : {}),
        ...(req.dataParallelRank !== undefined ? { dataParallelRank: req.dataParallelRank } : {}),
      } satisfies TokenizedReq,
      detok,
    }));
    return { inputIds, params, choices };
  }

  /**
   * Tokenizes `text` (special tokens as `addSpecialTokens` says) or `textSegments` (each without special tokens,
   * ids concatenated), refusing first, without tokenizing, a text whose token lower bound
   * (Tokenizer.minTokenCount) already reaches the context length. With --allow-auto-truncate such a text is cut
   * to a prefix whose bound still exceeds the context (so the result is truncated to the context as before, but
   * only a bounded prefix is tokenized; near the cut the ids can differ from tokenizing the whole text).
   * @throws ContextLengthExceededError (SGLang's over-length message, "at least N tokens"); whatever the encoder
   *   rejects with
   */
  private async tokenizeText(tokenizer: Tokenizer, encoder: AsyncEncoder, req: GenerateRequest, signal: AbortSignal | undefined): Promise<number[]> {
    const ctx = this.info.contextLength;
    const segments = req.textSegments ?? [req.text as string];
    const addSpecialTokens = req.textSegments === undefined && (req.addSpecialTokens ?? true);
    let minTokens = 0;
    for (const s of segments) minTokens += tokenizer.minTokenCount(s);
    let texts: readonly string[] = segments;
    if (minTokens >= ctx) {
      if (!this.allowAutoTruncate) throw inputTooLongError(`at least ${minTokens}`, ctx);
      texts = prefixReaching(tokenizer, segments, ctx + 1);
    }
    const ids = await encoder.encode(texts, addSpecialTokens, signal);
    return ids.length === 1 ? ids[0] : ids.flat();
  }

  /**
   * Tokenizes prompts for /v1/tokenize: each is refused, without being tokenized, when its token lower bound reaches
   * the context length (the same over-length error as generation requests), then all are encoded.
   * @param signal aborts the tokenization (the client left)
   * @returns one id array per prompt
   * @throws (rejects with) InvalidRequestError without a tokenizer (--skip-tokenizer-init) or when the encoder
   *   could not tokenize a prompt within its limits, ContextLengthExceededError, RequestAbortedError
   */
  async tokenize(prompts: readonly string[], addSpecialTokens: boolean, signal?: AbortSignal): Promise<number[][]> {
    if (!this.tokenizer || !this.encoder) throw new InvalidRequestError('the tokenizer is not initialized (--skip-tokenizer-init)', 'prompt');
    const ctx = this.info.contextLength;
    for (const p of prompts) {
      const minTokens = this.tokenizer.minTokenCount(p);
      if (minTokens >= ctx) throw inputTooLongError(`at least ${minTokens}`, ctx);
    }
    return this.encoder.encode(prompts, addSpecialTokens, signal);
  }

  /** Stops the encoder (the tokenizer worker); later requests with text fail. */
  close(): Promise<void> {
    return this.encoder?.close() ?? Promise.resolve();
  }
}

/**
 * SGLang's error for an input longer than the context (tokenizer_manager.py _validate_one_request), 400.
 * @param numTokens the input's token count, or "at least N" when only a lower bound is known (not tokenized)
 */
export function inputTooLongError(numTokens: string, contextLength: number): ContextLengthExceededError {
  return new ContextLengthExceededError(`The input (${numTokens} tokens) is longer than the model's context length (${contextLength} tokens).`);
}

/**
 * The shortest leading part of `texts` (whole texts, then a prefix of one, found by doubling its length) whose
 * token lower bound reaches `minTokens`: tokenizing it gives at least `minTokens` tokens, at a cost bounded by
 * about 2·minTokens·maxTokenBytes bytes instead of the whole input.
 */
function prefixReaching(tokenizer: Tokenizer, texts: readonly string[], minTokens: number): string[] {
  const out: string[] = [];
  let need = minTokens;
  for (const text of texts) {
    const n = tokenizer.minTokenCount(text);
    if (n < need) { out.push(text); need -= n; continue; }
    for (let len = need; ; len *= 2) {
      if (len >= text.length) { out.push(text); break; }
      const cut = len + (isHighSurrogate(text.charCodeAt(len - 1)) ? 1 : 0);
      const prefix = text.slice(0, cut);
      if (tokenizer.minTokenCount(prefix) >= need) { out.push(prefix); break; }
    }
    break;
  }
  return out;
}

function isHighSurrogate(c: number): boolean {
  return c >= 0xd800 && c <= 0xdbff;
}
