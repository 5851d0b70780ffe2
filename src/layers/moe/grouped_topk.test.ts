import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Rng } from '../../common/index.js';
import { biasedGroupedTopK } from './grouped_topk.js';

const sigmoid = (z: number): number => 1 / (1 + Math.exp(-z));
const logit = (p: number): number => Math.log(p / (1 - p));

test('group-limited selection drops a strong expert whose group is weak; bias selects but does not weigh', () => {
  // 8 experts, 4 groups of 2, keep 2 groups, pick 2 experts.
  const scores = [0.90, 0.05, 0.60, 0.55, 0.50, 0.52, 0.10, 0.12];
  const bias = Float32Array.from([0, 0, 0, 0, 0, 0.3, 0, 0]);
  const logits = Float32Array.from(scores.map(logit));
  // biased: [.9,.05,.6,.55,.5,.82,.1,.12]; group sums: .95, 1.15, 1.32, .22 → keep groups 2 and 1
  const out = biasedGroupedTopK(logits, 1, 8, bias, { topK: 2, numExpertGroups: 4, topKGroup: 2, normTopKProb: true, routedScalingFactor: 2.5 });
  assert.deepEqual([...out.topKIds], [5, 2]); // expert 0 (0.90) is excluded: its group lost
  const s5 = 0.52, s2 = 0.60; // unbiased scores give the weights
  assert.ok(Math.abs(out.topKWeights[0] - 2.5 * s5 / (s5 + s2)) < 1e-6);
  assert.ok(Math.abs(out.topKWeights[1] - 2.5 * s2 / (s5 + s2)) < 1e-6);
  const raw = biasedGroupedTopK(logits, 1, 8, bias, { topK: 2, numExpertGroups: 4, topKGroup: 2, normTopKProb: false, routedScalingFactor: 1 });
  assert.ok(Math.abs(raw.topKWeights[0] - s5) < 1e-6 && Math.abs(raw.topKWeights[1] - s2) < 1e-6);
});

test('matches a sort-based reference on random routers; rows are independent of the batch', () => {
  const rng = new Rng(11);
  const E = 16, G = 4, numTokens = 50;
  const cfg = { topK: 4, numExpertGroups: G, topKGroup: 2, normTopKProb: true, routedScalingFactor: 2.5 };
  const logits = Float32Array.from({ length: numTokens * E }, () => rng.nextGaussian() * 2);
  const bias = Float32Array.from({ length: E }, () => rng.nextGaussian() * 0.5);
  const out = biasedGroupedTopK(logits, numTokens, E, bias, cfg);
  for (let t = 0; t < numTokens; t++) {
    const s = Array.from({ length: E }, (_, e) => sigmoid(logits[t * E + e]));
    const c = s.map((v, e) => v + bias[e]);
    const groups = Array.from({ length: G }, (_, g) => {
      const m = c.slice(g * 4, g * 4 + 4).sort((a, b) => b - a);
      return { g, score: m[0] + m[1] };
    }).sort((a, b) => b.score - a.score).slice(0, 2).map((x) => x.g);
    const ids = c.map((v, e) => ({ v, e })).filter((x) => groups.includes(Math.floor(x.e / 4)))
      .sort((a, b) => b.v - a.v).slice(0, 4).map((x) => x.e);
    assert.deepEqual([...out.topKIds.subarray(t * 4, t * 4 + 4)], ids);
    const sum = ids.reduce((a, e) => a + s[e], 0);
    ids.forEach((e, k) => assert.ok(Math.abs(out.topKWeights[t * 4 + k] - 2.5 * s[e] / sum) < 1e-5));
    const alone = biasedGroupedTopK(logits.slice(t * E, (t + 1) * E), 1, E, bias, cfg);
    assert.deepEqual(alone.topKWeights, out.topKWeights.slice(t * 4, t * 4 + 4));
  }
});

test('inconsistent sizes throw InternalError', () => {
  assert.throws(() => biasedGroupedTopK(new Float32Array(15), 1, 15, null, { topK: 2, numExpertGroups: 4, topKGroup: 2, normTopKProb: true, routedScalingFactor: 1 }), { name: 'InternalError' });
  assert.throws(() => biasedGroupedTopK(new Float32Array(16), 1, 16, null, { topK: 9, numExpertGroups: 4, topKGroup: 2, normTopKProb: true, routedScalingFactor: 1 }), { name: 'InternalError' });
});
