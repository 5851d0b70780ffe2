// DSA lightning indexer maths (DeepSeek-V3.2): per-query index scores over cached index keys,
// and the causal top-k selection. Pure f32 maths on typed arrays; the projections live in the model.
//
// Formulas: model-spec.md §3.8.1–§3.8.3; upstream python/sglang/srt/layers/attention/nsa/nsa_indexer.py
// (Indexer), DeepSeek-V3.2-Exp inference/model.py (Indexer.forward). Like the float64 oracle of the fixtures we
// compute exact scores: the Hadamard rotation is orthonormal (no effect in exact maths) and the FP8 quantisation of
// q/k that the GPU kernels do is not emulated.
import type { AttentionBatch, Ops, RopeParams, SparseKeys, Weight } from '../../kernels/index.js';
import type { KVPool } from '../../mem_cache/index.js';

/**
 * Index scores of one query token against keys (model-spec.md §3.8.2, exact form):
 * `I[t] = Σ_h w[h] · ReLU(q[h] · k_t)`.
 * @param q [numHeads, headDim] f32 at `qOffset` (rotated indexer query of this token)
 * @param headWeights [numHeads] f32 at `wOffset` (weights_proj output × numHeads^−½ × headDim^−½)
 * @param indexK [numLocs, headDim] f32 (KVPool buffer 'index_k')
 * @param keyLocs [≥ numKeys] i32 loc of key position t, t = 0..numKeys−1
 * @param out [≥ numKeys] f32 receives I[0..numKeys)
 */
