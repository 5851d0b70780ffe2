// Sampler: one logits row → next token id (+ logprobs), as SGLang python/sglang/srt/layers/sampler.py with the
// penalizers of python/sglang/srt/sampling/penaltylib. Free functions over typed arrays; a row never depends on
// other rows, so sampling is batch-invariant.
import type { Rng } from '../common/index.js';
import type { SamplingParams } from './sampling_params.js';
import { drawFromScaledReference } from './sampler_reference.js';
import { topLogprobsOf } from './top_logprobs.js';

/** The sampling parameters the sampler reads (SamplingParams is one; pipeline parallelism ships only these). */
export type RowSamplerParams = Pick<SamplingParams, 'temperature' | 'topP' | 'topK' | 'minP' | 'frequencyPenalty' | 'presencePenalty' | 'repetitionPenalty' | 'minNewTokens' | 'logitBias'>;

/** Per-request inputs to sample one row. */
export interface RowSamplingInfo {
  readonly params: RowSamplerParams;
  /** The request's RNG (seeded per request); unused for greedy rows. */
  readonly rng: Rng;
  /** Generated-token counts (penalties count output tokens only, SGLang v0.5.x). */
  readonly outputCounts: ReadonlyMap<number, number>;
  /** Tokens generated so far (min_new_tokens masking). */
  readonly numOutputTokens: number;
  /** Stop ids masked while numOutputTokens < minNewTokens (EOS ∪ stop_token_ids). */
  readonly stopTokenIds: readonly number[];
  /** Number of top alternatives wanted (0 = none). */
  readonly topLogprobsNum: number;
  /** Compute the sampled token's logprob (default true); greedy rows skip the log-softmax when false. */
  readonly needLogprob?: boolean;
  /**
   * Grammar vocab mask of a constrained row ([ceil(vocabSize / 32)] i32, bit i % 32 of word i >> 5 set = token i
   * allowed, xgrammar's bitmask layout); null/absent = unconstrained. Applied after the penalties, before temperature.
   */
  readonly vocabMask?: Int32Array | null;
}

/**
 * Sets the logits of the tokens a grammar mask disallows to −Infinity (xgrammar apply_token_bitmask_inplace; ids
 * beyond the mask's width are disallowed).
 * @param logits [vocabSize] f32 one row (modified) @param mask [ceil(vocabSize / 32)] i32
 */
export function applyVocabMask(logits: Float32Array, mask: Int32Array): void {
  const V = logits.length;
  for (let w = 0; w * 32 < V; w++) {
    const bits = w < mask.length ? mask[w] : 0;
    if (bits === -1) continue;
    const base = w * 32;
    const end = Math.min(32, V - base);
    if (bits === 0) {
      logits.fill(-Infinity, base, base + end);
      continue;
    }
    for (let b = 0; b < end; b++) if (((bits >>> b) & 1) === 0) logits[base + b] = -Infinity;
  }
}

/** Result of sampling one row. */
export interface RowSample {
  readonly tokenId: number;
  /** logprob of tokenId (greedy: log_softmax of penalized logits; else of logits / temperature). */
  readonly logprob: number;
  /** [topLogprobsNum] descending [logprob, id] pairs from the same distribution. */
  readonly topLogprobs: [number, number][];
}

/**
 * Applies logit bias, min_new_tokens masking and the frequency / presence / repetition penalties in place.
 * Frequency/presence: `logit -= freq·count + presence·[count > 0]` (OpenAI); repetition (HF / CTRL, Keskar 2019):
 * positive logits ÷ penalty, negative × penalty, for tokens already generated.
 * @param logits [vocabSize] f32 one row (modified)
 */
export function applyPenalties(logits: Float32Array, info: RowSamplingInfo): void {
  const p = info.params;
  for (const [id, bias] of p.logitBias) logits[id] += bias;
  if (info.numOutputTokens < p.minNewTokens) for (const id of info.stopTokenIds) if (id < logits.length) logits[id] = -Infinity;
  const freq = p.frequencyPenalty;
  const pres = p.presencePenalty;
  const rep = p.repetitionPenalty;
  if (freq === 0 && pres === 0 && rep === 1) return;
  for (const [id, count] of info.outputCounts) {
    if (count <= 0 || id >= logits.length) continue;
    let x = logits[id];
    if (rep !== 1) x = x > 0 ? x / rep : x * rep;
    x -= freq * count + pres;
    logits[id] = x;
  }
}

