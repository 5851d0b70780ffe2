// The Python / numpy ports used by bench-serving and the evals, checked against python3 itself when it is
// installed (skipped otherwise), plus Python formatting rules with known outputs.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { NumpyRandomState, PythonRandom, pyFixed, pyFloatRepr, pyJsonDumps, PyFloat, npMean, npStd, npMedian, npPercentile, pyCenter, pyStrListRepr } from '../src/bench/index.js';

const HAS_PY = spawnSync('python3', ['-c', 'import sys'], { encoding: 'utf8' }).status === 0;
const HAS_NP = HAS_PY && spawnSync('python3', ['-c', 'import numpy'], { encoding: 'utf8' }).status === 0;

function python(code: string): unknown {
  const r = spawnSync('python3', ['-c', code], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout);
}

test('Python random.Random: random, shuffle, sample, choices match CPython', { skip: HAS_PY ? false : 'python3 not available' }, () => {
  for (const seed of [0, 1, 42, 123456789, 2 ** 40 + 7]) {
    const r = new PythonRandom(seed);
    const floats = [r.random(), r.random()];
    const arr = Array.from({ length: 30 }, (_, i) => i);
    r.shuffle(arr);
    const s4 = r.sample([0, 1, 2, 3], 4);
    const sBig = r.sample(Array.from({ length: 198 }, (_, i) => i), 198).slice(0, 12);
    const sSet = r.sample(Array.from({ length: 1000 }, (_, i) => i), 5);
    const ch = r.choices([10, 20, 30, 40, 50, 60, 70], 9);
    const expected = python(`
import random, json
r = random.Random(${seed})
f = [r.random(), r.random()]
a = list(range(30)); r.shuffle(a)
s4 = r.sample(range(4), 4)
sb = r.sample(list(range(198)), 198)[:12]
ss = r.sample(range(1000), 5)
ch = r.choices([10,20,30,40,50,60,70], k=9)
print(json.dumps([f, a, s4, sb, ss, ch]))`);
    assert.deepEqual([floats, arr, s4, sBig, sSet, ch], expected, `seed ${seed}`);
  }
});

test('numpy legacy RandomState: randint and exponential match numpy', { skip: HAS_NP ? false : 'python3 with numpy not available' }, () => {
  for (const seed of [0, 1, 42, 4294967295]) {
    const np = new NumpyRandomState(seed);
    const got = [np.randint(1, 1025, 20), np.randint(0, 151936, 7), np.randint(5, 6, 3), np.exponential(1 / 64), np.random()];
    const expected = python(`
import numpy as np, json
np.random.seed(${seed})
print(json.dumps([np.random.randint(1, 1025, 20).tolist(), np.random.randint(0, 151936, 7).tolist(), np.random.randint(5, 6, 3).tolist(), np.random.exponential(1/64), np.random.random()]))`);
    assert.deepEqual(got, expected, `seed ${seed}`);
  }
});

test('numpy statistics: mean, std, median, linear percentiles', { skip: HAS_NP ? false : 'python3 with numpy not available' }, () => {
  const r = new PythonRandom(5);
  const lists = [[0.5], [0.1, 0.2, 0.7], Array.from({ length: 1000 }, () => r.random() * 3), Array.from({ length: 37 }, () => r.random())];
  for (const xs of lists) {
    const got = [npMean(xs), npStd(xs), npMedian(xs), npPercentile(xs, 90), npPercentile(xs, 99), npPercentile(xs, 95)];
    const expected = python(`
import numpy as np, json
x = ${JSON.stringify(xs)}
print(json.dumps([float(np.mean(x)), float(np.std(x)), float(np.median(x)), float(np.percentile(x, 90)), float(np.percentile(x, 99)), float(np.percentile(x, 95))]))`) as number[];
    got.forEach((g, i) => assert.ok(Math.abs(g - expected[i]) <= 1e-15 * Math.max(1, Math.abs(expected[i])), `stat ${i}: ${g} vs ${expected[i]}`));
  }
});

test('Python number formatting: .2f ties to even, float repr, json.dumps', () => {
  assert.equal(pyFixed(0.125, 2), '0.12'); // exact tie → even (JS toFixed gives 0.13)
  assert.equal(pyFixed(0.375, 2), '0.38');
  assert.equal(pyFixed(2.675, 2), '2.67'); // binary value below the tie
  assert.equal(pyFixed(1.005, 2), '1.00');
  assert.equal(pyFixed(-0.125, 2), '-0.12');
  assert.equal(pyFixed(2.5, 0), '2');
  assert.equal(pyFixed(3.5, 0), '4');
  assert.equal(pyFixed(1234.5678, 3), '1234.568');
  assert.equal(pyFixed(NaN, 2), 'nan');
  assert.equal(pyFixed(-0, 2), '-0.00');
  assert.equal(pyFloatRepr(64), '64.0');
  assert.equal(pyFloatRepr(Infinity), 'inf');
  assert.equal(pyFloatRepr(2.5), '2.5');
  assert.equal(pyFloatRepr(1e16), '1e+16');
  assert.equal(pyFloatRepr(1e15), '1000000000000000.0');
  assert.equal(pyFloatRepr(0.0001), '0.0001');
  assert.equal(pyFloatRepr(0.00001), '1e-05');
  assert.equal(pyFloatRepr(1.5e-7), '1.5e-07');
  assert.equal(pyFloatRepr(0.1 + 0.2), '0.30000000000000004');
  assert.equal(pyJsonDumps({ a: 1, b: new PyFloat(2), c: [Infinity, NaN, 0.5], d: 'é"\n', e: null }), '{"a": 1, "b": 2.0, "c": [Infinity, NaN, 0.5], "d": "\\u00e9\\"\\n", "e": null}');
  assert.equal(pyJsonDumps('😀'), '"\\ud83d\\ude00"');
  assert.equal(pyCenter(' Serving Benchmark Result ', 50, '='), '============ Serving Benchmark Result ============');
  assert.equal(pyCenter('Time per Output Token (excl. 1st token)', 50, '-'), '-----Time per Output Token (excl. 1st token)------');
  assert.equal(pyStrListRepr(['0.848', '0.808']), "['0.848', '0.808']");
});

test('Python .2f formatting agrees with CPython on many values', { skip: HAS_PY ? false : 'python3 not available' }, () => {
  const r = new PythonRandom(3);
  const xs = [0.005, 0.015, 0.025, 1.125, 10.675, 1e-3, 123456.785, ...Array.from({ length: 200 }, () => Math.round(r.random() * 1e5) / 1000)];
  const got = xs.map((x) => [pyFixed(x, 2), pyFixed(x, 3), pyFloatRepr(x)]);
  const expected = python(`
import json
xs = ${JSON.stringify(xs)}
print(json.dumps([[format(x, '.2f'), format(x, '.3f'), repr(x)] for x in xs]))`);
  assert.deepEqual(got, expected);
});
