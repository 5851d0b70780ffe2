// Reference routed-experts MLP: gather each expert's tokens, SwiGLU, weighted scatter-add in ascending expert id.
import { assert } from '../../common/index.js';
import type { ExpertWeights } from '../ops.js';
import { siluAndMul } from './activation.js';
import { matmul } from './matmul.js';

/**
 * out[t] = Σ_j w[t,j] · down(silu(gate(x_t)) ⊙ up(x_t)) over the token's experts (SGLang `layers/moe/fused_moe_triton`
 * semantics). Sums run in f64 per token in ascending expert id, then round to f32, so a token's result does not
 * depend on the other tokens.
 * @param x [numTokens, D] f32
 * @param topkIds [numTokens, topK] i32 (−1 or a null expert: skipped)
 * @param topkWeights [numTokens, topK] f32
 * @returns [numTokens, D] f32
 */
export function fusedMoe(x: Float32Array, numTokens: number, hiddenSize: number, experts: readonly (ExpertWeights | null)[], topkIds: Int32Array, topkWeights: Float32Array, topK: number, out?: Float32Array): Float32Array {
  const acc = new Float64Array(numTokens * hiddenSize);
  // Token list per expert (tokens ascending within each expert).
  const rowsOf: number[][] = experts.map(() => []);
  const weightOf: number[][] = experts.map(() => []);
  for (let t = 0; t < numTokens; t++) {
    for (let j = 0; j < topK; j++) {
      const e = topkIds[t * topK + j];
      if (e < 0) continue;
      assert(e < experts.length, () => `fusedMoe: expert id ${e} >= ${experts.length}`);
      if (experts[e] === null) continue;
      rowsOf[e].push(t);
      weightOf[e].push(topkWeights[t * topK + j]);
    }
  }
  for (let e = 0; e < experts.length; e++) {
    const ex = experts[e];
    const rows = rowsOf[e];
    if (ex === null || rows.length === 0) continue;
    const xe = new Float32Array(rows.length * hiddenSize);
    for (let r = 0; r < rows.length; r++) xe.set(x.subarray(rows[r] * hiddenSize, (rows[r] + 1) * hiddenSize), r * hiddenSize);
    const gate = matmul(xe, rows.length, ex.gate);
    const up = matmul(xe, rows.length, ex.up);
    const h = siluAndMul(gate, up, gate);
    const y = matmul(h, rows.length, ex.down);
    for (let r = 0; r < rows.length; r++) {
      const w = weightOf[e][r];
      const ao = rows[r] * hiddenSize;
      const yo = r * hiddenSize;
      for (let d = 0; d < hiddenSize; d++) acc[ao + d] += w * y[yo + d];
    }
  }
  const res = out ?? new Float32Array(numTokens * hiddenSize);
  for (let i = 0; i < res.length; i++) res[i] = acc[i];
  return res;
}