/**
 * log_softmax of a row into `out` (may alias `x`).
 * @param x [n] f32 @param out [n] f32
 */
export function logSoftmax(x: Float32Array, out: Float32Array): void {
  let max = -Infinity;
  for (let i = 0; i < x.length; i++) if (x[i] > max) max = x[i];
  let sum = 0;
  for (let i = 0; i < x.length; i++) sum += Math.exp(x[i] - max);
  const lse = max + Math.log(sum);
  for (let i = 0; i < x.length; i++) out[i] = x[i] - lse;
}

/**
 * Native versions of the greedy argmax, the temperature scaling, the two exp passes and the candidate gather
 * (native/src/sampling.cc), bit-identical to the loops
 * they replace (V8's Math.exp is fdlibm's exp; the addon computes the same operations four lanes at a time).
 * Installed by the engine when the native addon loads (sampling/ imports no kernels); null = the JavaScript loops.
 */
export interface SamplerKernels {
  /** Index of the largest s[i] (first among equals; NaN never chosen unless s[0] is NaN → 0). @param s [≥n] f32 */
  argmax(s: Float32Array, n: number): number;
  /** s[i] = f32(s[i] · invT) in place for i < n; returns the largest (NaN skipped, −Infinity when none). @param s [≥n] f32 */
  scaleMax(s: Float32Array, n: number, invT: number): number;
  /** E[i] = exp(s[i] − shift) for i < n; returns the sum of E in index order. @param s [≥n] f32 @param E [≥n] f64 */
  expShiftSum(s: Float32Array, n: number, shift: number, E: Float64Array): number;
  /** P[i] = f32(exp(f32(s[i] − lse))) for i < n; returns the sum of P in index order. @param s [≥n] f32 @param P [≥n] f32 */
  expProbs(s: Float32Array, n: number, lse: number, P: Float32Array): number;
  /** Writes the i < n with E[i] ≥ bound to ids (ascending); returns their count. @param E [≥n] f64 @param ids [≥n] i32 */
  selectAtLeast(E: Float64Array, n: number, bound: number, ids: Int32Array): number;
  /**
   * The fused sampler (native/src/fused_sampling.h), every mode for several rows at once over the addon's threads
   * (sampleRows): params holds 8 doubles per row (invT (0 = greedy), topK, topP, minP, u, wantLp, topN, 0); writes
   * tok / lp / status (1 = left to the reference: non-finite row) per row.
   */
  fusedRows?(logits: Float32Array, V: number, rows: Int32Array, params: Float64Array, tok: Int32Array, lp: Float64Array, status: Int32Array): void;
}

let kernels: SamplerKernels | null = null;

/** Installs (or with null removes) the native exp passes for every later sampleRow call in this thread. */
export function setSamplerKernels(k: SamplerKernels | null): void {
  kernels = k;
}

/** The installed native passes, or null (JavaScript loops). */
export function samplerKernels(): SamplerKernels | null {
  return kernels;
}

/** Per-id scratch reused by every call (sampling runs on one thread, one row at a time): exp(s − max) and p. */
let scratchE = new Float64Array(0);
let scratchP = new Float32Array(0);
/** Candidate ids (drawCandidates). */
let scratchIds = new Int32Array(0);
/** Grows the per-id scratch to at least V entries. */
function ensureScratch(V: number): void {
  if (scratchE.length < V) {
    scratchE = new Float64Array(V);
    scratchP = new Float32Array(V);
    scratchIds = new Int32Array(V);
  }
}

/** Bit view of one f32 (sort keys of the candidates). */
const F32 = new Float32Array(1);
const U32 = new Uint32Array(F32.buffer);
/** Relative slack of the candidate gather: p ≥ t implies exp(s − max) ≥ t · sum · (1 − GATHER_SLACK) (see drawCandidates). */
const GATHER_SLACK = 1e-3;
/** Ids below 2^ID_BITS get packed (p bits, id) sort keys; larger vocabularies sort with a comparator. */
const ID_BITS = 21;

