// DSA lightning indexer maths (DeepSeek-V3.2): the key LayerNorm, per-query index scores over cached index keys,
// and the causal top-k selection. Pure f32 maths on typed arrays; the projections live in the model.
//
// Formulas: model-spec.md §3.8.1–§3.8.3; upstream python/sglang/srt/layers/attention/nsa/nsa_indexer.py
// (Indexer), DeepSeek-V3.2-Exp inference/model.py (Indexer.forward). Like the float64 oracle of the fixtures we
// compute exact scores: the Hadamard rotation is orthonormal (no effect in exact maths) and the FP8 quantisation of
// q/k that the GPU kernels do is not emulated.

/**
 * LayerNorm of one row with weight and bias (indexer `k_norm`, eps 1e-6): `(x−μ)/sqrt(σ²+eps)·w + b`, f32 out,
 * statistics accumulated in f64.
 * @param x [numRows, dim] f32, normalised in place
 * @param weight [dim] f32
 * @param bias [dim] f32
 */
export function keyLayerNormInPlace(x: Float32Array, numRows: number, dim: number, weight: Float32Array, bias: Float32Array, eps: number): void {
  for (let r = 0; r < numRows; r++) {
    const o = r * dim;
    let mean = 0;
    for (let i = 0; i < dim; i++) mean += x[o + i];
    mean /= dim;
    let variance = 0;
    for (let i = 0; i < dim; i++) {
      const d = x[o + i] - mean;
      variance += d * d;
    }
    variance /= dim;
    const inv = 1 / Math.sqrt(variance + eps);
    for (let i = 0; i < dim; i++) x[o + i] = (x[o + i] - mean) * inv * weight[i] + bias[i];
  }
}

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
  for (let t = 0; t < numKeys; t++) {
    const kOff = keyLocs[t] * headDim;
    let score = 0;
    for (let h = 0; h < numHeads; h++) {
      const qOff = qOffset + h * headDim;
      let dot = 0;
      for (let d = 0; d < headDim; d++) dot += q[qOff + d] * indexK[kOff + d];
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
