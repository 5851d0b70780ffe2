// RadixAttention: the attention layer models call (SGLang `layers/radix_attention.py`). Holds the layer geometry
// and delegates KV storage and the attention math to the AttentionBackend.
import type { SparseKeys } from '../../kernels/index.js';
import type { ForwardBatch } from '../forward_batch.js';
import type { AttentionBackend, AttentionLayerSpec } from './backend.js';

/** One attention layer over the paged KV cache. */
export class RadixAttention implements AttentionLayerSpec {
  constructor(
    readonly layerId: number,
    readonly numHeads: number,
    readonly numKvHeads: number,
    readonly headDim: number,
    readonly vHeadDim: number,
    readonly scaling: number,
  ) {}

  /**
   * Writes k/v at batch.outCacheLoc and attends.
   * @param q [numTokens, numHeads, headDim] f32
   * @param k [numTokens, numKvHeads, headDim] f32
   * @param v [numTokens, numKvHeads, vHeadDim] f32
   * @returns [numTokens, numHeads·vHeadDim] f32
   */
  forward(q: Float32Array, k: Float32Array, v: Float32Array, batch: ForwardBatch, backend: AttentionBackend, sparse?: SparseKeys): Float32Array {
    return backend.forward(this, q, k, v, batch, sparse);
  }
}
