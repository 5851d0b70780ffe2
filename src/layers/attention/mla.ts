// The MLA attention layer over the latent KV cache: absorbed (MQA) decode/extend and expanded (MHA) extend, dense or
// over the DSA indexer's sparse keys, with prefill context parallelism (mla_cp.ts). The maths is in mla_math.ts.
import { decodeKvRow, InternalError } from '../../common/index.js';
import type { KvStore } from '../../common/index.js';
import { weightToF32 } from '../../kernels/index.js';
import type { Ops, RopeParams, SparseKeys, Weight } from '../../kernels/index.js';
import type { ForwardBatch } from '../forward_batch.js';
import type { DsaIndexer } from './dsa_indexer.js';
import type { ContextParallel } from '../context_parallel.js';
import { mlaForwardCp } from './mla_cp.js';
import { prepareMlaAbsorbWeights, mlaAbsorbQueryOps, mlaAbsorbOutputOps, mlaExpandKv, mlaExpandedAttention, type MlaDims, type MlaAbsorbWeights } from './mla_math.js';
//
// Formulas: model-spec.md §3.7, §3.7.1, §3.8.4; upstream python/sglang/srt/models/deepseek_v2.py
// (forward_absorb_prepare/core, forward_normal).

/** KVPool buffer holding each token's latent row `[c_kv | k_rope]` (width kvLoraRank + qkRopeHeadDim). */
export const LATENT_KV_BUFFER = 'kv';

/**
 * Which MLA form extend-like batches use; decode batches always use the absorbed form. NOTE: only 'absorbed' (the
 * default) is bit-for-bit batch invariant across modes — with 'expanded' a decode row computed inside a mixed batch
 * differs from the same row in a decode batch at f32 rounding level (≈1e-6). 'expanded' exists to cross-check.
 */
export type MlaExtendForm = 'absorbed' | 'expanded';

/** Weights of one MLA block (checkpoint `self_attn.*`). */
export interface MlaWeights {
  /** q_a_proj [qLoraRank, hiddenSize], or null when q_lora_rank is null (then qBProj is q_proj). */
  readonly qAProj: Weight | null;
  /** q_a_layernorm [qLoraRank] f32, or null with qAProj. */
  readonly qALayernorm: Float32Array | null;
  /** q_b_proj [numHeads·(dn+dr), qLoraRank] (or q_proj [numHeads·(dn+dr), hiddenSize]). */
  readonly qBProj: Weight;
  /** kv_a_proj_with_mqa [kvLoraRank+dr, hiddenSize] */
  readonly kvAProjWithMqa: Weight;
  /** kv_a_layernorm [kvLoraRank] f32 */
  readonly kvALayernorm: Float32Array;
  /** kv_b_proj [numHeads·(dn+dv), kvLoraRank] (W_UK / W_UV are its per-head row blocks), as the backend holds it. */
  readonly kvBProj: Weight;
  /** o_proj [hiddenSize, numHeads·dv] */
  readonly oProj: Weight;
}

/** MLA options that are not checkpoint weights. */
export interface MlaOptions {
  readonly hiddenSize: number;
  /** RMSNorm eps of q_a_layernorm / kv_a_layernorm. */
  readonly rmsNormEps: number;
  /** Softmax scale (deepseekSoftmaxScale). */
  readonly scale: number;
  /** Interleaved rope on q_rope / k_rope (deepseekRopeParams(..., 'interleaved')). */
  readonly rope: RopeParams;
  readonly extendForm: MlaExtendForm;
  /** Prefill CP (interleave) of this rank (layers/context_parallel.ts; mla_cp.ts); absent: no CP. */
  readonly cp?: ContextParallel;
}

/**
 * DeepSeek MLA attention of one layer (model-spec.md §3.7), optionally restricted to the DSA indexer's top-k keys
 * (§3.8.4). Writes each token's latent row into the KVPool buffer 'kv' at `batch.outCacheLoc` before attending, so
 * every row reads its prefix (from earlier steps) and its own step's keys the same way. Each row's output depends only
 * on that row and the cache (batch invariant).
 */
export class MlaAttention {
  /** kv_b_proj rearranged for the absorbed form (backend weights). */
  private readonly absorb: MlaAbsorbWeights;
  /** kv_b_proj dequantised to f32, made on first use of the expanded form. */
  private kvBF32: Float32Array | null = null;

