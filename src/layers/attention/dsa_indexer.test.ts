import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Rng } from '../../common/index.js';
import { indexScores, selectTopKCausal } from './dsa_indexer.js';

test('selectTopKCausal: all keys (in order) when t+1 <= topK', () => {
  const out = new Int32Array(16);
  const n = selectTopKCausal(Float32Array.from([5, -1, 3]), 3, 16, out);
  assert.equal(n, 3);
  assert.deepEqual([...out.subarray(0, 3)], [0, 1, 2]);
});

test('selectTopKCausal equals a full sort (ties to the lower position), result ascending', () => {
  const rng = new Rng(5);
  for (let trial = 0; trial < 200; trial++) {
    const numKeys = 1 + Math.floor(rng.nextFloat() * 120);
    const topK = 1 + Math.floor(rng.nextFloat() * 40);
    // few distinct values → many ties
    const scores = Float32Array.from({ length: numKeys }, () => Math.floor(rng.nextFloat() * (trial % 2 ? 5 : 1000)));
    const out = new Int32Array(topK);
    const n = selectTopKCausal(scores, numKeys, topK, out);
    const expected = Array.from({ length: numKeys }, (_, t) => t)
      .sort((a, b) => scores[b] - scores[a] || a - b).slice(0, topK).sort((a, b) => a - b);
    assert.equal(n, expected.length);
    assert.deepEqual([...out.subarray(0, n)], expected);
  }
});

test('indexScores = Σ_h w_h ReLU(q_h·k_t), keys read through locs', () => {
  const rng = new Rng(9);
  const H = 3, D = 4, numKeys = 5;
  const q = Float32Array.from({ length: H * D }, () => rng.nextGaussian());
  const w = Float32Array.from({ length: H }, () => rng.nextGaussian());
  const indexK = Float32Array.from({ length: 10 * D }, () => rng.nextGaussian());
  const locs = Int32Array.from([7, 2, 9, 4, 1]);
  const out = new Float32Array(numKeys);
  indexScores(q, 0, w, 0, H, D, indexK, locs, numKeys, out);
  for (let t = 0; t < numKeys; t++) {
    let ref = 0;
    for (let h = 0; h < H; h++) {
      let dot = 0;
      for (let d = 0; d < D; d++) dot += q[h * D + d] * indexK[locs[t] * D + d];
      ref += w[h] * Math.max(0, dot);
    }
    assert.ok(Math.abs(out[t] - ref) < 1e-5, `t=${t}`);
  }
});

