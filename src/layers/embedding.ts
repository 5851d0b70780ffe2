// Token embedding and LM head (SGLang `layers/vocab_parallel_embedding.py`), vocab-parallel under TP: each rank holds
// a contiguous block of vocabulary rows (parallel.ts vocabRange); the embedding sums the ranks' lookups (only the
// owner of a token's row contributes a non-zero row, so the sum is exact) and the LM head all-gathers the ranks'
// logit columns into full rows.
import { assert } from '../common/index.js';
import type { Ops, Weight } from '../kernels/index.js';
import type { DpAttention } from './dp_attention.js';
import { SINGLE_RANK, tpAllReduce, vocabRange, type ParallelGroups } from './parallel.js';

/** Embedding table lookup (no scaling), vocab-parallel under TP. */
export class VocabEmbedding {
  /** Full vocabulary size (all ranks). */
  readonly vocabSize: number;
  readonly hiddenSize: number;
  private readonly start: number;
  private readonly count: number;

  /**
   * @param weight [vocabRange(vocabSize).count, hiddenSize] this rank's rows ([vocabSize, hiddenSize] on one rank)
   * @param vocabSize full vocabulary size (default: the weight's rows, one rank)
   * @throws InternalError when the weight does not hold this rank's rows
   */
  constructor(readonly weight: Weight, private readonly ops: Ops, private readonly p: ParallelGroups = SINGLE_RANK, vocabSize = weight.shape[0]) {
    this.vocabSize = vocabSize;
    this.hiddenSize = weight.shape[1];
    const r = vocabRange(vocabSize, p);
    this.start = r.start;
    this.count = r.count;
    assert(weight.shape[0] === (p.tpSize === 1 ? vocabSize : r.count), () => `VocabEmbedding: weight has ${weight.shape[0]} rows, rank ${p.tpRank} holds ${r.count}`);
  }

  /**
   * @param ids [numTokens] i32 in [0, vocabSize)
   * @param out [numTokens, hiddenSize] f32 written in full (default: a new array)
   * @returns [numTokens, hiddenSize] f32 (`out` when given)
   */
  forward(ids: Int32Array, out?: Float32Array): Float32Array {
    if (this.p.tpSize === 1) return this.ops.embedding(ids, this.weight, out);
    const D = this.hiddenSize;
    const local = new Int32Array(ids.length);
    for (let t = 0; t < ids.length; t++) {
      const l = ids[t] - this.start;
      local[t] = l >= 0 && l < this.count ? l : 0;
    }
    const y = this.count > 0 ? this.ops.embedding(local, this.weight, out) : (out ?? new Float32Array(ids.length * D));
    for (let t = 0; t < ids.length; t++) {
      const l = ids[t] - this.start;
      if (!(l >= 0 && l < this.count)) y.fill(0, t * D, (t + 1) * D);
    }
    return tpAllReduce(this.p, y);
  }
}

/** Output projection hidden → vocab logits: logits = h · Wᵀ, vocab-parallel under TP (logits all-gathered). */
export class ParallelLMHead {
  /** Full vocabulary size (all ranks). */
  readonly vocabSize: number;

  /**
   * @param weight [vocabRange(vocabSize).count, hiddenSize] this rank's rows (lm_head.weight, or embed_tokens.weight
   *   when tied)
   * @param vocabSize full vocabulary size (default: the weight's rows, one rank)
   */
  constructor(readonly weight: Weight, private readonly ops: Ops, private readonly p: ParallelGroups = SINGLE_RANK, vocabSize = weight.shape[0]) {
    this.vocabSize = vocabSize;
  }

  /**
   * @param h [numRows, hiddenSize] f32 (the same on every rank)
   * @param out [numRows, vocabSize] f32 to write (default: a fresh array)
   * @returns [numRows, vocabSize] f32 full logit rows (on every rank; `out` when given)
   * @throws DistributedError when a peer rank fails
   */
  forward(h: Float32Array, numRows: number, out?: Float32Array): Float32Array {
    if (this.p.dp) return this.forwardDp(h, numRows, this.p.dp, out);
    if (this.p.tpSize === 1) return this.ops.matmul(h, numRows, this.weight, out);
    const V = this.vocabSize;
    const { count, perRank } = vocabRange(V, this.p);
    const local = new Float32Array(numRows * perRank); // [numRows, perRank], padding columns zero
    if (count > 0) {
      const part = this.ops.matmul(h, numRows, this.weight); // [numRows, count]
      for (let r = 0; r < numRows; r++) local.set(part.subarray(r * count, (r + 1) * count), r * perRank);
    }
    const all = new Float32Array(this.p.tpSize * numRows * perRank); // [tp, numRows, perRank]
    this.p.tp!.allGather(local, all);
    const logits = out ?? new Float32Array(numRows * V);
    for (let q = 0; q < this.p.tpSize; q++) {
      const start = q * perRank;
      const n = Math.max(0, Math.min(V, start + perRank) - start);
      for (let r = 0; r < numRows; r++) logits.set(all.subarray((q * numRows + r) * perRank, (q * numRows + r) * perRank + n), r * V + start);
    }
    return logits;
  }

  /**
   * Whether every rank must call forward() on every lockstep step, also with no rows of its own (DP-attention with
   * the vocabulary over the whole TP group: the rows of every group are gathered).
   */
  get joinsIdleSteps(): boolean {
    return this.p.dp !== undefined;
  }

  /**
   * Under DP-attention (the layout lmHeadGroupsOf gives, SGLang's default): every group's rows are gathered, this
   * rank projects them onto its vocabulary slice, the slices are all-gathered over the TP group and this group keeps
   * its own rows. Each row's logit is one rank's full dot product, so the values equal tp 1's bit for bit.
   * @param h [numRows, hiddenSize] this group's rows (numRows may be 0: an idle group still takes part)
   */
  private forwardDp(h: Float32Array, numRows: number, dp: DpAttention, out?: Float32Array): Float32Array {
    const V = this.vocabSize;
    const { rows, offset, total } = dp.gatherRows(h, numRows, this.weight.shape[1]);
    const logits = out ?? new Float32Array(numRows * V);
    if (total === 0) return logits;
    const { count, perRank } = vocabRange(V, this.p);
    const local = new Float32Array(total * perRank); // [total, perRank], padding columns zero
    if (count > 0) {
      const part = this.ops.matmul(rows, total, this.weight); // [total, count]
      for (let r = 0; r < total; r++) local.set(part.subarray(r * count, (r + 1) * count), r * perRank);
    }
    const all = new Float32Array(this.p.tpSize * total * perRank); // [tp, total, perRank]
    this.p.tp!.allGather(local, all);
    for (let q = 0; q < this.p.tpSize; q++) {
      const s = q * perRank;
      const n = Math.max(0, Math.min(V, s + perRank) - s);
      for (let r = 0; r < numRows; r++) {
        const from = (q * total + offset + r) * perRank;
        logits.set(all.subarray(from, from + n), r * V + s);
      }
    }
    return logits;
  }
}