  /** @throws InternalError when kv_b_proj does not match dims */
  constructor(
    private readonly ops: Ops,
    private readonly w: MlaWeights,
    readonly dims: MlaDims,
    private readonly opts: MlaOptions,
    private readonly indexer: DsaIndexer | null,
  ) {
    this.absorb = prepareMlaAbsorbWeights(ops, w.kvBProj, dims);
  }

  /**
   * @param hidden [numTokens, hiddenSize] f32 normalised layer input
   * @param kvLayer layer index inside batch.kvPool
   * @param onIndexerSelection optional observer of the per-row key selection (the indexer's, or the shared one)
   * @param sharedKeys for a DSA layer without an indexer of its own (Index Cache): the previous layer's top-k for
   *   the same rows, attended instead of all keys
   * @returns out: [numTokens, hiddenSize] f32 attention output (before the residual add); keys: the key selection
   *   this layer attended (its indexer's, or sharedKeys), for a following layer that reuses it
   * @throws InternalError when the pool lacks the layer/buffers or an indexer is configured without q_lora_rank
   */
  forward(
    hidden: Float32Array, batch: ForwardBatch, kvLayer: number, onIndexerSelection?: (row: number, keys: Int32Array) => void,
    sharedKeys?: SparseKeys,
  ): { out: Float32Array; keys: SparseKeys | undefined } {
    const cp = this.opts.cp;
    if (cp && this.opts.extendForm === 'absorbed' && cp.applies(batch)) {
      return mlaForwardCp({ ops: this.ops, w: this.w, dims: this.dims, opts: this.opts, indexer: this.indexer, absorb: this.absorb }, cp, hidden, batch, kvLayer, onIndexerSelection, sharedKeys);
    }
    const ops = this.ops;
    const T = batch.numTokens;
    const { numHeads: H, qkNopeHeadDim: dn, qkRopeHeadDim: dr, kvLoraRank: r } = this.dims;
    const width = r + dr;
    const eps = this.opts.rmsNormEps;
    // 1. queries: c_q = RMSNorm(a·W_qaᵀ), q = c_q·W_qbᵀ → [T, H, dn+dr]; rope (interleaved) on the last dr dims
    let qLatent: Float32Array | null = null;
    if (this.w.qAProj !== null && this.w.qALayernorm !== null) {
      const qa = ops.matmul(hidden, T, this.w.qAProj);
      qLatent = ops.rmsNorm(qa, T, this.w.qALayernorm.length, this.w.qALayernorm, eps, qa);
    }
    const q = ops.matmul(qLatent ?? hidden, T, this.w.qBProj);
    ops.rope(q, T, batch.positions, { numHeads: H, headDim: dn + dr, offset: dn }, this.opts.rope);
    // 2. latent KV: [c_kv | k_rope] = a·W_kvaᵀ; c_kv normalised, k_rope rotated; written to the pool
    const kvA = ops.matmul(hidden, T, this.w.kvAProjWithMqa); // [T, r+dr]
    const cKv = ops.rmsNorm(kvA, T, r, this.w.kvALayernorm, eps, undefined, width); // [T, r]
    ops.rope(kvA, T, batch.positions, { numHeads: 1, headDim: width, offset: r }, this.opts.rope);
    //    (rows [c_kv | k_rope] encoded in the pool's codec: f32, bf16, FP8 × k_scale, or SGLang's fp8_ds_mla for DSA)
    const rows = new Float32Array(T * width);
    for (let t = 0; t < T; t++) {
      rows.set(cKv.subarray(t * r, (t + 1) * r), t * width);
      rows.set(kvA.subarray(t * width + r, (t + 1) * width), t * width + r);
    }
    batch.kvPool.write(kvLayer, LATENT_KV_BUFFER, batch.outCacheLoc, T, rows, width);
    const latent = batch.kvPool.store(kvLayer, LATENT_KV_BUFFER);
    // 3. DSA: index keys cached, top-k key positions per row (or the previous layer's, Index Cache)
    let sparse: SparseKeys | undefined;
    if (this.indexer !== null) {
      if (qLatent === null) throw new InternalError('MlaAttention: the DSA indexer needs q_lora_rank');
      sparse = this.indexer.forward(hidden, qLatent, T, batch.positions, batch.outCacheLoc, batch, batch.kvPool, kvLayer, onIndexerSelection);
    } else if (sharedKeys !== undefined) {
      if (sharedKeys.indices.length !== T * sharedKeys.width) throw new InternalError(`MlaAttention: shared top-k has ${sharedKeys.indices.length} slots, expected ${T}·${sharedKeys.width}`);
      sparse = sharedKeys;
      if (onIndexerSelection) {
        for (let t = 0; t < T; t++) {
          const row = sparse.indices.subarray(t * sparse.width, (t + 1) * sparse.width);
          onIndexerSelection(t, row.filter((p) => p >= 0));
        }
      }
    }
    // 4. attention over the latent cache
    const useExpanded = this.opts.extendForm === 'expanded' && batch.forwardMode !== 'decode';
    const o = useExpanded ? this.expandedAttention(q, batch, latent, sparse) : this.absorbedAttention(q, batch, latent, sparse);
    return { out: ops.matmul(o, T, this.w.oProj), keys: sparse };
  }

