// ForwardMode and ForwardBatch: the flat per-step inputs every layer reads. Built by the scheduler
// (scheduler/forward_batch_builder.ts) or by tools (cli logits); owned here by its consumers (layers, models).
//
//   ScheduleBatch (reqs) --lower--> ForwardBatch (typed arrays) --model.forward--> logits [numLogitRows, vocabSize]
import type { KVPool } from '../mem_cache/index.js';

/**
 * What kind of forward this is (SGLang `ForwardMode`):
 * - extend: append ≥1 tokens per req on top of a cached prefix (prefill is an extend with prefixLen 0)
 * - decode: exactly one new token per req
 * - mixed: extend reqs followed by decode reqs in one batch (chunked prefill + decode)
 * - idle: no tokens (DP ranks with nothing to do)
 * - target_verify / draft_extend: speculative decoding (later)
 */
export type ForwardMode = 'extend' | 'decode' | 'mixed' | 'idle' | 'target_verify' | 'draft_extend';

/**
 * One forward step over a flat token batch. Token rows of req i are contiguous, in req order:
 * rows [extendStartLoc[i], extendStartLoc[i] + extendSeqLens[i]).
 * Every token's K/V (or latent) is written to `outCacheLoc[t]` before attention reads it, so attention for req i
 * reads locs `reqToToken[reqPoolIndices[i] * reqToTokenStride + p]` for p in [0, seqLens[i]).
 */
export interface ForwardBatch {
  readonly forwardMode: ForwardMode;
  /** Number of requests. */
  readonly numReqs: number;
  /** Sum of extendSeqLens: number of token rows in this forward. */
  readonly numTokens: number;
  /** [numTokens] i32 token ids. */
  readonly inputIds: Int32Array;
  /** [numTokens] i32 absolute position of each token in its sequence (RoPE position). */
  readonly positions: Int32Array;
  /** [numTokens] i32 KV loc each token's K/V is written to. */
  readonly outCacheLoc: Int32Array;
  /** [numReqs] i32 tokens already cached before this step (0 for a fresh prefill; seqLen-1 for decode). */
  readonly extendPrefixLens: Int32Array;
  /** [numReqs] i32 new tokens of each req in this step (1 for decode). */
  readonly extendSeqLens: Int32Array;
  /** [numReqs] i32 total length after this step: extendPrefixLens + extendSeqLens. */
  readonly seqLens: Int32Array;
  /** [numReqs] i32 first token row of each req in the flat batch (exclusive prefix sum of extendSeqLens). */
  readonly extendStartLoc: Int32Array;
  /** [numReqs] i32 row of each req in the reqToToken table. */
  readonly reqPoolIndices: Int32Array;
  /** [numRows, reqToTokenStride] i32 req row × position → KV loc (the ReqToTokenPool table, shared, not copied). */
  readonly reqToToken: Int32Array;
  /** Row length of reqToToken (the context length the table was built for). */
  readonly reqToTokenStride: number;
  /**
   * [numLogitRows] i32 token rows whose logits are wanted, ascending (default: the last token of each req).
   * The model returns logits in this order.
   */
  readonly logitRows: Int32Array;
  /** If true the model also returns the final-norm hidden states of `logitRows` (MTP / EAGLE input). */
  readonly captureHiddenStates?: boolean;
  /**
   * If true the model also returns the final-norm hidden states of every token row (`allHiddenStates`; EAGLE's
   * draft input: the target hidden state of each position, serving-spec §4.2). Models without an MTP draft ignore it.
   */
  readonly captureAllHidden?: boolean;
  /** If true the model also returns the routed experts of every token and MoE layer (debug / tests; added by A). */
  readonly captureRoutedExperts?: boolean;
  /**
   * Where the logits go ([≥ numLogitRows · vocabSize] f32, overwritten), instead of a fresh array: ModelRunner's
   * buffer reused from step to step (the logits of a 256-row decode step at a 129K vocabulary are 132 MB, and
   * allocating, zeroing and faulting them in anew each step cost ~20 % of its CPU time). The caller consumes the
   * logits before the next forward.
   */
  readonly logitsOut?: Float32Array;
  /**
   * Pipeline parallelism, stages after the first: [numTokens, hiddenSize] f32 residual stream the previous stage
   * produced for these token rows (its input to this stage's first layer, in place of the embedding; updated in place).
   */
  readonly ppHiddenIn?: Float32Array;
  /** KV storage this forward reads and writes. */
  readonly kvPool: KVPool;
}

/** Output of a model forward. */
export interface ForwardOutput {
  /** [numLogitRows, vocabSize] f32 logits of batch.logitRows, in that order. */
  readonly logits: Float32Array;
  /** [numLogitRows, hiddenSize] f32 final-norm hidden states, when batch.captureHiddenStates. */
  readonly hiddenStates?: Float32Array;
  /** [numTokens, hiddenSize] f32 final-norm hidden states of every token row, when batch.captureAllHidden. */
  readonly allHiddenStates?: Float32Array;
  /**
   * When batch.captureRoutedExperts: per decoder layer (index = layer id; null for a dense layer) the
   * [numTokens, topK] i32 routed expert ids of every token row, in selection order.
   */
  readonly routedExperts?: readonly (Int32Array | null)[];
  /**
   * Pipeline parallelism, stages before the last: [numTokens, hiddenSize] f32 residual stream after this stage's
   * layers (the next stage's ppHiddenIn); `logits` is then empty.
   */
  readonly ppHiddenOut?: Float32Array;
}

/** True for modes that carry several tokens per request (extend, mixed, draft_extend, target_verify). */
export function isExtendLike(mode: ForwardMode): boolean {
  return mode === 'extend' || mode === 'mixed' || mode === 'draft_extend' || mode === 'target_verify';
}
