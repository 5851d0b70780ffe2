// Reference attention backend: copies K/V rows into the paged pool, then Ops.attention over reqToToken locs.
import { assert } from '../../common/index.js';
import type { Ops, SparseKeys } from '../../kernels/index.js';
import type { ForwardBatch } from '../forward_batch.js';
import type { AttentionBackend, AttentionLayerSpec } from './backend.js';

/**
 * Stores K into buffer 'k' (width numKvHeads·headDim) and V into 'v' (width numKvHeads·vHeadDim) of the layer,
 * one row per loc, encoded in the pool's KV codec (--kv-cache-dtype: f32, bf16, FP8 × k_scale / v_scale), then runs
 * Ops.attention over the stored rows (SGLang `layers/attention/torch_native_backend.py` semantics).
 */
export class CpuAttentionBackend implements AttentionBackend {
  constructor(private readonly ops: Ops) {}

  initForwardMetadata(batch: ForwardBatch): void {
    let maxLoc = 0;
    for (let t = 0; t < batch.numTokens; t++) maxLoc = Math.max(maxLoc, batch.outCacheLoc[t]);
    batch.kvPool.ensureLocs(maxLoc + 1);
  }

  forward(layer: AttentionLayerSpec, q: Float32Array, k: Float32Array, v: Float32Array, batch: ForwardBatch, sparse?: SparseKeys): Float32Array {
    const pool = batch.kvPool;
    const kWidth = layer.numKvHeads * layer.headDim;
    const vWidth = layer.numKvHeads * layer.vHeadDim;
    assert(pool.width('k') === kWidth && pool.width('v') === vWidth, () => `CpuAttentionBackend: pool widths k=${pool.width('k')} v=${pool.width('v')}, layer needs ${kWidth}/${vWidth}`);
    pool.write(layer.layerId, 'k', batch.outCacheLoc, batch.numTokens, k, kWidth);
    pool.write(layer.layerId, 'v', batch.outCacheLoc, batch.numTokens, v, vWidth);
    const kBuf = pool.store(layer.layerId, 'k');
    const vBuf = pool.store(layer.layerId, 'v');
    return this.ops.attention(q, batch.numTokens, {
      numHeads: layer.numHeads,
      numKvHeads: layer.numKvHeads,
      headDim: layer.headDim,
      vHeadDim: layer.vHeadDim,
      scale: layer.scaling,
      kBuf, kRowWidth: kWidth, kOffset: 0,
      vBuf, vRowWidth: vWidth, vOffset: 0,
    }, batch, sparse);
  }
}
