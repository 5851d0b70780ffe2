// Attention data parallelism inside one TP group (SGLang layers/dp_attention.py; serving-spec §7.2): tp ranks form
// dp attention-DP groups of attn_tp = tp / dp ranks; attn_dp_rank = tp_rank // attn_tp, attn_tp_rank = tp_rank %
// attn_tp. Each group runs attention (and the embedding, vocab-split over its attn_tp ranks) on its own
// requests' tokens; around every MoE / dense MLP the tokens of all groups are gathered so the MLP runs over every
// rank (TP or EP) on every group's tokens, and each group then keeps its own rows back (dp_gather / dp_scatter).
// Token counts of every group are exchanged once per step (DpAttention.setCounts), so a group with no tokens still
// takes part (an idle batch) and every collective of the step meets on every rank. The LM head runs as SGLang's
// default (no --enable-dp-lm-head): its vocabulary split over the whole TP group, on every group's logit rows
// (gatherRows), so no rank reads the whole LM head (lmHeadGroupsOf, embedding.ts).
import { InternalError, InvalidRequestError } from '../common/index.js';
import type { Communicator } from '../distributed/index.js';
import { parallelLayout, type ParallelGroups } from './parallel.js';

/** The attention-DP place of one rank and the per-step token counts of every group. */
export class DpAttention {
  /** Token rows of each group in the current step ([dpSize]). */
  private counts: Int32Array;
  /** Scratch of the gathers (reused every layer and step: no per-layer allocation). */
  private readonly buffers = { src: new Float32Array(0), all: new Float32Array(0), out: new Float32Array(0) };

  /**
   * @param dpSize attention-DP groups (--dp-size)
   * @param attnTpSize ranks per group (tp / dp)
   * @param tpRank this rank in the TP group
   * @param tp the whole TP group (null only for planning, never for a forward)
   */
  constructor(readonly dpSize: number, readonly attnTpSize: number, readonly tpRank: number, private readonly tp: Communicator | null) {
    this.counts = new Int32Array(dpSize);
  }

  /** attn_dp_rank = tp_rank // attn_tp_size. */
  get dpRank(): number {
    return Math.floor(this.tpRank / this.attnTpSize);
  }

  /** attn_tp_rank = tp_rank % attn_tp_size. */
  get attnTpRank(): number {
    return this.tpRank % this.attnTpSize;
  }

  /** Sets the step's token counts of every group (the same on every rank). @param counts [dpSize] */
  setCounts(counts: ArrayLike<number>): void {
    if (counts.length !== this.dpSize) throw new InternalError(`DpAttention.setCounts: ${counts.length} counts for ${this.dpSize} groups`);
    this.counts = Int32Array.from(counts);
  }

  /** Token rows of every group this step. */
  get tokenCounts(): readonly number[] {
    return [...this.counts];
  }

  /** Σ counts: rows of the gathered MLP input. */
  get totalTokens(): number {
    let s = 0;
    for (const c of this.counts) s += c;
    return s;
  }

  /** First gathered row of this rank's group. */
  get offset(): number {
    let s = 0;
    for (let g = 0; g < this.dpRank; g++) s += this.counts[g];
    return s;
  }

  /**
   * dp_gather: every group's rows in group order (an all-gather over the TP group, each rank padded to the largest
   * group; rows are taken from each group's attn_tp rank 0 — every rank of a group holds the same rows).
   * @param x [counts[dpRank], D] f32 this group's rows
   * @returns [totalTokens, D] f32 (a scratch buffer of this rank: valid until the next gather)
   * @throws DistributedError when a peer fails; InternalError when x does not hold this group's rows
   */
  gather(x: Float32Array, D: number): Float32Array {
    return this.gatherBy(this.counts, x, D);
  }

  /**
   * dp_gather of a row count not known to the other groups (the LM head's logit rows): the counts are all-gathered
   * first, then the rows as gather() does.
   * @param x [n, D] f32 this group's rows
   * @returns every group's rows in group order (a scratch buffer: valid until the next gather), this group's first
   *   row in them, and their total
   * @throws DistributedError when a peer fails
   */
  gatherRows(x: Float32Array, n: number, D: number): { rows: Float32Array; offset: number; total: number } {
    if (this.tp === null) throw new InternalError('DpAttention.gatherRows without a TP group');
    const all = new Int32Array(this.tp.size);
    this.tp.allGather(Int32Array.of(n), all);
    const counts = Array.from({ length: this.dpSize }, (_, g) => all[g * this.attnTpSize]);
    let offset = 0;
    for (let g = 0; g < this.dpRank; g++) offset += counts[g];
    const rows = this.gatherBy(counts, x, D);
    return { rows, offset, total: rows.length / Math.max(1, D) };
  }