/**
 * Samples one row (SGLang order): penalties → grammar vocab mask (constrained rows) → greedy argmax if topK = 1; else softmax(logits / temperature), then
 * top-k, top-p (`cumsum − p > topP` dropped) and min-p (`p < minP · pMax` dropped) over the descending-sorted
 * probabilities, and a multinomial draw from what is left. Returned logprobs are from the distribution before the
 * top-k/p/min-p filters (SGLang default).
 *
 * Cost per row (vocab V): greedy one pass (native when installed); otherwise two passes plus one exp per id (the log-sum-exp; native when
 * installed, see setSamplerKernels), then, for
 * filtered draws, exps and a sort over the candidate set only (unfiltered draws: a second exp per id). Results are
 * bit-identical to sampler_reference.ts (the straightforward version: same token, logprob and RNG use), which
 * rows with non-finite values are handed to.
 * @param logits [vocabSize] f32 one row (overwritten with scratch values)
 * @returns the token; `logprob` is NaN for a greedy row with needLogprob false
 * @throws nothing; an all −Infinity row samples token 0
 */
export function sampleRow(logits: Float32Array, info: RowSamplingInfo): RowSample {
  applyPenalties(logits, info);
  if (info.vocabMask) applyVocabMask(logits, info.vocabMask);
  return sampleRowPenalized(logits, info);
}

/**
 * sampleRow after its penalties and grammar mask (the rows sampleRows' fused kernel leaves to the reference).
 * @param logits [vocabSize] f32 one row, penalized and masked (overwritten with scratch values)
 */
export function sampleRowPenalized(logits: Float32Array, info: RowSamplingInfo): RowSample {
  const p = info.params;
  const V = logits.length;
  if (p.topK === 1) {
    let best = 0;
    if (kernels !== null) best = kernels.argmax(logits, V);
    else {
      let bestV = logits[0];
      for (let i = 1; i < V; i++) {
        const v = logits[i];
        if (v > bestV) {
          bestV = v;
          best = i;
        }
      }
    }
    if (info.needLogprob === false && info.topLogprobsNum === 0) return { tokenId: best, logprob: NaN, topLogprobs: [] };
    const m = logits[best];
    if (kernels !== null && m === m) {
      // logSoftmax's max is logits[best] (the largest non-NaN value); its exp pass runs natively.
      ensureScratch(V);
      const lse = m + Math.log(kernels.expShiftSum(logits, V, m, scratchE));
      if (info.topLogprobsNum === 0) return { tokenId: best, logprob: Math.fround(m - lse), topLogprobs: [] };
      for (let i = 0; i < V; i++) logits[i] = logits[i] - lse;
      return { tokenId: best, logprob: logits[best], topLogprobs: topLogprobsOf(logits, info.topLogprobsNum) };
    }
    logSoftmax(logits, logits);
    return { tokenId: best, logprob: logits[best], topLogprobs: topLogprobsOf(logits, info.topLogprobsNum) };
  }
  // s = f32(logit / T) in place, and its max (as the reference's `logits[i] *= invT` then logSoftmax).
  const invT = 1 / p.temperature;
  let max = -Infinity;
  if (kernels !== null) max = kernels.scaleMax(logits, V, invT);
  else {
    for (let i = 0; i < V; i++) {
      const s = Math.fround(logits[i] * invT);
      logits[i] = s;
      if (s > max) max = s;
    }
  }
  ensureScratch(V);
  const E = scratchE;
  let sum = 0;
  if (kernels !== null) sum = kernels.expShiftSum(logits, V, max, E);
  else {
    for (let i = 0; i < V; i++) {
      const e = Math.exp(logits[i] - max);
      E[i] = e;
      sum += e;
    }
  }
  const lse = max + Math.log(sum);
  // NaN / ±Infinity somewhere: the reference's exact behaviour.
  if (!Number.isFinite(lse) || !(sum >= 1)) return drawFromScaledReference(logits, info);
  const tokenId =
    p.topK >= V && p.topP >= 1 && p.minP <= 0 ? drawUnfiltered(logits, lse, info.rng) : drawCandidates(logits, E, max, sum, lse, p.topK, p.topP, p.minP, info.rng);
  if (info.topLogprobsNum > 0) {
    for (let i = 0; i < V; i++) logits[i] = logits[i] - lse; // f32 logprobs, as the reference's logSoftmax
    return { tokenId, logprob: logits[tokenId], topLogprobs: topLogprobsOf(logits, info.topLogprobsNum) };
  }
  return { tokenId, logprob: Math.fround(logits[tokenId] - lse), topLogprobs: [] };
}

