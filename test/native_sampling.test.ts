// The native greedy argmax and exp passes of the sampler (native/src/sampling.cc) against the JavaScript loops:
// the same argmax index (ties, NaN, −Infinity); and against Math.exp: bit-identical values
// and index-order sums on rows with every kind of value (in and out of the AVX2 path's range, ±Infinity, NaN, odd
// lengths), and sampleRow with the native passes installed against sampleRowReference. Skipped (with the reason)
// when the addon is not built.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Rng } from '../src/common/index.js';
import { installNativeSampling } from '../src/engine/index.js';
import { loadNativeAddon } from '../src/kernels/index.js';
import { logSoftmax, normalizeSamplingParams, sampleRow, sampleRows, samplerKernels, scoreRow, setSamplerKernels, topLogprobsOf, type RowSamplingInfo, type SamplingParamsInput } from '../src/sampling/index.js';
import { sampleRowReference } from '../src/sampling/sampler_reference.js';

const addon = loadNativeAddon().addon;
const skip = addon?.argmaxF32 && addon.scaleMaxF32 && addon.expShiftSum && addon.expProbs && addon.selectAtLeast ? false : 'native addon (with the sampler passes) unavailable';

function row(rng: Rng, n: number): Float32Array {
  const r = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    const m = rng.nextInt(8);
    r[i] = m === 0 ? (rng.nextFloat() - 0.9) * 60 : m === 1 ? (rng.nextFloat() - 0.5) * 3 : m === 2 ? (rng.nextFloat() - 0.5) * 2000 : m === 3 ? (rng.nextFloat() - 0.5) * 1e-8 : m === 4 ? -Infinity : rng.nextGaussian() * 4;
  }
  return r;
}

test('expShiftSum / expProbs = Math.exp loops, bit for bit', { skip }, () => {
  const rng = new Rng(31);
  for (const n of [0, 1, 3, 4, 5, 17, 1000, 40003]) {
    for (const shift of [0, 3.25, -7.5, 0.1]) {
      const s = row(rng, n);
      if (n > 10) s[7] = NaN;
      const e = new Float64Array(n);
      const sum = addon!.expShiftSum!(s, n, shift, e);
      let want = 0;
      for (let i = 0; i < n; i++) {
        const v = Math.exp(s[i] - shift);
        assert.ok(Object.is(e[i], v), `n ${n} shift ${shift} i ${i}: exp(${s[i] - shift}) ${e[i]} vs ${v}`);
        want += v;
      }
      assert.ok(Object.is(sum, want), `sum ${sum} vs ${want}`);
      const p = new Float32Array(n);
      const total = addon!.expProbs!(s, n, shift, p);
      let wantT = 0;
      for (let i = 0; i < n; i++) {
        const v = Math.fround(Math.exp(Math.fround(s[i] - shift)));
        assert.ok(Object.is(p[i], v), `n ${n} lse ${shift} i ${i}: ${p[i]} vs ${v}`);
        wantT += v;
      }
      assert.ok(Object.is(total, wantT));
    }
  }
  // Subarray views (the sampler passes logits rows of a larger buffer).
  const big = row(rng, 1000);
  const sub = big.subarray(300, 700);
  const e = new Float64Array(400);
  addon!.expShiftSum!(sub, 400, 1, e);
  for (let i = 0; i < 400; i++) assert.ok(Object.is(e[i], Math.exp(big[300 + i] - 1)));
});

test('argmaxF32 = the JavaScript argmax loop (first among equals, NaN skipped, NaN at 0 → 0)', { skip }, () => {
  const rng = new Rng(9);
  const jsArgmax = (s: Float32Array): number => {
    let best = 0;
    for (let i = 1; i < s.length; i++) if (s[i] > s[best]) best = i;
    return best;
  };
  for (let c = 0; c < 3000; c++) {
    const n = rng.nextInt(80);
    const s = new Float32Array(n);
    const mode = rng.nextInt(3);
    for (let i = 0; i < n; i++) {
      const r = rng.nextInt(10);
      s[i] = r === 0 ? NaN : r === 1 ? -Infinity : mode === 0 ? rng.nextInt(4) : rng.nextGaussian();
    }
    assert.equal(addon!.argmaxF32!(s, n), jsArgmax(s), `case ${c}: ${Array.from(s).join(',')}`);
  }
  const big = new Float32Array(200003).map(() => rng.nextGaussian());
  big[150001] = 9;
  big[190000] = 9;
  assert.equal(addon!.argmaxF32!(big.subarray(1), 200002), 150000);
});