  private gatherBy(counts: ArrayLike<number>, x: Float32Array, D: number): Float32Array {
    const mine = counts[this.dpRank];
    if (x.length < mine * D) throw new InternalError(`DpAttention.gather: ${x.length} floats for ${mine} rows of ${D}`);
    let maxT = 0;
    let total = 0;
    for (let g = 0; g < this.dpSize; g++) {
      maxT = Math.max(maxT, counts[g]);
      total += counts[g];
    }
    const out = this.scratch('out', total * D);
    if (maxT === 0) return out;
    if (this.tp === null) throw new InternalError('DpAttention.gather without a TP group');
    const src = this.scratch('src', maxT * D);
    src.set(x.subarray(0, mine * D));
    const all = this.scratch('all', this.tp.size * maxT * D);
    this.tp.allGather(src, all);
    let o = 0;
    for (let g = 0; g < this.dpSize; g++) {
      const from = g * this.attnTpSize * maxT * D;
      out.set(all.subarray(from, from + counts[g] * D), o);
      o += counts[g] * D;
    }
    return out;
  }

  /** A view of `n` floats of this rank's scratch buffer `name` (grown when short; the gathers reuse it every layer). */
  private scratch(name: 'src' | 'all' | 'out', n: number): Float32Array {
    let b = this.buffers[name];
    if (b.length < n) this.buffers[name] = b = new Float32Array(Math.max(n, Math.ceil(b.length * 1.5)));
    return b.subarray(0, n);
  }

  /**
   * dp_scatter: this group's rows of a gathered result.
   * @param y [totalTokens, D] f32
   * @returns [counts[dpRank], D] f32 (a view into y)
   */
  scatter(y: Float32Array, D: number): Float32Array {
    const o = this.offset;
    return y.subarray(o * D, (o + this.counts[this.dpRank]) * D);
  }
}

/**
 * The layout of TP rank `tpRank` under `--enable-dp-attention --dp-size dpSize`: the MLP side is the plain TP/EP
 * layout of the whole group; `attn` is the group's attention layout (attn_tp ranks: heads, KV heads and the
 * vocabulary split over them); `dp` carries the gather/scatter.
 * @param tp the whole TP group (null for planning); @param attnTp this group's attn_tp communicator (null when
 *   attn_tp = 1 or for planning)
 * @throws InvalidRequestError when dp does not divide tp, or ep does not divide tp
 */
export function dpAttentionGroups(tpRank: number, tpSize: number, epSize: number, dpSize: number, tp: Communicator | null, attnTp: Communicator | null): ParallelGroups {
  if (dpSize < 1 || tpSize % dpSize !== 0) throw new InvalidRequestError(`--enable-dp-attention needs tp_size % dp_size == 0, got ${tpSize} % ${dpSize}`, 'dp_size');
  const attnTpSize = tpSize / dpSize;
  const base = parallelLayout(tpRank, tpSize, epSize);
  const attn: ParallelGroups = { ...parallelLayout(tpRank % attnTpSize, attnTpSize, 1), tp: attnTpSize > 1 ? attnTp : null };
  return { ...base, tp: tpSize > 1 ? tp : null, attn, dp: new DpAttention(dpSize, attnTpSize, tpRank, tp) };
}

/**
 * The LM head's layout: under DP-attention, SGLang's default (no --enable-dp-lm-head) splits the vocabulary over the
 * whole TP group and runs it on every group's gathered logit rows (LogitsProcessor's dp gather), so no rank reads the
 * whole LM head; tied word embeddings keep the embedding's (attn_tp) split. Otherwise the TP layout itself.
 */
export function lmHeadGroupsOf(p: ParallelGroups, tiedWordEmbeddings: boolean): ParallelGroups {
  return p.dp && !tiedWordEmbeddings ? p : attnGroupsOf(p);
}

/** The attention-side layout of a rank: its attn_tp layout under DP-attention, else the TP layout itself. */
export function attnGroupsOf(p: ParallelGroups): ParallelGroups {
  return p.attn ?? p;
}
