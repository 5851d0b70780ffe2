// Sampler: one logits row → next token id (+ logprobs), as SGLang python/sglang/srt/layers/sampler.py with the
// penalizers of python/sglang/srt/sampling/penaltylib. Free functions over typed arrays; a row never depends on
// other rows, so sampling is batch-invariant.
import type { Rng } from '../common/index.js';
import type { SamplingParams } from './sampling_params.js';

/** Per-request inputs to sample one row. */
export interface RowSamplingInfo {
  readonly params: SamplingParams;
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

/** Top-n [logprob, id] of a logprob row, descending, ties by lower id. */
export function topLogprobsOf(lp: Float32Array, n: number): [number, number][] {
  if (n <= 0) return [];
  const top: [number, number][] = [];
  for (let i = 0; i < lp.length; i++) {
    const v = lp[i];
    if (top.length === n && v <= top[n - 1][0]) continue;
    let j = top.length < n ? top.length : n - 1;
    if (top.length < n) top.push([v, i]);
    else top[j] = [v, i];
    while (j > 0 && top[j - 1][0] < v) {
      [top[j - 1], top[j]] = [top[j], top[j - 1]];
      j--;
    }
  }
  return top;
}

/**
 * Samples one row (SGLang order): penalties → greedy argmax if topK = 1; else softmax(logits / temperature), then
 * top-k, top-p (`cumsum − p > topP` dropped) and min-p (`p < minP · pMax` dropped) over the descending-sorted
 * probabilities, and a multinomial draw from what is left. Returned logprobs are from the distribution before the
 * top-k/p/min-p filters (SGLang default).
 * @param logits [vocabSize] f32 one row (overwritten with scratch values)
 * @returns the token; `logprob` is NaN for a greedy row with needLogprob false
 * @throws nothing; an all −Infinity row samples token 0
 */
export function sampleRow(logits: Float32Array, info: RowSamplingInfo): RowSample {
  applyPenalties(logits, info);
  const p = info.params;
  const V = logits.length;
  if (p.topK === 1) {
    let best = 0;
    for (let i = 1; i < V; i++) if (logits[i] > logits[best]) best = i;
    if (info.needLogprob === false && info.topLogprobsNum === 0) return { tokenId: best, logprob: NaN, topLogprobs: [] };
    logSoftmax(logits, logits);
    return { tokenId: best, logprob: logits[best], topLogprobs: topLogprobsOf(logits, info.topLogprobsNum) };
  }
  const invT = 1 / p.temperature;
  for (let i = 0; i < V; i++) logits[i] *= invT;
  logSoftmax(logits, logits); // logits now hold logprobs
  const probs = new Float32Array(V);
  let pMax = 0;
  for (let i = 0; i < V; i++) {
    probs[i] = Math.exp(logits[i]);
    if (probs[i] > pMax) pMax = probs[i];
  }
  const tokenId = drawFiltered(probs, pMax, p.topK, p.topP, p.minP, info.rng);
  return { tokenId, logprob: logits[tokenId], topLogprobs: topLogprobsOf(logits, info.topLogprobsNum) };
}

/**
 * Multinomial draw under top-k / top-p / min-p. Only a candidate set is sorted: the tokens with p ≥ t for a threshold
 * t lowered until the set holds ≥ topK tokens or more than topP mass — every token outside it ranks below all of
 * them and so would be dropped by top-k or top-p anyway (exact, not an approximation).
 * @param probs [V] f32 softmax probabilities
 */
function drawFiltered(probs: Float32Array, pMax: number, topK: number, topP: number, minP: number, rng: Rng): number {
  const V = probs.length;
  const u = rng.nextFloat();
  if (topK >= V && topP >= 1 && minP <= 0) {
    let total = 0;
    for (let i = 0; i < V; i++) total += probs[i];
    let acc = 0;
    const target = u * total;
    for (let i = 0; i < V; i++) {
      acc += probs[i];
      if (acc > target) return i;
    }
    return lastNonZero(probs);
  }
  let cand: number[] = [];
  for (let t = pMax * 0.01; ; t /= 16) {
    cand = [];
    let mass = 0;
    for (let i = 0; i < V; i++) {
      if (probs[i] >= t) {
        cand.push(i);
        mass += probs[i];
      }
    }
    if (cand.length >= Math.min(topK, V) || mass > topP || t < 1e-38) break;
  }
  cand.sort((a, b) => probs[b] - probs[a] || a - b);
  const keep = new Float64Array(cand.length);
  let cum = 0;
  const minThresh = probs[cand[0]] * minP;
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

function lastNonZero(p: Float32Array): number {
  for (let i = p.length - 1; i >= 0; i--) if (p[i] > 0) return i;
  return 0;
}