test('scaleMaxF32 = Math.fround(s[i] * invT) in place and its max', { skip }, () => {
  const rng = new Rng(13);
  for (const n of [0, 1, 3, 4, 9, 1001]) {
    for (const invT of [1, 1 / 0.7, 1 / 3, 100]) {
      const s = row(rng, n);
      if (n > 5) s[2] = NaN;
      const want = Float32Array.from(s);
      let max = -Infinity;
      for (let i = 0; i < n; i++) {
        want[i] = Math.fround(want[i] * invT);
        if (want[i] > max) max = want[i];
      }
      const got = addon!.scaleMaxF32!(s, n, invT);
      assert.ok(Object.is(got, max) || (got === 0 && max === 0), `max ${got} vs ${max}`);
      for (let i = 0; i < n; i++) assert.ok(Object.is(s[i], want[i]), `i ${i}`);
    }
  }
});

test('selectAtLeast = the ids with E[i] ≥ bound, ascending', { skip }, () => {
  const rng = new Rng(12);
  for (const n of [0, 1, 5, 8, 1001]) {
    const e = new Float64Array(n).map(() => (rng.nextFloat() < 0.05 ? NaN : rng.nextFloat()));
    const ids = new Int32Array(n);
    for (const bound of [0, 0.5, 0.99, 2]) {
      const c = addon!.selectAtLeast!(e, n, bound, ids);
      const want: number[] = [];
      for (let i = 0; i < n; i++) if (e[i] >= bound) want.push(i);
      assert.deepEqual(Array.from(ids.subarray(0, c)), want);
    }
  }
});

test('sampleRow with the native exp passes = sampleRowReference', { skip }, () => {
  assert.equal(installNativeSampling(), true);
  assert.notEqual(samplerKernels(), null);
  try {
    const gen = new Rng(77);
    const params: SamplingParamsInput[] = [{ temperature: 0 }, { temperature: 1 }, { temperature: 0.7, topP: 0.9 }, { temperature: 1, topK: 20 }, { temperature: 0.9, minP: 0.1 }, { temperature: 2, topP: 0.999, topK: 500 }];
    for (const V of [7, 1000, 32000]) {
      for (let k = 0; k < 4; k++) {
        const r = new Float32Array(V);
        for (let i = 0; i < V; i++) r[i] = (k === 3 ? 20 : 2) * gen.nextGaussian();
        if (k === 1) r[gen.nextInt(V)] = 14;
        for (const sp of params) {
          const seed = gen.nextInt(1 << 30);
          const mk = (): RowSamplingInfo => ({ params: normalizeSamplingParams(sp, V), rng: new Rng(seed), outputCounts: new Map(), numOutputTokens: 0, stopTokenIds: [], topLogprobsNum: k === 2 ? 2 : 0, needLogprob: true });
          const a = mk();
          const b = mk();
          const got = sampleRow(Float32Array.from(r), a);
          const want = sampleRowReference(Float32Array.from(r), b);
          assert.equal(got.tokenId, want.tokenId);
          assert.ok(Object.is(got.logprob, want.logprob));
          assert.deepEqual(got.topLogprobs, want.topLogprobs);
          assert.equal(a.rng.nextU32(), b.rng.nextU32());
        }
      }
    }
    // scoreRow (prompt logprobs) = logSoftmax + topLogprobsOf, on ordinary and odd rows.
    for (const r of [Float32Array.from({ length: 5000 }, () => 3 * gen.nextGaussian()), Float32Array.from([NaN, 1, 3]), Float32Array.from([1, NaN, 3]), Float32Array.from([-Infinity, -Infinity])]) {
      for (const topN of [0, 3]) {
        const lp = new Float32Array(r.length);
        logSoftmax(r, lp);
        const tok = r.length - 1;
        const got = scoreRow(r, tok, topN);
        assert.ok(Object.is(got.logprob, lp[tok]), `scoreRow ${got.logprob} vs ${lp[tok]}`);
        assert.deepEqual(got.topLogprobs, topLogprobsOf(lp, topN));
      }
    }
    // Rows with NaN (also at index 0), ±Infinity, all −Infinity.
    const odd = [Float32Array.from([NaN, 1, 3, 0.5]), Float32Array.from([1, NaN, 2, 0.5]), Float32Array.from([1, Infinity, 2, 0.5]), Float32Array.from([-Infinity, -Infinity, -Infinity])];
    for (const r of odd) {
      for (const sp of params) {
        for (const topLogprobsNum of [0, 2]) {
          const mk = (): RowSamplingInfo => ({ params: normalizeSamplingParams(sp, r.length), rng: new Rng(3), outputCounts: new Map(), numOutputTokens: 0, stopTokenIds: [], topLogprobsNum, needLogprob: true });
          const got = sampleRow(Float32Array.from(r), mk());
          const want = sampleRowReference(Float32Array.from(r), mk());
          assert.equal(got.tokenId, want.tokenId);
          assert.ok(Object.is(got.logprob, want.logprob), `${Array.from(r)} ${JSON.stringify(sp)}: ${got.logprob} vs ${want.logprob}`);
          assert.deepEqual(got.topLogprobs, want.topLogprobs);
        }
      }
    }
  } finally {
    setSamplerKernels(null);
  }
});

