// Req: one request (one choice) inside the scheduler: its tokens, sampling state and KV bookkeeping
// (SGLang schedule_batch.py Req). Only the scheduler mutates it.
import { Rng } from '../common/index.js';
import type { PrefixNode } from '../mem_cache/index.js';
import type { GrammarSpec, SamplingParams } from '../sampling/index.js';
import type { RowSamplingInfo } from '../sampling/index.js';
import type { FinishReasonData, ReqTokenOutput, TokenizedReq } from './io.js';

/** A request's scheduler-side state. */
export class Req {
  readonly rid: string;
  readonly originInputIds: readonly number[];
  readonly params: SamplingParams;
  /** max_new_tokens after clamping to the context (SGLang scheduler clamp). */
  readonly maxNewTokens: number;
  readonly rng: Rng;
  readonly outputIds: number[] = [];
  /** Counts of generated tokens (penalties). */
  readonly outputCounts = new Map<number, number>();
  /** EOS ∪ stop_token_ids, empty when ignoreEos. */
  readonly stopTokenIds: readonly number[];
  /** min_new_tokens masks these (always EOS ∪ stop ids, even with ignoreEos masking is moot). */
  readonly maskIds: readonly number[];
  readonly returnLogprob: boolean;
  readonly logprobStartLen: number;
  readonly topLogprobsNum: number;
  readonly stream: boolean;
  readonly arrivalMs: number;
  /** The grammar constraint (params.grammar), or null. */
  readonly grammar: GrammarSpec | null;
  readonly requireReasoning: boolean;
  /** The grammar mask for this step's sampled row (set by the scheduler before the forward). */
  vocabMask: Int32Array | null = null;
  /** When the request entered the grammar queue, ms (timeout). */
  grammarQueuedAtMs = 0;

  // --- KV state ---
  /** Row in ReqToTokenPool, −1 when none. */
  reqPoolIdx = -1;
  /** Tokens of fillIds whose KV is in the row. */
  kvCommittedLen = 0;
  /** Tokens of fillIds with KV locs in the row: kvCommittedLen, plus the locs allocated for the step in progress. */
  kvAllocatedLen = 0;
  /** Leading tokens owned by the prefix cache on this request's behalf. */
  cacheProtectedLen = 0;
  /** Locked prefix-cache node (root when none). */
  lastNode: PrefixNode | null = null;

  // --- per-admission state ---
  /** Tokens matched in the prefix cache at the latest admission. */
  prefixLen = 0;
  /** Tokens to compute in the current extend step. */
  extendInputLen = 0;
  /** True while a prefill is split over several steps and more chunks remain. */
  isChunked = false;

  // --- outcome ---
  finishReason: FinishReasonData | null = null;
  /** Abort requested while the request is in the pipeline (PP); applied when its micro-batches are back. */
  toFinish: FinishReasonData | null = null;
  /** Pipeline parallelism: micro-batches holding this request that are in flight (two chunks of one prompt may be). */
  inFlight = 0;
  numRetractions = 0;
  /** Failed steps this request was part of (Scheduler.step recovery). */
  numFailedSteps = 0;
  /**
   * Set when a failed step could not be pinned on one request: the request is then scheduled alone (its prefill and
   * one decode step) until it has shown it runs, so that a failure recurring on it is attributed to it alone.
   */
  isolate = false;
  cachedTokens = 0;
  /** Output ids already reported downstream. */
  sendOffset = 0;
  /** Prompt logprobs gathered so far (positions ≥ logprobStartLen). */
  inputTokenLogprobs: [number | null, number][] | null = null;
  inputTopLogprobs: ([number, number][] | null)[] | null = null;
  inputLogprobsSent = false;
  outputTokenLogprobs: [number, number][] = [];
  outputTopLogprobs: [number, number][][] = [];

  // --- speculative decoding (scheduler/spec_decode.ts) ---
  /** Tokens verified per step when speculative decoding is on (0 = off: no spec fields in outputs). */
  specNumDraftTokens = 0;
  /** Positions whose draft KV is in the draft pool. */
  specDraftLen = 0;
  /** The draft's top-k for the next token (level 0 of the next draft) and their probabilities. */
  specTopIds: Int32Array | null = null;
  specTopP: Float32Array | null = null;
  /** EAGLE: the draft's output hidden state paired with level 0 (hiddenSize f32). */
  specHidden: Float32Array | null = null;
  /** Verify steps this request took (SGLang spec_verify_ct). */
  specVerifyCt = 0;
  /** Draft tokens accepted over those steps (SGLang spec_accepted_tokens). */
  specAcceptedTokens = 0;

