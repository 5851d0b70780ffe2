// Tensor/expert-parallel layout of one rank (SGLang distributed/parallel_state.py: the TP group, and the MoE groups
// moe_ep = ep_size, moe_tp = tp_size / ep_size) and the shard arithmetic every model uses: which heads, KV heads,
// vocabulary rows, experts and FFN columns a rank holds. The collectives go through the `tp` Communicator.
import { InvalidRequestError } from '../common/index.js';
import type { Communicator } from '../distributed/index.js';
import type { ContextParallel } from './context_parallel.js';
import type { DpAttention } from './dp_attention.js';

/** One rank's place in the TP/EP layout. */
export interface ParallelGroups {
  readonly tpRank: number;
  readonly tpSize: number;
  /** The TP group (every rank of the model); null when tpSize = 1. */
  readonly tp: Communicator | null;
  /** Expert-parallel size (--ep-size) and this rank's EP index: tp_rank // moe_tp_size (SGLang _MOE_EP groups). */
  readonly moeEpSize: number;
  readonly moeEpRank: number;
  /** tp_size / ep_size ranks split each local expert's FFN width; this rank's index: tp_rank % moe_tp_size. */
  readonly moeTpSize: number;
  readonly moeTpRank: number;
  /**
   * Under --enable-dp-attention: this rank's attention layout (attn_tp ranks of its attention-DP group: heads, KV
   * heads, embedding and LM head vocabulary split over them; dp_attention.ts). Absent: attention uses this layout.
   */
  readonly attn?: ParallelGroups;
  /** Under --enable-dp-attention: the gather/scatter of the groups' tokens around each MLP (dp_attention.ts). */
  readonly dp?: DpAttention;
  /** Under --enable-prefill-cp: this rank's attention CP group (context_parallel.ts; DeepSeek MLA). */
  readonly cp?: ContextParallel;
}

/** tp = ep = 1. */
export const SINGLE_RANK: ParallelGroups = Object.freeze({ tpRank: 0, tpSize: 1, tp: null, moeEpSize: 1, moeEpRank: 0, moeTpSize: 1, moeTpRank: 0 });

/**
 * The layout of TP rank `tpRank` of `tpSize` with `epSize`-way expert parallelism.
 * @param tp the TP group communicator (required when tpSize > 1; its rank and size must match)
 * @throws InvalidRequestError when ep_size does not divide tp_size (SGLang's moe_tp_size = tp_size // ep_size)
 */
export function parallelGroups(tpRank: number, tpSize: number, epSize: number, tp: Communicator | null): ParallelGroups {
  if (tpSize > 1 && (tp === null || tp.size !== tpSize || tp.rank !== tpRank)) throw new InvalidRequestError(`TP rank ${tpRank}/${tpSize} needs a communicator of that rank and size`, 'tp_size');
  return { ...parallelLayout(tpRank, tpSize, epSize), tp: tpSize > 1 ? tp : null };
}

/**
 * The rank indices of a layout without a communicator (tp = null): for planning shards (which tensors a rank loads,
 * layout validation) before any rank starts. Never run a forward with it when tpSize > 1.
 * @throws InvalidRequestError when ep_size does not divide tp_size
 */
export function parallelLayout(tpRank: number, tpSize: number, epSize: number): ParallelGroups {
  if (epSize < 1 || tpSize % epSize !== 0) throw new InvalidRequestError(`--ep-size (${epSize}) must divide --tp-size (${tpSize})`, 'ep_size');
  const moeTpSize = tpSize / epSize;
  return { tpRank, tpSize, tp: null, moeEpSize: epSize, moeEpRank: Math.floor(tpRank / moeTpSize), moeTpSize, moeTpRank: tpRank % moeTpSize };
}

/** A contiguous range of some dimension: [start, start + count). */
export interface Range {
  readonly start: number;
  readonly count: number;
}

/**
 * The `part`-th of `parts` equal pieces of `n` (SGLang divide(): n must be a multiple of parts).
 * @throws InvalidRequestError naming `what` when parts does not divide n
 */
export function evenSplit(n: number, parts: number, part: number, what: string): Range {
  if (n % parts !== 0) throw new InvalidRequestError(`${what} (${n}) must be divisible by the number of ranks that split it (${parts})`, what);
  const c = n / parts;
  return { start: part * c, count: c };
}

/**
 * Query heads of a TP rank (SGLang: total_num_heads % tp_size == 0).
 * @throws InvalidRequestError naming --tp-size and the numbers
 */
export function qHeadRange(numHeads: number, p: ParallelGroups): Range {
  if (numHeads % p.tpSize !== 0) throw new InvalidRequestError(`num_attention_heads (${numHeads}) must be divisible by --tp-size (${p.tpSize})`, 'tp_size');
  return evenSplit(numHeads, p.tpSize, p.tpRank, 'num_attention_heads');
}

/**
 * KV heads of a TP rank (SGLang QKVParallelLinear): split when num_kv_heads ≥ tp_size (then tp_size must divide them),
 * else each rank holds one KV head, replicated over tp_size / num_kv_heads ranks (tp_size must be a multiple).
 * @throws InvalidRequestError naming --tp-size and the numbers
 */
