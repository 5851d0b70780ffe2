// The straightforward row sampler (one full pass per step: scale, log-softmax, [vocab] probabilities, candidate
// thresholds, sort) kept as the oracle of sampler.ts: sampler.test.ts checks that sampleRow returns exactly what this
// returns (same token, same logprob, same RNG use), and sampleRow falls back to it for rows with non-finite values.
// Same semantics as SGLang python/sglang/srt/layers/sampler.py (see sampler.ts).
import { applyPenalties, drawSortedCandidates, logSoftmax, type RowSample, type RowSamplingInfo } from './sampler.js';
import { topLogprobsOf } from './top_logprobs.js';

/**
 * Reference of sampleRow: penalties → greedy argmax if topK = 1; else softmax(logits / temperature) and the
 * filtered multinomial draw of drawFromScaledReference.
 * @param logits [vocabSize] f32 one row (overwritten with scratch values)
 */
export function sampleRowReference(logits: Float32Array, info: RowSamplingInfo): RowSample {
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
  return drawFromScaledReference(logits, info);
}

/**
 * The non-greedy part of sampleRowReference on logits already penalized and divided by the temperature:
 * log-softmax in place, probabilities, top-k / top-p / min-p filtered multinomial draw (one rng.nextFloat()).
 * @param scaled [vocabSize] f32 (overwritten with logprobs)
 * @param u the uniform draw, when the caller took it from info.rng already (then the RNG is not used here)
 */
export function drawFromScaledReference(scaled: Float32Array, info: RowSamplingInfo, u?: number): RowSample {
  const p = info.params;
  const V = scaled.length;
  logSoftmax(scaled, scaled); // now logprobs
  const probs = new Float32Array(V);
  let pMax = 0;
  for (let i = 0; i < V; i++) {
    probs[i] = Math.exp(scaled[i]);
    if (probs[i] > pMax) pMax = probs[i];
  }
  const tokenId = drawFiltered(probs, pMax, p.topK, p.topP, p.minP, u ?? info.rng.nextFloat());
  return { tokenId, logprob: scaled[tokenId], topLogprobs: topLogprobsOf(scaled, info.topLogprobsNum) };
}

/**
 * Multinomial draw at u (uniform in [0, 1)) under top-k / top-p / min-p. Only a candidate set is sorted: the tokens with p ≥ t for a threshold
 * t lowered until the set holds ≥ topK tokens or more than topP mass — every token outside it ranks below all of
 * them and so would be dropped by top-k or top-p anyway (exact, not an approximation).
 * @param probs [V] f32 softmax probabilities
 */
function drawFiltered(probs: Float32Array, pMax: number, topK: number, topP: number, minP: number, u: number): number {
  const V = probs.length;
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
  return drawSortedCandidates(cand, probs, topK, topP, probs[cand[0]] * minP, u);
}

function lastNonZero(p: Float32Array): number {
  for (let i = p.length - 1; i >= 0; i--) if (p[i] > 0) return i;
  return 0;
}