test('sampleRows (the fused native sampler over threads) = sampleRow row by row: tokens, logprobs, top logprobs, RNG use', { skip: skip || !addon?.fusedSampleRows ? 'native addon without the fused sampler' : false }, () => {
  const saved = samplerKernels();
  try {
    for (const threads of [1, 2, 3]) {
      assert.ok(installNativeSampling(undefined, threads));
      assert.ok(samplerKernels()?.fusedRows);
      const V = 5003;
      const gen = new Rng(101 + threads);
      const settings: SamplingParamsInput[] = [{}, {}, { temperature: 0.7 }, { temperature: 1.3, frequencyPenalty: 0.5, presencePenalty: 0.3, repetitionPenalty: 1.2 }, { temperature: 0 }, { topP: 0.9 }, { topK: 20 }, { minP: 0.05 }, {}, {}];
      const B = 40;
      const logits = new Float32Array(B * V);
      for (let b = 0; b < B; b++) {
        const r = b % 7 === 3 ? row(gen, V) : Float32Array.from({ length: V }, () => gen.nextGaussian() * 3);
        if (b === 11) r[5] = NaN; // a non-finite row: the reference's path
        if (b === 17) r.fill(-Infinity);
        logits.set(r, b * V);
      }
      const infos = (): RowSamplingInfo[] => Array.from({ length: B }, (_, b) => ({
        params: normalizeSamplingParams(settings[b % settings.length], V), rng: new Rng(1000 + b), outputCounts: new Map([[3, 2], [b, 1]]),
        numOutputTokens: 1, stopTokenIds: [7], topLogprobsNum: b % 5 === 0 ? 4 : 0,
      }));
      const a = infos();
      const c = infos();
      const want = a.map((info, b) => sampleRow(logits.slice(b * V, (b + 1) * V), info));
      // rows in a shuffled order of logit rows, as a mixed batch gives them
      const order = Array.from({ length: B }, (_, b) => (b * 17) % B);
      const copy = logits.slice();
      const got = sampleRows(copy, V, order.map((b) => ({ logitIdx: b, info: c[b] })));
      order.forEach((b, j) => {
        assert.equal(got[j].tokenId, want[b].tokenId, `threads ${threads} row ${b}`);
        assert.ok(Object.is(got[j].logprob, want[b].logprob), `row ${b}: logprob ${got[j].logprob} vs ${want[b].logprob}`);
        assert.deepEqual(got[j].topLogprobs, want[b].topLogprobs);
        assert.equal(c[b].rng.nextU32(), a[b].rng.nextU32(), `row ${b}: RNG state`);
      });
    }
  } finally {
    setSamplerKernels(saved);
  }
});