/**
 * Scores one logits row for a known next token (prompt logprobs): log_softmax(row)[tokenId] and the top-n
 * [logprob, id] pairs, exactly as `logSoftmax` into a fresh row then `topLogprobsOf` (the same f32 values), without
 * allocating a row; the exp pass runs natively when installed.
 * @param logits [vocabSize] f32 (not modified)
 * @param tokenId 0 ≤ tokenId < vocabSize
 * @param topN top alternatives wanted (0 = none)
 */
export function scoreRow(logits: Float32Array, tokenId: number, topN: number): { logprob: number; topLogprobs: [number, number][] } {
  const V = logits.length;
  ensureScratch(V);
  const m = V > 0 ? logits[kernels !== null ? kernels.argmax(logits, V) : 0] : NaN;
  if (kernels === null || !(m === m)) {
    const lp = scratchP.subarray(0, V);
    logSoftmax(logits, lp);
    return { logprob: lp[tokenId], topLogprobs: topLogprobsOf(lp, topN) };
  }
  // logSoftmax's max is the argmax's value (the largest non-NaN entry); its exp pass runs natively.
  const lse = m + Math.log(kernels.expShiftSum(logits, V, m, scratchE));
  if (topN <= 0) return { logprob: Math.fround(logits[tokenId] - lse), topLogprobs: [] };
  const lp = scratchP.subarray(0, V);
  for (let i = 0; i < V; i++) lp[i] = logits[i] - lse;
  return { logprob: lp[tokenId], topLogprobs: topLogprobsOf(lp, topN) };
}

/**
 * Multinomial draw over the whole vocabulary: p = f32(exp(f32(s − lse))) per id, one rng.nextFloat().
 * @param scaled [V] f32 logits / T @param lse log-sum-exp of `scaled`
 */
function drawUnfiltered(scaled: Float32Array, lse: number, rng: Rng): number {
  const V = scaled.length;
  const P = scratchP;
  let total = 0;
  if (kernels !== null) total = kernels.expProbs(scaled, V, lse, P);
  else {
    for (let i = 0; i < V; i++) {
      const pr = Math.fround(Math.exp(Math.fround(scaled[i] - lse)));
      P[i] = pr;
      total += pr;
    }
  }
  const target = rng.nextFloat() * total;
  let acc = 0;
  for (let i = 0; i < V; i++) {
    acc += P[i];
    if (acc > target) return i;
  }
  for (let i = V - 1; i >= 0; i--) if (P[i] > 0) return i;
  return 0;
}

/**
 * Multinomial draw under top-k / top-p / min-p, computing p only for a candidate set. The candidate set is the
 * reference's: the ids with p ≥ t for t = pMax/100, /16, /16², … down to the first t where the set holds ≥ topK ids
 * or more than topP mass (summed in id order, as the reference) or t < 1e-38 — every id outside it ranks below all
 * of them and would be dropped by top-k / top-p anyway; with min-p the lowering also stops once t ≤ pMax · minP, and
 * ids under pMax · minP are left out (they sort after every kept id and are never kept). Ids are gathered by their
 * exp(s − max) ≥ t · sum · (1 − 1e-3), a superset of p ≥ t: f32 rounding moves p by < 2e-6 relative for t ≥ 6e-40
 * (the smallest t reached), far inside the slack. The set is sorted by (p descending, id ascending) through packed
 * numeric keys, and the draw is the reference's.
 * @param scaled [V] f32 logits / T @param E [≥V] exp(scaled − max) @param max max of `scaled` @param sum Σ E
 * @param lse log-sum-exp of `scaled`
 */
