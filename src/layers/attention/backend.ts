// AttentionBackend: how a RadixAttention layer's K/V reach the KV pool and how attention over it is computed
// (SGLang `layers/attention/base_attn_backend.py`). One instance serves every layer of a model.
import type { SparseKeys } from '../../kernels/index.js';
import type { ForwardBatch } from '../forward_batch.js';

/** Geometry of one attention layer (what RadixAttention holds). */
export interface AttentionLayerSpec {
  readonly layerId: number;
  readonly numHeads: number;
  readonly numKvHeads: number;
  /** q/k dim per head. */
  readonly headDim: number;
  /** v dim per head. */
  readonly vHeadDim: number;
  /** Softmax scale. */
  readonly scaling: number;
}

/**
 * Contract: `forward` first stores this step's k/v rows at `batch.outCacheLoc` in the pool buffers 'k' and 'v' of
 * `layer.layerId` (growing the pool if needed), then returns attention of q over each row's causal keys (cached
 * prefix + this step). Works for every ForwardMode; results are per-row (batch invariant).
 */
export interface AttentionBackend {
  /** Called once per model forward before the first layer (may precompute per-batch metadata). */
  initForwardMetadata(batch: ForwardBatch): void;
  /**
   * @param q [numTokens, numHeads, headDim] f32
   * @param k [numTokens, numKvHeads, headDim] f32 (already normed/rotated)
   * @param v [numTokens, numKvHeads, vHeadDim] f32
   * @param sparse optional per-row key subset (DSA)
   * @returns [numTokens, numHeads, vHeadDim] f32
   */
  forward(layer: AttentionLayerSpec, q: Float32Array, k: Float32Array, v: Float32Array, batch: ForwardBatch, sparse?: SparseKeys): Float32Array;
}