export function indexScores(
  q: Float32Array, qOffset: number, headWeights: Float32Array, wOffset: number, numHeads: number, headDim: number,
  indexK: Float32Array, keyLocs: Int32Array, numKeys: number, out: Float32Array,
): void {
  const tail = headDim & 3;
  for (let t = 0; t < numKeys; t++) {
    const kOff = keyLocs[t] * headDim;
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

/** Indexer sizes (HF config names in brackets). */
export interface DsaIndexerDims {
  /** [hidden_size] */
  readonly hiddenSize: number;
  /** [q_lora_rank] width of the normalised q latent the indexer query is projected from */
  readonly qLoraRank: number;
  /** [index_n_heads] */
  readonly numHeads: number;
  /** [index_head_dim] */
  readonly headDim: number;
  /** [qk_rope_head_dim] rotated dims at the start of each indexer head */
  readonly ropeDim: number;
  /** [index_topk] keys kept per query token */
  readonly topK: number;
}

/** Weights of one layer's indexer (checkpoint `self_attn.indexer.*`). */
export interface DsaIndexerWeights {
  /** wq_b [numHeads·headDim, qLoraRank] */
  readonly wqB: Weight;
  /** wk [headDim, hiddenSize] */
  readonly wk: Weight;
  /** k_norm.weight [headDim] f32 */
  readonly kNormWeight: Float32Array;
  /** k_norm.bias [headDim] f32 */
  readonly kNormBias: Float32Array;
  /** weights_proj [numHeads, hiddenSize] */
  readonly weightsProj: Weight;
}

/** KVPool buffer holding each token's indexer key (width index_head_dim). */
export const INDEX_K_BUFFER = 'index_k';

/**
 * The DSA lightning indexer of one layer (model-spec.md §3.8): computes and caches every token's index key, then
 * selects for each query row the `topK` causal key positions with the largest index score (all of them when the row's
 * sequence index + 1 ≤ topK). Rows are independent of each other (batch invariant); decode reads earlier keys from the
 * KVPool, so one prefill, chunked prefill and token-by-token decode select the same keys.
 */
export class DsaIndexer {
  private readonly softmaxFold: number;

  /**
   * @param rope NeoX half-split rope params on the first `ropeDim` dims of each head (deepseekRopeParams(..., 'neox'))
   */
  constructor(
    private readonly ops: Ops,
    private readonly w: DsaIndexerWeights,
    readonly dims: DsaIndexerDims,
    private readonly rope: RopeParams,
  ) {
    this.softmaxFold = 1 / Math.sqrt(dims.numHeads) / Math.sqrt(dims.headDim);
  }

  /**
   * Writes this step's index keys into `kvPool` (buffer 'index_k' of `kvLayer`) and returns the selected key positions.
   * @param hidden [numTokens, hiddenSize] f32 normalised layer input (the `a` of model-spec §3.7)
   * @param qLatent [numTokens, qLoraRank] f32 normalised q latent (`c_q`)
   * @param positions [numTokens] i32 RoPE positions
   * @param outCacheLoc [numTokens] i32 loc each token's index key is written to
   * @param batch request geometry: row t of req i has sequence index extendPrefixLens[i]+j and sees keys 0..that index
   * @param kvPool pool holding buffer 'index_k' ([locs, headDim] f32) for layer `kvLayer`
   * @param onSelection optional observer of each row's selection (debugging, golden tests)
   * @returns [numTokens, topK] i32 selected sequence indices per row, ascending, −1 padded
   * @throws InternalError (from the pool) when the layer or buffer does not exist
   */
  forward(
    hidden: Float32Array, qLatent: Float32Array, numTokens: number, positions: Int32Array, outCacheLoc: Int32Array,
    batch: AttentionBatch, kvPool: KVPool, kvLayer: number, onSelection?: (row: number, keys: Int32Array) => void,
  ): SparseKeys {
    const { numHeads, headDim, topK } = this.dims;
    const ops = this.ops;
    // 1. key: LayerNorm(wk·a), NeoX rope on its first ropeDim dims; cache it
    const k = ops.matmul(hidden, numTokens, this.w.wk); // [T, headDim]
    ops.layerNorm(k, numTokens, headDim, this.w.kNormWeight, this.w.kNormBias, 1e-6, k);
    ops.rope(k, numTokens, positions, { numHeads: 1, headDim }, this.rope);
    const indexK = kvPool.buffer(kvLayer, INDEX_K_BUFFER);
    for (let t = 0; t < numTokens; t++) indexK.set(k.subarray(t * headDim, (t + 1) * headDim), outCacheLoc[t] * headDim);
    // 2. queries and head weights — only needed when some row has more causal keys than topK ("k-only" otherwise,
    //    as SGLang's indexer skips the logits when max_kv_len <= index_topk)
    let maxKeys = 0;
    for (let i = 0; i < batch.numReqs; i++) maxKeys = Math.max(maxKeys, batch.extendPrefixLens[i] + batch.extendSeqLens[i]);
    let q: Float32Array = new Float32Array(0);
    let weights: Float32Array = new Float32Array(0);
    if (maxKeys > topK) {
      q = ops.matmul(qLatent, numTokens, this.w.wqB); // [T, numHeads·headDim]
      ops.rope(q, numTokens, positions, { numHeads, headDim }, this.rope);
      weights = ops.matmul(hidden, numTokens, this.w.weightsProj); // [T, numHeads]
      for (let i = 0; i < weights.length; i++) weights[i] *= this.softmaxFold;
    }
    // 3. per row: scores over its causal keys, top-k
    const indices = new Int32Array(numTokens * topK).fill(-1);
    const scores = new Float32Array(maxKeys);
    for (let i = 0; i < batch.numReqs; i++) {
      const start = batch.extendStartLoc[i];
      const tableRow = batch.reqPoolIndices[i] * batch.reqToTokenStride;
      const keyLocs = batch.reqToToken.subarray(tableRow, tableRow + batch.extendPrefixLens[i] + batch.extendSeqLens[i]);
      for (let j = 0; j < batch.extendSeqLens[i]; j++) {
        const t = start + j;
        const numKeys = batch.extendPrefixLens[i] + j + 1;
        const out = indices.subarray(t * topK, (t + 1) * topK);
        if (numKeys > topK) indexScores(q, t * numHeads * headDim, weights, t * numHeads, numHeads, headDim, indexK, keyLocs, numKeys, scores);
        const n = selectTopKCausal(scores, numKeys, topK, out);
        onSelection?.(t, out.subarray(0, n));
      }
    }
    return { indices, width: topK };
  }
}