  /** Weight-absorbed MQA over latent rows through Ops.attention. @returns [T, H, dv] */
  private absorbedAttention(q: Float32Array, batch: ForwardBatch, latent: KvStore, sparse: SparseKeys | undefined): Float32Array {
    const T = batch.numTokens;
    const { numHeads: H, qkRopeHeadDim: dr, kvLoraRank: r } = this.dims;
    const qMqa = mlaAbsorbQueryOps(this.ops, q, T, this.absorb, this.dims);
    const latentOut = this.ops.attention(qMqa, T, {
      numHeads: H, numKvHeads: 1, headDim: r + dr, vHeadDim: r, scale: this.opts.scale,
      kBuf: latent, kRowWidth: r + dr, kOffset: 0, vBuf: latent, vRowWidth: r + dr, vOffset: 0,
    }, batch, sparse);
    return mlaAbsorbOutputOps(this.ops, latentOut, T, this.absorb, this.dims);
  }

  /**
   * Expanded MHA: keys/values of every visible position expanded through kv_b_proj (a cross-check form: the request's
   * latent rows are dequantized into a scratch copy first). @returns [T, H, dv]
   */
  private expandedAttention(q: Float32Array, batch: ForwardBatch, store: KvStore, sparse: SparseKeys | undefined): Float32Array {
    const { numHeads: H, qkNopeHeadDim: dn, qkRopeHeadDim: dr, vHeadDim: dv } = this.dims;
    const out = new Float32Array(batch.numTokens * H * dv);
    for (let i = 0; i < batch.numReqs; i++) {
      const seqLen = batch.extendPrefixLens[i] + batch.extendSeqLens[i];
      const tableRow = batch.reqPoolIndices[i] * batch.reqToTokenStride;
      const poolLocs = batch.reqToToken.subarray(tableRow, tableRow + seqLen);
      const latent = new Float32Array(seqLen * store.width);
      for (let s = 0; s < seqLen; s++) decodeKvRow(store, poolLocs[s], 0, store.width, latent.subarray(s * store.width, (s + 1) * store.width));
      const keyLocs = Int32Array.from(poolLocs, (_, s) => s);
      const kv = new Float32Array(seqLen * H * (dn + dv));
      this.kvBF32 ??= weightToF32(this.w.kvBProj);
      mlaExpandKv(latent, keyLocs, seqLen, this.kvBF32, this.dims, kv);
      const selected = new Int32Array(seqLen);
      const scratch = new Float32Array(seqLen);
      for (let j = 0; j < batch.extendSeqLens[i]; j++) {
        const t = batch.extendStartLoc[i] + j;
        const last = batch.extendPrefixLens[i] + j;
        let n = 0;
        if (sparse) {
          for (let s = 0; s < sparse.width; s++) {
            const p = sparse.indices[t * sparse.width + s];
            if (p >= 0 && p <= last) selected[n++] = p;
          }
          selected.subarray(0, n).sort();
        } else {
          for (let p = 0; p <= last; p++) selected[n++] = p;
        }
        mlaExpandedAttention(q, t * H * (dn + dr), kv, latent, keyLocs, selected, n, this.opts.scale, this.dims, out, t * H * dv, scratch);
      }
    }
    return out;
  }
}
