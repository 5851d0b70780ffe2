// Reference DSA lightning-indexer selection (DeepSeek-V3.2): index scores of a query row over its cached index keys
// and the causal top-k. Rows are independent (batch invariant).
//
// Formulas: model-spec.md §3.8.2–§3.8.3; upstream python/sglang/srt/layers/attention/nsa/nsa_indexer.py. Like the
// float64 oracle of the fixtures we compute exact scores (no Hadamard rotation, no FP8 quantisation of q/k).
import { assert, decodeKvRow } from '../../common/index.js';
import type { AttentionBatch, IndexerParams } from '../ops.js';

/**
 * Index scores of one query token against keys (model-spec.md §3.8.2, exact form):
 * `I[t] = Σ_h w[h] · ReLU(q[h] · k_t)` (f64 dot products, rounded to f32 at the end).
 * @param q [numHeads, headDim] f32 at `qOffset` (rotated indexer query of this token)
 * @param headWeights [numHeads] f32 at `wOffset` (weights_proj output × numHeads^−½ × headDim^−½)
 * @param indexK [numLocs, kRowWidth] f32 (KVPool buffer 'index_k'); key of loc l at l·kRowWidth
 * @param keyLocs [≥ numKeys] i32 loc of key position t, t = 0..numKeys−1
 * @param out [≥ numKeys] f32 receives I[0..numKeys)
 */
export function indexScores(
  q: Float32Array, qOffset: number, headWeights: Float32Array, wOffset: number, numHeads: number, headDim: number,
  indexK: Float32Array, keyLocs: Int32Array, numKeys: number, out: Float32Array, kRowWidth = headDim,
): void {
  const tail = headDim & 3;
  for (let t = 0; t < numKeys; t++) {
    const kOff = keyLocs[t] * kRowWidth;
    let score = 0;
    for (let h = 0; h < numHeads; h++) {
      const qOff = qOffset + h * headDim;
      // four partial sums (fixed order: the result depends only on q and k, never on the batch)
      let d0 = 0, d1 = 0, d2 = 0, d3 = 0;
      let d = 0;
      for (; d < headDim - tail; d += 4) {
        d0 += q[qOff + d] * indexK[kOff + d];
        d1 += q[qOff + d + 1] * indexK[kOff + d + 1];
        d2 += q[qOff + d + 2] * indexK[kOff + d + 2];
        d3 += q[qOff + d + 3] * indexK[kOff + d + 3];
      }
      for (; d < headDim; d++) d0 += q[qOff + d] * indexK[kOff + d];
      const dot = (d0 + d1) + (d2 + d3);
      if (dot > 0) score += headWeights[wOffset + h] * dot;
    }
    out[t] = score;
  }
}

/**
 * Causal top-k selection (model-spec.md §3.8.3): the `topK` key positions with the largest score among
 * 0..numKeys−1, ties broken towards the lower position; all positions when numKeys ≤ topK (then DSA equals dense
 * causal attention). The result is sorted ascending, so attention sums keys in position order either way.
 * @param scores [≥ numKeys] f32 index scores of the causal keys
 * @param out [≥ min(numKeys, topK)] i32 receives the selected positions
 * @returns the number of positions written: min(numKeys, topK)
 */
export function selectTopKCausal(scores: Float32Array, numKeys: number, topK: number, out: Int32Array): number {
  if (numKeys <= topK) {
    for (let t = 0; t < numKeys; t++) out[t] = t;
    return numKeys;
  }
  const threshold = kthLargest(scores.slice(0, numKeys), topK);
  let above = 0;
  for (let t = 0; t < numKeys; t++) if (scores[t] > threshold) above++;
  let tiesLeft = topK - above;
  let n = 0;
  for (let t = 0; t < numKeys; t++) {
    const s = scores[t];
    if (s > threshold || (s === threshold && tiesLeft-- > 0)) out[n++] = t;
  }
  return n;
}

/** k-th largest value (1-based) of `a` by quickselect; reorders `a`. */
function kthLargest(a: Float32Array, k: number): number {
  let lo = 0;
  let hi = a.length - 1;
  const target = k - 1; // index in descending order
  while (lo < hi) {
    const pivot = a[(lo + hi) >>> 1];
    let i = lo;
    let j = hi;
    while (i <= j) {
      while (a[i] > pivot) i++;
      while (a[j] < pivot) j--;
      if (i <= j) {
        const tmp = a[i]; a[i] = a[j]; a[j] = tmp;
        i++;
        j--;
      }
    }
    if (target <= j) hi = j;
    else if (target >= i) lo = i;
    else return a[target];
  }
  return a[target];
}

/**
 * Indexer top-k of every row of a flat batch: row j of req i (sequence index last = extendPrefixLens[i]+j) keeps all
 * positions 0..last when last+1 ≤ topK, else the topK positions with the largest {@link indexScores} (keys read through
 * reqToToken → loc → `p.kBuf`), ascending; unused slots −1. Keys in a KvStore codec (SGLang's FP8 index keys with a
 * 128-block scale) are dequantized per request into a scratch copy of its key rows (the readable reference; the native
 * kernel reads the FP8 rows in place).
 * @param q [numTokens, numHeads, headDim] f32 (read only for rows with more than topK keys; may be empty otherwise)
 * @param weights [numTokens, numHeads] f32 (likewise)
 * @returns [numTokens, topK] i32
 * @throws InternalError when a row lies outside the batch geometry
 */
export function indexerTopK(q: Float32Array, weights: Float32Array, numTokens: number, p: IndexerParams, batch: AttentionBatch): Int32Array {
  const { numHeads, headDim, topK } = p;
  const out = new Int32Array(numTokens * topK).fill(-1);
  let maxKeys = 0;
  for (let i = 0; i < batch.numReqs; i++) maxKeys = Math.max(maxKeys, batch.extendPrefixLens[i] + batch.extendSeqLens[i]);
  const scores = new Float32Array(maxKeys);
  for (let i = 0; i < batch.numReqs; i++) {
    const start = batch.extendStartLoc[i];
    assert(start + batch.extendSeqLens[i] <= numTokens, 'indexerTopK: req rows beyond numTokens');
    const tableRow = batch.reqPoolIndices[i] * batch.reqToTokenStride;
    let keyLocs = batch.reqToToken.subarray(tableRow, tableRow + batch.extendPrefixLens[i] + batch.extendSeqLens[i]);
    let kBuf: Float32Array;
    let kRowWidth = p.kRowWidth;
    if (p.kBuf instanceof Float32Array) kBuf = p.kBuf;
    else {
      const store = p.kBuf;
      kBuf = new Float32Array(keyLocs.length * headDim);
      for (let s = 0; s < keyLocs.length; s++) decodeKvRow(store, keyLocs[s], 0, headDim, kBuf.subarray(s * headDim, (s + 1) * headDim));
      keyLocs = Int32Array.from(keyLocs, (_, s) => s);
      kRowWidth = headDim;
    }
    for (let j = 0; j < batch.extendSeqLens[i]; j++) {
      const t = start + j;
      const numKeys = batch.extendPrefixLens[i] + j + 1;
      if (numKeys > topK) indexScores(q, t * numHeads * headDim, weights, t * numHeads, numHeads, headDim, kBuf, keyLocs, numKeys, scores, kRowWidth);
      selectTopKCausal(scores, numKeys, topK, out.subarray(t * topK, (t + 1) * topK));
    }
  }
  return out;
}