export function kvHeadRange(numKvHeads: number, p: ParallelGroups): Range {
  if (numKvHeads >= p.tpSize) {
    if (numKvHeads % p.tpSize !== 0) throw new InvalidRequestError(`num_key_value_heads (${numKvHeads}) must be divisible by --tp-size (${p.tpSize})`, 'tp_size');
    return evenSplit(numKvHeads, p.tpSize, p.tpRank, 'num_key_value_heads');
  }
  if (p.tpSize % numKvHeads !== 0) throw new InvalidRequestError(`--tp-size (${p.tpSize}) must be a multiple of num_key_value_heads (${numKvHeads}) when it exceeds them (KV heads are then replicated)`, 'tp_size');
  return { start: Math.floor(p.tpRank / (p.tpSize / numKvHeads)), count: 1 };
}

/**
 * Vocabulary rows of a TP rank (SGLang VocabParallelEmbedding: the vocabulary padded to a multiple of 64, then an
 * equal share per rank; the last ranks may hold fewer real rows, or none).
 * @returns start and count of real rows, and `perRank` (the padded share, the same on every rank)
 */
export function vocabRange(vocabSize: number, p: ParallelGroups): Range & { readonly perRank: number } {
  const padded = Math.ceil(vocabSize / 64) * 64;
  const perRank = Math.ceil(padded / p.tpSize);
  const start = Math.min(vocabSize, p.tpRank * perRank);
  return { start, count: Math.max(0, Math.min(vocabSize, start + perRank) - start), perRank };
}

/**
 * Routed experts held by an EP rank (SGLang: num_experts % ep_size == 0, contiguous blocks).
 * @throws InvalidRequestError naming --ep-size and the numbers
 */
export function expertRange(numExperts: number, p: ParallelGroups): Range {
  if (numExperts % p.moeEpSize !== 0) throw new InvalidRequestError(`the number of routed experts (${numExperts}) must be divisible by --ep-size (${p.moeEpSize})`, 'ep_size');
  return evenSplit(numExperts, p.moeEpSize, p.moeEpRank, 'num_experts');
}

/**
 * The FFN columns of each local expert held by this rank (moe_tp split of moe_intermediate_size).
 * @throws InvalidRequestError naming the sizes
 */
export function expertFfnRange(intermediateSize: number, p: ParallelGroups): Range {
  if (intermediateSize % p.moeTpSize !== 0) {
    throw new InvalidRequestError(`the expert intermediate size (${intermediateSize}) must be divisible by moe_tp_size = --tp-size / --ep-size (${p.moeTpSize})`, 'tp_size');
  }
  return evenSplit(intermediateSize, p.moeTpSize, p.moeTpRank, 'moe_intermediate_size');
}

/**
 * The FFN columns of a dense MLP held by this TP rank.
 * @throws InvalidRequestError naming the sizes
 */
export function denseFfnRange(intermediateSize: number, p: ParallelGroups): Range {
  if (intermediateSize % p.tpSize !== 0) throw new InvalidRequestError(`intermediate_size (${intermediateSize}) must be divisible by --tp-size (${p.tpSize})`, 'tp_size');
  return evenSplit(intermediateSize, p.tpSize, p.tpRank, 'intermediate_size');
}

/** Sums a row-parallel partial result over the TP group, in place (no-op on one rank). @param buf [n] f32 */
export function tpAllReduce(p: ParallelGroups, buf: Float32Array): Float32Array {
  if (p.tp !== null && buf.length > 0) p.tp.allReduceSum(buf); // every rank of the group has the same length
  return buf;
}

/**
 * RMSNorm over a width split across the TP group (MiniMax-M2's q/k norm over all heads; SGLang MiniMaxM2RMSNormTP):
 * each rank sums the squares of its slice, the sums are all-reduced, and `mean = Σ / (localWidth · tpSize)` — also
 * right when KV heads are replicated (numerator and denominator scale alike). y = x · rsqrt(mean + eps) · w.
 * @param x [numRows, width] f32, normalized in place
 * @param weight [width] f32 this rank's slice of the norm weight
 * @returns x
 */
export function tpRmsNormInPlace(p: ParallelGroups, x: Float32Array, numRows: number, weight: Float32Array, eps: number): Float32Array {
  const w = weight.length;
  const sums = new Float32Array(numRows);
  for (let t = 0; t < numRows; t++) {
    let s = 0;
    for (let i = t * w, e = i + w; i < e; i++) s += x[i] * x[i];
    sums[t] = s;
  }
  tpAllReduce(p, sums);
  const n = w * p.tpSize;
  for (let t = 0; t < numRows; t++) {
    const inv = Math.fround(1 / Math.sqrt(Math.fround(sums[t] / n) + eps));
    for (let i = 0; i < w; i++) x[t * w + i] = Math.fround(x[t * w + i] * inv) * weight[i];
  }
  return x;
}
