import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createCpuOps } from '../../kernels/index.js';
import { selectExperts } from './router.js';

const ops = createCpuOps();
const sig = (z: number): number => 1 / (1 + Math.exp(-z));

test('selectExperts: bias decides the selection only; weights are the renormalized unbiased sigmoid scores', () => {
  // logits → scores ≈ [0.731, 0.5, 0.269, 0.881]; bias lifts expert 2 above experts 0 and 1
  const logits = Float32Array.of(1, 0, -1, 2);
  const bias = Float32Array.of(0, 0, 0.6, 0);
  const { topKIds, topKWeights } = selectExperts(logits, 1, 4, { topK: 2, scoringFunc: 'sigmoid', correctionBias: bias, renormalize: true, routedScalingFactor: 1 }, ops);
  assert.deepEqual(Array.from(topKIds), [3, 2]); // keys 0.881, 0.869 (biased), 0.731, 0.5
  const s3 = sig(2), s2 = sig(-1);
  assert.ok(Math.abs(topKWeights[0] - s3 / (s3 + s2)) < 1e-6);
  assert.ok(Math.abs(topKWeights[1] - s2 / (s3 + s2)) < 1e-6);
});

test('selectExperts: no bias, no renormalize, scaling factor, softmax scoring, per-token rows', () => {
  const logits = Float32Array.of(0, 1, 3, /* token 1 */ 2, 2, 0);
  const a = selectExperts(logits, 2, 3, { topK: 1, scoringFunc: 'sigmoid', correctionBias: null, renormalize: false, routedScalingFactor: 2.5 }, ops);
  assert.deepEqual(Array.from(a.topKIds), [2, 0]); // tie 2,2 → lower index
  assert.ok(Math.abs(a.topKWeights[0] - 2.5 * sig(3)) < 1e-6);
  const b = selectExperts(Float32Array.of(0, Math.log(3)), 1, 2, { topK: 2, scoringFunc: 'softmax', correctionBias: null, renormalize: false, routedScalingFactor: 1 }, ops);
  assert.deepEqual(Array.from(b.topKIds), [1, 0]);
  assert.ok(Math.abs(b.topKWeights[0] - 0.75) < 1e-6 && Math.abs(b.topKWeights[1] - 0.25) < 1e-6);
});
