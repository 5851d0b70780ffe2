// MLA attention of one layer under prefill context parallelism, interleave strategy (layers/context_parallel.ts;
// serving-spec §7.4): this rank computes the queries and the latent K/V rows of its own tokens (i ≡ rank mod cp); the
// latent rows are all-gathered and every token's row is cached, so each own row attends every earlier token of its
// request; the outputs (after o_proj) are all-gathered back into batch order. The DSA indexer runs over every row
// (its keys are cached for every token; the selection of the own rows is used), so the keys each row attends are
// those of the unsplit forward. Per row the arithmetic is that of MlaAttention.forward (batch invariant).
import type { Ops, SparseKeys } from '../../kernels/index.js';
import { ContextParallel } from '../context_parallel.js';
import type { ForwardBatch } from '../forward_batch.js';
import type { DsaIndexer } from './dsa_indexer.js';
import { LATENT_KV_BUFFER, type MlaOptions, type MlaWeights } from './mla.js';
import { mlaAbsorbOutputOps, mlaAbsorbQueryOps, type MlaAbsorbWeights, type MlaDims } from './mla_math.js';

/** What mlaForwardCp needs of an MlaAttention. */
export interface MlaParts {
  readonly ops: Ops;
  readonly w: MlaWeights;
  readonly dims: MlaDims;
  readonly opts: MlaOptions;
  readonly indexer: DsaIndexer | null;
  readonly absorb: MlaAbsorbWeights;
}

/**
 * @param hidden [numTokens, hiddenSize] f32 normalised layer input (every row of the batch)
 * @returns out [numTokens, hiddenSize] f32 (every row, in batch order; o_proj partial sums under attn_tp > 1) and the
 *   key selection of every row (DSA), as MlaAttention.forward
 * @throws DistributedError when a CP peer fails
 */
export function mlaForwardCp(
  m: MlaParts, cp: ContextParallel, hidden: Float32Array, batch: ForwardBatch, kvLayer: number,
  onIndexerSelection?: (row: number, keys: Int32Array) => void, sharedKeys?: SparseKeys,
): { out: Float32Array; keys: SparseKeys | undefined } {
  const { ops, w, dims } = m;
  const T = batch.numTokens;
  const D = m.opts.hiddenSize;
  const { numHeads: H, qkNopeHeadDim: dn, qkRopeHeadDim: dr, kvLoraRank: r } = dims;
  const width = r + dr;
  const eps = m.opts.rmsNormEps;
  const rows = cp.ownRows(T);
  const n = rows.length;
  const hOwn = ContextParallel.takeRows(hidden, D, rows);
  const posOwn = Int32Array.from(rows, (t) => batch.positions[t]);
  // 1. queries of this rank's rows (the q_lora latent of every row: the DSA indexer reads it)
  let qLatent: Float32Array | null = null;
  let qLatentOwn: Float32Array | null = null;
  if (w.qAProj !== null && w.qALayernorm !== null) {
    const qa = ops.matmul(hidden, T, w.qAProj);
    qLatent = ops.rmsNorm(qa, T, w.qALayernorm.length, w.qALayernorm, eps, qa);
    qLatentOwn = ContextParallel.takeRows(qLatent, w.qALayernorm.length, rows);
  }
  const q = ops.matmul(qLatentOwn ?? hOwn, n, w.qBProj);
  ops.rope(q, n, posOwn, { numHeads: H, headDim: dn + dr, offset: dn }, m.opts.rope);
  // 2. latent K/V of this rank's rows, all-gathered; every token's row cached
  const kvA = ops.matmul(hOwn, n, w.kvAProjWithMqa);
  const cKv = ops.rmsNorm(kvA, n, r, w.kvALayernorm, eps, undefined, width);
  ops.rope(kvA, n, posOwn, { numHeads: 1, headDim: width, offset: r }, m.opts.rope);
  const mine = new Float32Array(n * width);
  for (let k = 0; k < n; k++) {
    mine.set(cKv.subarray(k * r, (k + 1) * r), k * width);
    mine.set(kvA.subarray(k * width + r, (k + 1) * width), k * width + r);
  }
  batch.kvPool.write(kvLayer, LATENT_KV_BUFFER, batch.outCacheLoc, T, cp.gatherRows(mine, width, T), width);
  const latent = batch.kvPool.store(kvLayer, LATENT_KV_BUFFER);
  // 3. DSA selection of every row (index keys cached for every token), or the previous layer's
  let sparse: SparseKeys | undefined;
  if (m.indexer !== null && qLatent !== null) sparse = m.indexer.forward(hidden, qLatent, T, batch.positions, batch.outCacheLoc, batch, batch.kvPool, kvLayer, onIndexerSelection);
  else if (sharedKeys !== undefined) sparse = sharedKeys;
  let sparseOwn: SparseKeys | undefined;
  if (sparse) {
    const idx = new Int32Array(n * sparse.width);
    rows.forEach((t, k) => idx.set(sparse!.indices.subarray(t * sparse!.width, (t + 1) * sparse!.width), k * sparse!.width));
    sparseOwn = { indices: idx, width: sparse.width };
  }
  // 4. absorbed attention of this rank's rows, each a one-token view at its sequence index
  const qMqa = mlaAbsorbQueryOps(ops, q, n, m.absorb, dims);
  const latentOut = ops.attention(qMqa, n, {
    numHeads: H, numKvHeads: 1, headDim: r + dr, vHeadDim: r, scale: m.opts.scale,
    kBuf: latent, kRowWidth: r + dr, kOffset: 0, vBuf: latent, vRowWidth: r + dr, vOffset: 0,
  }, ContextParallel.rowBatch(batch, rows), sparseOwn);
  const o = mlaAbsorbOutputOps(ops, latentOut, n, m.absorb, dims);
  return { out: cp.gatherRows(ops.matmul(o, n, w.oProj), D, T), keys: sparse };
}
