// Routed experts of an MoE layer (SGLang `layers/moe/fused_moe_triton/layer.py` FusedMoE): holds the per-expert
// SwiGLU weights and runs Ops.fusedMoe. EP sharding later marks non-local experts as null.
import type { ExpertWeights, Ops } from '../../kernels/index.js';

/** All routed experts of one layer. */
export class FusedMoE {
  /**
   * @param experts [numExperts] gate/up [I, D] and down [D, I] weights (null = not on this rank)
   */
  constructor(readonly experts: readonly (ExpertWeights | null)[], readonly hiddenSize: number, private readonly ops: Ops) {}

  /** Routed experts of the layer, local or not (config `n_routed_experts` / `num_local_experts`). */
  get numExperts(): number {
    return this.experts.length;
  }

  /**
   * @param x [numTokens, hiddenSize] f32
   * @param topkIds [numTokens, topK] i32
   * @param topkWeights [numTokens, topK] f32
   * @param out [numTokens, hiddenSize] f32 written in full (default: a new array); must not alias x
   * @returns [numTokens, hiddenSize] f32 = Σ_j w · Expert(x) (`out` when given)
   */
  forward(x: Float32Array, numTokens: number, topkIds: Int32Array, topkWeights: Float32Array, topK: number, out?: Float32Array): Float32Array {
    return this.ops.fusedMoe(x, numTokens, this.hiddenSize, this.experts, topkIds, topkWeights, topK, out);
  }
}
