// Reference causal attention over the paged KV cache for a flat multi-request batch (extend, decode, mixed),
// with optional sparse key selection (DSA). One query row at a time: batch invariant by construction.
import { assert, decodeKvRow, f32KvStore } from '../../common/index.js';
import type { AttentionBatch, AttentionParams, SparseKeys } from '../ops.js';

/**
 * softmax(q·kᵀ·scale) · v per query row and head, over the row's causal keys (sequence indices 0..prefix+j),
 * keys and values read through reqToToken → loc → pool row. Scores and the weighted sum accumulate in f64 in
 * ascending key index. (SGLang `layers/attention/torch_native_backend.py` semantics.) Keys and values stored in a
 * KvStore codec (bf16, FP8) are dequantized element by element as they are read (decodeKvRow), never copied out.
 * @param q [numTokens, numHeads, headDim] f32
 * @returns [numTokens, numHeads, vHeadDim] f32
 * @throws InternalError when heads do not divide or a row lies outside the batch geometry
 */
export function attention(q: Float32Array, numTokens: number, p: AttentionParams, batch: AttentionBatch, sparse?: SparseKeys): Float32Array {
  const { numHeads, numKvHeads, headDim, vHeadDim, scale } = p;
  assert(numHeads % numKvHeads === 0, () => `attention: ${numHeads} heads not divisible by ${numKvHeads} kv heads`);
  const group = numHeads / numKvHeads;
  const out = new Float32Array(numTokens * numHeads * vHeadDim);
  let maxKeys = 0;
  for (let i = 0; i < batch.numReqs; i++) maxKeys = Math.max(maxKeys, batch.extendPrefixLens[i] + batch.extendSeqLens[i]);
  const keyLocs = new Int32Array(maxKeys);
  const scores = new Float64Array(maxKeys);
  const acc = new Float64Array(vHeadDim);
  const kStore = p.kBuf instanceof Float32Array ? f32KvStore(p.kBuf, p.kRowWidth) : p.kBuf;
  const vStore = p.vBuf instanceof Float32Array ? f32KvStore(p.vBuf, p.vRowWidth) : p.vBuf;
  const kRow = new Float32Array(headDim);
  const vRow = new Float32Array(vHeadDim);

  for (let i = 0; i < batch.numReqs; i++) {
    const start = batch.extendStartLoc[i];
    const prefix = batch.extendPrefixLens[i];
    const tableRow = batch.reqPoolIndices[i] * batch.reqToTokenStride;
    assert(start + batch.extendSeqLens[i] <= numTokens, 'attention: req rows beyond numTokens');
    for (let j = 0; j < batch.extendSeqLens[i]; j++) {
      const t = start + j;
      const last = prefix + j; // sequence index of this row; keys 0..last are visible
      // 1. the visible keys' locs, in ascending sequence index
      let numKeys = 0;
      if (sparse) {
        const sel = sparse.indices.subarray(t * sparse.width, (t + 1) * sparse.width);
        const picked = Array.from(sel).filter((s) => s >= 0 && s <= last).sort((a, b) => a - b);
        for (const s of picked) keyLocs[numKeys++] = batch.reqToToken[tableRow + s];
      } else {
        for (let s = 0; s <= last; s++) keyLocs[numKeys++] = batch.reqToToken[tableRow + s];
      }
      for (let h = 0; h < numHeads; h++) {
        const kvHead = Math.floor(h / group);
        const qOff = (t * numHeads + h) * headDim;
        const kHeadOff = p.kOffset + kvHead * headDim;
        const vHeadOff = p.vOffset + kvHead * vHeadDim;
        // 2. scores and their max
        let max = -Infinity;
        for (let s = 0; s < numKeys; s++) {
          decodeKvRow(kStore, keyLocs[s], kHeadOff, headDim, kRow);
          let d = 0;
          for (let e = 0; e < headDim; e++) d += q[qOff + e] * kRow[e];
          const sc = d * scale;
          scores[s] = sc;
          if (sc > max) max = sc;
        }
        // 3. softmax-weighted sum of values
        acc.fill(0);
        let sum = 0;
        for (let s = 0; s < numKeys; s++) {
          const w = Math.exp(scores[s] - max);
          sum += w;
          decodeKvRow(vStore, keyLocs[s], vHeadOff, vHeadDim, vRow);
          for (let e = 0; e < vHeadDim; e++) acc[e] += w * vRow[e];
        }
        const oOff = (t * numHeads + h) * vHeadDim;
        const inv = numKeys > 0 ? 1 / sum : 0;
        for (let e = 0; e < vHeadDim; e++) out[oOff + e] = acc[e] * inv;
      }
    }
  }
  return out;
}
