import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Rng } from '../common/index.js';
import { normalizeSamplingParams, TOP_K_ALL, type SamplingParamsInput } from './sampling_params.js';
import { applyPenalties, logSoftmax, sampleRow, type RowSamplingInfo } from './sampler.js';

function info(sp: SamplingParamsInput, extra: Partial<RowSamplingInfo> = {}): RowSamplingInfo {
  return {
    params: normalizeSamplingParams(sp, 8),
    rng: new Rng(sp.seed ?? 1),
    outputCounts: new Map(),
    numOutputTokens: 0,
    stopTokenIds: [],
    topLogprobsNum: 0,
    ...extra,
  };
}

const ROW = [1.0, 3.0, -2.0, 0.5, 2.9, -1.0, 0.0, 2.0];

test('normalize: greedy folding, top_k -1, SGLang messages', () => {
  const g = normalizeSamplingParams({ temperature: 0 }, 8);
  assert.equal(g.topK, 1);
  assert.equal(g.temperature, 1);
  assert.equal(normalizeSamplingParams({}, 8).topK, TOP_K_ALL);
  assert.equal(normalizeSamplingParams({}, 8).maxNewTokens, 128);
  assert.throws(() => normalizeSamplingParams({ topP: 0 }, 8), /top_p must be in \(0, 1\], got 0\./);
  assert.throws(() => normalizeSamplingParams({ topK: 0 }, 8), /top_k must be -1 \(disable\) or at least 1, got 0\./);
  assert.throws(() => normalizeSamplingParams({ temperature: -1 }, 8), /temperature must be a non-negative finite number/);
  assert.throws(() => normalizeSamplingParams({ repetitionPenalty: 0 }, 8), /repetition_penalty must be in \(0, 2\]/);
  assert.throws(() => normalizeSamplingParams({ frequencyPenalty: 3 }, 8), /frequency_penalty must be in \[-2, 2\], got 3\./);
  assert.throws(() => normalizeSamplingParams({ minNewTokens: 5, maxNewTokens: 2 }, 8), /min_new_tokens must be in \[0, max_new_tokens\(2\)\], got 5\./);
  assert.throws(() => normalizeSamplingParams({ logitBias: { '9': 1 } }, 8), /logit_bias must has keys in \[0, 7\], got 9\./);
  try {
    normalizeSamplingParams({ minP: 2 }, 8);
    assert.fail('no throw');
  } catch (e) {
    assert.equal((e as { param: string }).param, 'min_p');
  }
});

test('greedy: argmax with log_softmax logprob and top logprobs', () => {
  const r = sampleRow(Float32Array.from(ROW), info({ temperature: 0 }, { topLogprobsNum: 3 }));
  assert.equal(r.tokenId, 1);
  const lp = new Float32Array(8);
  logSoftmax(Float32Array.from(ROW), lp);
  assert.ok(Math.abs(r.logprob - lp[1]) < 1e-6);
  assert.deepEqual(r.topLogprobs.map(([, id]) => id), [1, 4, 7]);
});

test('penalties: frequency, presence, repetition, logit bias, min_new_tokens', () => {
  const x = Float32Array.from(ROW);
  applyPenalties(x, info({ frequencyPenalty: 0.5, presencePenalty: 0.25 }, { outputCounts: new Map([[1, 2], [2, 1]]) }));
  assert.ok(Math.abs(x[1] - (3 - 1 - 0.25)) < 1e-6);
  assert.ok(Math.abs(x[2] - (-2 - 0.5 - 0.25)) < 1e-6);
  assert.equal(x[0], 1);
  const y = Float32Array.from(ROW);
  applyPenalties(y, info({ repetitionPenalty: 2 }, { outputCounts: new Map([[1, 1], [2, 1]]) }));
  assert.equal(y[1], 1.5);
  assert.equal(y[2], -4);
  const z = Float32Array.from(ROW);
  applyPenalties(z, info({ logitBias: { '2': 10 }, minNewTokens: 2 }, { stopTokenIds: [1], numOutputTokens: 1 }));
  assert.equal(z[2], 8);
  assert.equal(z[1], -Infinity);
  // Greedy follows the penalties: token 1 repeated → 4 wins.
  const r = sampleRow(Float32Array.from(ROW), info({ temperature: 0, frequencyPenalty: 1 }, { outputCounts: new Map([[1, 1]]) }));
  assert.equal(r.tokenId, 4);
});

test('top-k / top-p / min-p restrict the support', () => {
  const draws = (sp: SamplingParamsInput, n = 400): Set<number> => {
    const inf = info({ ...sp, seed: 7 });
    const seen = new Set<number>();
    for (let i = 0; i < n; i++) seen.add(sampleRow(Float32Array.from(ROW), inf).tokenId);
    return seen;
  };
  assert.deepEqual([...draws({ topK: 2 })].sort(), [1, 4]);
  // probs sorted: 1 (.36), 4 (.33), 7 (.13), 0 (.05)...; top_p 0.6 keeps 1 and 4 (cumsum before 4 = .36 ≤ .6), not 7.
  assert.deepEqual([...draws({ topP: 0.6 })].sort(), [1, 4]);
  assert.deepEqual([...draws({ topP: 0.3 })], [1]);
  // min_p 0.3: keep p ≥ 0.3·p(1): tokens 1, 4, 7 (e^-1 = .37 ≥ .3), not 0 (e^-2)
  assert.deepEqual([...draws({ minP: 0.3 })].sort(), [1, 4, 7]);
  assert.equal(draws({}, 2000).size, 8, 'plain sampling reaches every token');
});

test('temperature sharpens; frequencies follow softmax(logits / T)', () => {
  const inf = info({ temperature: 0.5, seed: 3 });
  const counts = new Array(8).fill(0);
  const N = 4000;
  for (let i = 0; i < N; i++) counts[sampleRow(Float32Array.from(ROW), inf).tokenId]++;
  const lp = new Float32Array(8);
  logSoftmax(Float32Array.from(ROW.map((v) => v / 0.5)), lp);
  for (let i = 0; i < 8; i++) assert.ok(Math.abs(counts[i] / N - Math.exp(lp[i])) < 0.03, `token ${i}`);
  const r = sampleRow(Float32Array.from(ROW), info({ temperature: 0.5, seed: 3 }));
  assert.ok(Math.abs(r.logprob - lp[r.tokenId]) < 1e-6, 'logprob from the temperature-scaled distribution');
});

test('seeds are reproducible and differ between seeds', () => {
  const run = (seed: number): number[] => {
    const inf = info({ seed });
    return Array.from({ length: 32 }, () => sampleRow(Float32Array.from(ROW), inf).tokenId);
  };
  assert.deepEqual(run(42), run(42));
  assert.notDeepEqual(run(42), run(43));
});


test('greedy without logprobs skips the log-softmax but picks the same token', () => {
  const a = sampleRow(Float32Array.from(ROW), info({ temperature: 0 }, { needLogprob: false }));
  assert.equal(a.tokenId, 1);
  assert.ok(Number.isNaN(a.logprob));
});