  /**
   * @param t tokenized request
   * @param maxNewTokens clamped max_new_tokens
   * @param eosIds model EOS ids
   */
  constructor(t: TokenizedReq, maxNewTokens: number, eosIds: readonly number[]) {
    this.rid = t.rid;
    this.originInputIds = t.inputIds;
    this.params = t.params;
    this.maxNewTokens = maxNewTokens;
    this.rng = new Rng(t.rngSeed);
    const stops = [...new Set([...eosIds, ...t.params.stopTokenIds])];
    this.maskIds = stops;
    this.stopTokenIds = t.params.ignoreEos ? [] : stops;
    this.returnLogprob = t.returnLogprob;
    this.logprobStartLen = t.logprobStartLen;
    this.topLogprobsNum = t.topLogprobsNum;
    this.stream = t.stream;
    this.arrivalMs = t.arrivalMs;
    this.grammar = t.params.grammar ?? null;
    this.requireReasoning = t.requireReasoning ?? false;
  }

  /** Prompt + output tokens: what a (re-)prefill computes. */
  fillIds(): number[] {
    return this.outputIds.length === 0 ? (this.originInputIds as number[]) : [...this.originInputIds, ...this.outputIds];
  }

  /** Length of fillIds. */
  get seqLen(): number {
    return this.originInputIds.length + this.outputIds.length;
  }

  /** True once a finish reason is set (stop, length or abort); the request takes no more decode steps. */
  get isFinished(): boolean {
    return this.finishReason !== null;
  }

  /** True when prompt logprobs are requested and not all computed yet. */
  get wantsInputLogprobs(): boolean {
    return this.returnLogprob && this.logprobStartLen >= 0 && this.logprobStartLen < this.originInputIds.length && !this.inputLogprobsSent;
  }

  /** Appends a sampled token and applies the stop rules (SGLang check_finished: length, then stop token). */
  appendToken(id: number): void {
    this.outputIds.push(id);
    this.outputCounts.set(id, (this.outputCounts.get(id) ?? 0) + 1);
    if (this.finishReason) return;
    if (this.outputIds.length >= this.maxNewTokens) this.finishReason = { type: 'length', length: this.maxNewTokens };
    else if (this.stopTokenIds.includes(id)) this.finishReason = { type: 'stop', matched: id };
  }

  /** This request's row-sampling inputs for the sampler. */
  samplingInfo(): RowSamplingInfo {
    return {
      params: this.params,
      rng: this.rng,
      outputCounts: this.outputCounts,
      numOutputTokens: this.outputIds.length,
      stopTokenIds: this.maskIds,
      topLogprobsNum: this.returnLogprob ? this.topLogprobsNum : 0,
      needLogprob: this.returnLogprob,
      vocabMask: this.vocabMask,
    };
  }

  /**
   * Prompt positions p of an extend of `n` tokens from kvCommittedLen whose logits give the logprob of prompt token
   * p + 1 (from max(logprobStartLen, 1) − 1 to L − 2).
   */
  scorePositions(n: number): number[] {
    if (!this.wantsInputLogprobs) return [];
    const L = this.originInputIds.length;
    const from = Math.max(this.kvCommittedLen, Math.max(this.logprobStartLen, 1) - 1);
    const to = Math.min(this.kvCommittedLen + n, L - 1);
    const out: number[] = [];
    for (let p = from; p < to; p++) out.push(p);
    return out;
  }

  /** The token output since the last one taken (new ids, their logprobs, prompt logprobs once). */
  takeOutput(): ReqTokenOutput {
    const from = this.sendOffset;
    this.sendOffset = this.outputIds.length;
    const out: { -readonly [K in keyof ReqTokenOutput]: ReqTokenOutput[K] } = {
      rid: this.rid,
      newIds: this.outputIds.slice(from),
      finishReason: this.finishReason,
      promptTokens: this.originInputIds.length,
      completionTokens: this.outputIds.length,
      cachedTokens: this.cachedTokens,
      numRetractions: this.numRetractions,
    };
    if (this.specNumDraftTokens > 0) {
      out.spec = { verifyCt: this.specVerifyCt, acceptedTokens: this.specAcceptedTokens, numDraftTokens: this.specNumDraftTokens };
    }
    if (this.returnLogprob) {
      out.outputTokenLogprobs = this.outputTokenLogprobs.slice(from);
      out.outputTopLogprobs = this.outputTopLogprobs.slice(from);
      if (this.inputTokenLogprobs && !this.inputLogprobsSent) {
        out.inputTokenLogprobs = this.inputTokenLogprobs;
        out.inputTopLogprobs = this.inputTopLogprobs ?? [];
        this.inputLogprobsSent = true;
      }
    }
    return out;
  }
}
