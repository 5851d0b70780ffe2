// Lowers one scheduled step (extend entries, then decode entries) to a ForwardBatch of flat typed arrays
// (SGLang ScheduleBatch → ForwardBatch). Rows of req i are contiguous; extends come before decodes.
import type { ForwardBatch, ForwardMode } from '../layers/index.js';
import type { KVPool } from '../mem_cache/index.js';

/** One request's part of a step. */
export interface BatchEntry {
  readonly reqPoolIdx: number;
  /** Tokens whose KV is already in the cache before this step. */
  readonly prefixLen: number;
  /** [extendLen] token ids computed this step. */
  readonly inputIds: ArrayLike<number>;
  /** [extendLen] i32 KV locs they are written to. */
  readonly outCacheLoc: Int32Array;
  /** True for a decode entry (one token). */
  readonly isDecode: boolean;
  /** Positions (relative to the entry's first token) whose logits are wanted, ascending. */
  readonly logitOffsets: readonly number[];
}

/**
 * Builds the ForwardBatch for `entries` (extend entries first, then decode entries).
 * @param reqToToken [rows, stride] i32 shared table
 * @returns the batch; logitRows hold the entries' logitOffsets in entry order
 */
export function buildForwardBatch(entries: readonly BatchEntry[], reqToToken: Int32Array, stride: number, kvPool: KVPool): ForwardBatch {
  const numReqs = entries.length;
  let numTokens = 0;
  let numLogits = 0;
  let hasExtend = false;
  let hasDecode = false;
  for (const e of entries) {
    numTokens += e.inputIds.length;
    numLogits += e.logitOffsets.length;
    if (e.isDecode) hasDecode = true;
    else hasExtend = true;
  }
  const forwardMode: ForwardMode = hasExtend && hasDecode ? 'mixed' : hasExtend ? 'extend' : hasDecode ? 'decode' : 'idle';
  const inputIds = new Int32Array(numTokens);
  const positions = new Int32Array(numTokens);
  const outCacheLoc = new Int32Array(numTokens);
  const extendPrefixLens = new Int32Array(numReqs);
  const extendSeqLens = new Int32Array(numReqs);
  const seqLens = new Int32Array(numReqs);
  const extendStartLoc = new Int32Array(numReqs);
  const reqPoolIndices = new Int32Array(numReqs);
  const logitRows = new Int32Array(numLogits);
  let t = 0;
  let l = 0;
  entries.forEach((e, i) => {
    const n = e.inputIds.length;
    extendPrefixLens[i] = e.prefixLen;
    extendSeqLens[i] = n;
    seqLens[i] = e.prefixLen + n;
    extendStartLoc[i] = t;
    reqPoolIndices[i] = e.reqPoolIdx;
    for (const off of e.logitOffsets) logitRows[l++] = t + off;
    for (let j = 0; j < n; j++) {
      inputIds[t] = e.inputIds[j];
      positions[t] = e.prefixLen + j;
      outCacheLoc[t] = e.outCacheLoc[j];
      t++;
    }
  });
  return {
    forwardMode,
    numReqs,
    numTokens,
    inputIds,
    positions,
    outCacheLoc,
    extendPrefixLens,
    extendSeqLens,
    seqLens,
    extendStartLoc,
    reqPoolIndices,
    reqToToken,
    reqToTokenStride: stride,
    logitRows,
    kvPool,
  };
}