function drawCandidates(scaled: Float32Array, E: Float64Array, max: number, sum: number, lse: number, topK: number, topP: number, minP: number, rng: Rng): number {
  const V = scaled.length;
  const P = scratchP;
  const u = rng.nextFloat();
  // p is non-decreasing in s, so the largest p is the max's (the reference's running max over p).
  const pMax = Math.fround(Math.exp(Math.fround(max - lse)));
  const minThresh = pMax * minP;
  const kLimit = Math.min(topK, V);
  const ids = scratchIds;
  let nIds = 0;
  let gathered = Infinity; // the ids with E ≥ gathered are ids[0, nIds) (id order), with P set
  let t = pMax * 0.01;
  for (;;) {
    if (t * sum * (1 - GATHER_SLACK) < gathered) {
      // Gather this level (the next one usually holds ~10× more ids: a compare pass is cheaper than their exps).
      const bound = t * sum * (1 - GATHER_SLACK);
      if (kernels !== null) nIds = kernels.selectAtLeast(E, V, bound, ids);
      else {
        nIds = 0;
        for (let i = 0; i < V; i++) if (E[i] >= bound) ids[nIds++] = i;
      }
      for (let j = 0; j < nIds; j++) {
        const i = ids[j];
        if (!(E[i] >= gathered)) P[i] = Math.fround(Math.exp(Math.fround(scaled[i] - lse)));
      }
      gathered = bound;
    }
    let count = 0;
    let mass = 0;
    for (let j = 0; j < nIds; j++) {
      const pr = P[ids[j]];
      if (pr >= t) {
        count++;
        mass += pr;
      }
    }
    if (count >= kLimit || mass > topP || t < 1e-38) break;
    if (minP > 0 && t <= minThresh) break;
    t /= 16;
  }
  const floor = Math.max(t, minThresh);
  const cand = sortCandidates(ids, nIds, P, floor);
  return drawSortedCandidates(cand, P, topK, topP, minThresh, u);
}

/**
 * The filtered multinomial draw over candidates sorted by probability descending (ties: id ascending): keeps rank r
 * while r < topK and the mass before it is ≤ topP, drops p < minThresh, then draws u·(kept mass) in rank order
 * (SGLang python/sglang/srt/layers/sampler.py top_k_top_p_min_p_sampling_from_probs_torch semantics).
 * @param cand candidate token ids, sorted
 * @param probs [V] f32 probabilities indexed by token id
 * @param u uniform draw in [0, 1)
 * @returns the drawn token id
 */
export function drawSortedCandidates(cand: ArrayLike<number>, probs: Float32Array, topK: number, topP: number, minThresh: number, u: number): number {
  const keep = new Float64Array(cand.length);
  let cum = 0;
  let total = 0;
  for (let r = 0; r < cand.length; r++) {
    const pr = probs[cand[r]];
    const before = cum;
    cum += pr;
    if (r >= topK) break;
    if (before > topP) break;
    if (pr < minThresh) continue;
    keep[r] = pr;
    total += pr;
  }
  const target = u * total;
  let acc = 0;
  for (let r = 0; r < cand.length; r++) {
    if (keep[r] === 0) continue;
    acc += keep[r];
    if (acc > target) return cand[r];
  }
  for (let r = cand.length - 1; r >= 0; r--) if (keep[r] > 0) return cand[r];
  return cand[0] ?? 0;
}

/**
 * The ids of `ids[0, nIds)` with P[id] ≥ floor, sorted by P descending then id ascending. Keys pack the f32 bits of P
 * (monotone for p ≥ 0) above the complemented id, exact in a double below 2^53, so a native numeric sort does it.
 */
function sortCandidates(ids: Int32Array, nIds: number, P: Float32Array, floor: number): number[] {
  const sel: number[] = [];
  for (let j = 0; j < nIds; j++) if (P[ids[j]] >= floor) sel.push(ids[j]);
  const n = sel.length;
  if (n === 0 || sel[n - 1] >= 1 << ID_BITS) return sel.sort((a, b) => P[b] - P[a] || a - b);
  const mask = (1 << ID_BITS) - 1;
  const keys = new Float64Array(n);
  for (let j = 0; j < n; j++) {
    F32[0] = P[sel[j]];
    keys[j] = U32[0] * (mask + 1) + (mask - sel[j]);
  }
  keys.sort();
  const out = new Array<number>(n);
  for (let j = 0; j < n; j++) out[j] = mask - (keys[n - 1 - j] % (mask + 1));
  return out;
}
