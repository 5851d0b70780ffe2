// Prefill context parallelism, interleave strategy (SGLang --enable-prefill-cp --cp-strategy interleave; serving-spec
// §7.4): inside an attention CP group of `size` ranks, an extend batch whose token count is a multiple of the group
// size (and at least it) is split token-wise — token i of the concatenated batch goes to CP rank i mod size. Each
// rank computes the queries of its tokens and the latent K/V of its tokens; the K/V rows are all-gathered so every
// rank caches every token and causal attention sees every earlier token; each rank attends its own rows, and the
// attention outputs are all-gathered back into batch order before the MLP. Any other batch (decode, mixed, a token
// count that does not split) runs without CP: every rank of the CP group computes all rows.
import { InternalError } from '../common/index.js';
import type { Communicator } from '../distributed/index.js';
import type { AttentionBatch } from '../kernels/index.js';
import type { ForwardBatch } from './forward_batch.js';
import { InvalidRequestError as BadLayout } from '../common/index.js';
import { parallelLayout, type ParallelGroups } from './parallel.js';

/** Counters of the CP split (tests, statistics). */
export const cpStats = { splitForwards: 0, fallbackForwards: 0 };

/** One rank's place in its attention CP group. */
export class ContextParallel {
  /**
   * @param size ranks of the CP group (--attn-cp-size)
   * @param rank this rank's index in it
   * @param comm the CP group (null only for planning)
   */
  constructor(readonly size: number, readonly rank: number, private readonly comm: Communicator | null) {}

  /** Whether `batch` is split: an extend batch of at least `size` tokens, a multiple of `size` (else no CP). */
  applies(batch: ForwardBatch): boolean {
    const ok = this.size > 1 && batch.forwardMode === 'extend' && batch.numTokens >= this.size && batch.numTokens % this.size === 0;
    if (ok) cpStats.splitForwards++;
    else cpStats.fallbackForwards++;
    return ok;
  }

  /** This rank's token rows of a split batch: rank, rank + size, … ([numTokens / size] i32). */
  ownRows(numTokens: number): Int32Array {
    return Int32Array.from({ length: numTokens / this.size }, (_, k) => this.rank + k * this.size);
  }

  /**
   * Rows `rows` of x. @param x [numRows, width] f32 @returns [rows.length, width] f32
   */
  static takeRows(x: Float32Array, width: number, rows: Int32Array): Float32Array {
    const out = new Float32Array(rows.length * width);
    rows.forEach((t, k) => out.set(x.subarray(t * width, (t + 1) * width), k * width));
    return out;
  }

  /**
   * All-gathers every rank's rows back into batch order (row k of rank j is batch row j + k·size).
   * @param mine [numTokens / size, width] f32 this rank's rows
   * @returns [numTokens, width] f32
   * @throws DistributedError when a peer fails
   */
  gatherRows(mine: Float32Array, width: number, numTokens: number): Float32Array {
    if (this.comm === null) throw new InternalError('ContextParallel.gatherRows without a CP group');
    const n = numTokens / this.size;
    const all = new Float32Array(numTokens * width);
    this.comm.allGather(mine, all);
    const out = new Float32Array(numTokens * width);
    for (let j = 0; j < this.size; j++) {
      for (let k = 0; k < n; k++) out.set(all.subarray((j * n + k) * width, (j * n + k + 1) * width), (j + k * this.size) * width);
    }
    return out;
  }

  /**
   * The attention view of this rank's rows: each row is a one-token "request" at its sequence index, attending
   * positions 0..index of its request through the request's reqToToken row (every token's K/V is already cached).
   */
  static rowBatch(batch: ForwardBatch, rows: Int32Array): AttentionBatch {
    const n = rows.length;
    const reqOf = new Int32Array(batch.numTokens);
    for (let i = 0; i < batch.numReqs; i++) reqOf.fill(i, batch.extendStartLoc[i], batch.extendStartLoc[i] + batch.extendSeqLens[i]);
    const prefix = new Int32Array(n);
    const pool = new Int32Array(n);
    rows.forEach((t, k) => {
      const i = reqOf[t];
      prefix[k] = batch.extendPrefixLens[i] + (t - batch.extendStartLoc[i]);
      pool[k] = batch.reqPoolIndices[i];
    });
    return {
      numReqs: n, extendStartLoc: Int32Array.from({ length: n }, (_, k) => k), extendSeqLens: new Int32Array(n).fill(1),
      extendPrefixLens: prefix, reqPoolIndices: pool, reqToToken: batch.reqToToken, reqToTokenStride: batch.reqToTokenStride,
    };
  }
}

/**
 * The layout of TP rank `tpRank` under prefill CP of `cpSize` (dp = 1): attn_tp = tp / cp ranks split the heads (the
 * attention side, `attn`), attn_cp_rank = tp_rank // attn_tp; the MLPs use the whole TP group.
 * @param tp the TP group; @param attnTp this rank's attn_tp group (null when attn_tp = 1); @param cp its CP group
 *   (ranks with the same attn_tp rank); all null for planning
 * @throws InvalidRequestError when cp does not divide tp
 */
export function contextParallelGroups(tpRank: number, tpSize: number, epSize: number, cpSize: number, tp: Communicator | null, attnTp: Communicator | null, cp: Communicator | null): ParallelGroups {
  if (cpSize < 1 || tpSize % cpSize !== 0) throw new BadLayout(`--attn-cp-size (${cpSize}) must divide --tp-size (${tpSize})`, 'attn_cp_size');
  const a = tpSize / cpSize;
  const attn: ParallelGroups = { ...parallelLayout(tpRank % a, a, 1), tp: a > 1 ? attnTp : null };
  return { ...parallelLayout(tpRank, tpSize, epSize), tp: tpSize > 1 ? tp : null, attn, cp: new ContextParallel(cpSize, Math.floor(tpRank / a), cp) };
}
