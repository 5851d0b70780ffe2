import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Rng } from '../common/index.js';
import { selectLargest, topLogprobsOf } from './top_logprobs.js';

/** What topLogprobsOf returned for n > 256 before the selection: a full sort, value descending, ties by lower id. */
function fullSort(lp: Float32Array, n: number): [number, number][] {
  const ids = Array.from({ length: lp.length }, (_, i) => i);
  ids.sort((a, b) => lp[b] - lp[a] || a - b);
  return ids.slice(0, n).map((i) => [lp[i], i]);
}

/** Logprob-like rows with many exact ties: few distinct levels, ±0, −Infinity entries. */
function tiedRow(rng: Rng, V: number, levels: number): Float32Array {
  return Float32Array.from({ length: V }, () => {
    const r = rng.nextInt(levels + 3);
    if (r === levels) return -Infinity;
    if (r === levels + 1) return -0;
    if (r === levels + 2) return 0;
    return -r / 4 - 0.1;
  });
}

test('topLogprobsOf orders descending', () => {
  assert.deepEqual(topLogprobsOf(Float32Array.from([0.1, 0.5, 0.3]), 2), [[0.5, 1], [0.30000001192092896, 2]]);
});

test('topLogprobsOf: a large n (selection path) gives the same order as the small-n path; n ≥ V returns the whole row', () => {
  // 1000 values with many ties and two -Infinity entries: ties must come by lower id in both paths
  const row = Float32Array.from({ length: 1000 }, (_, i) => (i === 7 || i === 900 ? -Infinity : -((i * 37) % 50) / 8));
  const sorted = topLogprobsOf(row, 5000);
  assert.equal(sorted.length, 1000);
  assert.deepEqual(sorted.slice(0, 200), topLogprobsOf(row, 200));
  assert.deepEqual(topLogprobsOf(row, 300), sorted.slice(0, 300));
  for (let i = 1; i < sorted.length; i++) {
    const [a, b] = [sorted[i - 1], sorted[i]];
    assert.ok(a[0] > b[0] || (a[0] === b[0] && a[1] < b[1]), `entry ${i} out of order`);
  }
  assert.deepEqual(sorted.slice(-2), [[-Infinity, 7], [-Infinity, 900]]);
});

test('topLogprobsOf (selection, n > 256) = a full sort on random rows with ties, for every n up to past V', () => {
  const rng = new Rng(5);
  for (const [V, levels] of [[300, 3], [1000, 1], [1000, 20], [5000, 7], [20_000, 200]] as const) {
    for (let rep = 0; rep < 2; rep++) {
      const lp = tiedRow(rng, V, levels);
      const ref = fullSort(lp, V);
      for (const n of [257, 300, 999, V >> 1, V - 1, V, V + 3]) {
        if (n <= 256) continue;
        assert.deepStrictEqual(topLogprobsOf(lp, n), ref.slice(0, n), `V=${V} levels=${levels} n=${n}`);
      }
    }
  }
  // continuous values (no ties), as log-softmax rows usually are
  const lp = Float32Array.from({ length: 30_000 }, () => Math.fround(-10 * rng.nextFloat()));
  assert.deepStrictEqual(topLogprobsOf(lp, 4096), fullSort(lp, 4096));
});

test('topLogprobsOf: ordered and adversarial rows (sorted, reversed, organ pipe, all equal) select correctly', () => {
  const V = 4096;
  const rows = [
    Float32Array.from({ length: V }, (_, i) => i / V),
    Float32Array.from({ length: V }, (_, i) => -i / V),
    Float32Array.from({ length: V }, (_, i) => -Math.abs(i - V / 2)),
    new Float32Array(V).fill(-3.5),
    new Float32Array(V).fill(-Infinity),
  ];
  for (const lp of rows) for (const n of [257, 1000, 4095]) assert.deepStrictEqual(topLogprobsOf(lp, n), fullSort(lp, n));
});

test('topLogprobsOf: an all-NaN row (a NaN logit poisons log_softmax) comes out in id order; NaN sorts after numbers', () => {
  const nan = new Float32Array(1000).fill(NaN);
  assert.deepStrictEqual(topLogprobsOf(nan, 300), fullSort(nan, 300));
  const mixed = Float32Array.from({ length: 600 }, (_, i) => (i % 3 === 0 ? NaN : -(i % 7)));
  const top = topLogprobsOf(mixed, 600);
  assert.deepStrictEqual(top.slice(0, 400), fullSort(mixed.map((x) => (x === x ? x : -Infinity)), 400));
  assert.deepStrictEqual(top.slice(400).map(([, id]) => id), Array.from({ length: 200 }, (_, i) => 3 * i));
});

test('selectLargest puts the k largest last, also when the partition budget runs out (sort fallback)', () => {
  const rng = new Rng(9);
  for (const maxRounds of [0, 1, 2, undefined]) {
    for (const k of [1, 17, 500, 999]) {
      const a = Float64Array.from({ length: 1000 }, () => rng.nextFloat());
      const want = Float64Array.from(a).sort().subarray(1000 - k);
      selectLargest(a, k, maxRounds);
      assert.deepStrictEqual(Float64Array.from(a.subarray(1000 - k)).sort(), Float64Array.from(want), `k=${k} maxRounds=${maxRounds}`);
    }
  }
});
