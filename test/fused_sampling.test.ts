// The fused native sampler (native/src/fused_sampling.cc through sampleRows) against the TypeScript reference
// (sampler_reference.ts, the oracle), issue 21: for every sampling mode, 10,000 random rows (flat, peaked, quantized
// with ties, masked, huge-range; penalties, logit bias, grammar masks, per-request seeds, n > 1 rows of one prompt)
// give the same token and the same RNG use, logprobs and top logprobs within an f32 ulp or two (1e-12 absolute);
// a chi-square test of the empirical distribution at temperature 1 (and under top-p). Skipped
// (with the reason) when the addon lacks the fused sampler.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Rng } from '../src/common/index.js';
import { installNativeSampling } from '../src/engine/index.js';
import { loadNativeAddon } from '../src/kernels/index.js';
import { applyPenalties, applyVocabMask, normalizeSamplingParams, sampleRows, samplerKernels, setSamplerKernels, type RowSamplingInfo, type SamplingParamsInput } from '../src/sampling/index.js';
import { sampleRowReference } from '../src/sampling/sampler_reference.js';

const addon = loadNativeAddon().addon;
const skip = addon?.fusedSampleRows ? false : 'native addon without the fused sampler';

/** One random row: kinds 0 Gaussian, 1 peaked, 2 quantized (ties), 3 masked ids, 4 huge range, 5 flat (all equal). */
function makeRow(rng: Rng, V: number, kind: number): Float32Array {
  const r = new Float32Array(V);
  for (let i = 0; i < V; i++) {
    const g = rng.nextGaussian();
    r[i] = kind === 0 ? 2 * g : kind === 1 ? 1.5 * g : kind === 2 ? Math.round(g * 2) / 2 : kind === 3 ? (rng.nextFloat() < 0.3 ? -Infinity : 2 * g) : kind === 4 ? 30 * g : 0.25;
  }
  if (kind === 1 || kind === 3) for (let k = 0; k < 5; k++) r[rng.nextInt(V)] = 12 - k;
  return r;
}

const MODES: Record<string, SamplingParamsInput & { top?: number; mask?: boolean; greedyLp?: boolean }> = {
  greedy: { temperature: 0 },
  greedy_logprobs: { temperature: 0, top: 3, greedyLp: true },
  temperature_1: { temperature: 1 },
  temperature_0_7: { temperature: 0.7 },
  temperature_0_05: { temperature: 0.05 },
  temperature_3: { temperature: 3 },
  top_p_0_95: { temperature: 0.8, topP: 0.95 },
  top_p_0_5: { temperature: 1, topP: 0.5 },
  top_k_40: { temperature: 1, topK: 40 },
  top_k_1000: { temperature: 1, topK: 1000 },
  min_p_0_05: { temperature: 0.8, minP: 0.05 },
  combined: { temperature: 1.3, topK: 50, topP: 0.9, minP: 0.02 },
  penalties_bias: { temperature: 0.8, topK: 40, topP: 0.95, minP: 0.05, frequencyPenalty: 0.3, presencePenalty: 0.3, repetitionPenalty: 1.1, logitBias: { '2': 5, '5': -100 } },
  top_logprobs: { temperature: 0.9, topP: 0.9, top: 4 },
  grammar_mask: { temperature: 1, topP: 0.95, mask: true },
};

const ROWS = 10_000;
const BATCH = 50;
const SIZES = [2, 5, 33, 64, 257, 1000, 1500];

/**
 * Same f32, or within an f32 ulp or two, or 1e-12 absolute: lse differs from the reference's by ~1e-14 relative (its exps
 * and sums are not V8's), which moves an f32 logprob across a rounding boundary now and then, and logprobs near 0
 * (a near-certain token: lp ≈ −(sum − 1)) carry that absolute error at full relative weight.
 */
function withinUlp(a: number, b: number): boolean {
  if (Object.is(a, b)) return true;
  return Math.abs(a - b) <= Math.abs(b) * 2 ** -22 + 1e-12;
}

test('fused sampler = sampleRowReference on 10,000 random rows per mode: tokens, RNG use, logprobs (± 1 ulp)', { skip }, () => {
  const saved = samplerKernels();
  try {
    assert.ok(installNativeSampling(undefined, 2));
    assert.ok(samplerKernels()?.fusedRows);
    let notBitEqual = 0;
    let logprobs = 0;
    for (const [name, mode] of Object.entries(MODES)) {
      const gen = new Rng(name.length * 7919 + 11);
      for (let done = 0; done < ROWS; done += BATCH) {
        const V = SIZES[gen.nextInt(SIZES.length)];
        const logits = new Float32Array(BATCH * V);
        const infos: (() => RowSamplingInfo)[] = [];
        for (let b = 0; b < BATCH; b++) {
          // n > 1: every fourth row repeats the previous row's logits under another seed
          const r = b % 4 === 3 ? logits.slice((b - 1) * V, b * V) : makeRow(gen, V, gen.nextInt(6));
          logits.set(r, b * V);
          const seed = gen.nextInt(2 ** 31);
          const counts = new Map<number, number>([[gen.nextInt(V), 1 + gen.nextInt(3)], [gen.nextInt(V), 1]]);
          let mask: Int32Array | null = null;
          if (mode.mask) {
            mask = new Int32Array(Math.ceil(V / 32)).map(() => gen.nextU32() | 0);
            mask[0] |= 1; // at least one allowed id
          }
          const { top, mask: _m, greedyLp, ...sp } = mode;
          const params = normalizeSamplingParams({ ...sp, minNewTokens: 1, logitBias: V > 5 ? sp.logitBias : undefined }, V);
          const numOut = gen.nextInt(2);
          infos.push(() => ({ params, rng: new Rng(seed), outputCounts: counts, numOutputTokens: numOut, stopTokenIds: [1], topLogprobsNum: top ?? 0, needLogprob: greedyLp ?? (mode.temperature !== 0), vocabMask: mask }));
        }
        const a = infos.map((f) => f());
        const c = infos.map((f) => f());
        const want = a.map((info, b) => {
          const s = logits.slice(b * V, (b + 1) * V);
          if (info.vocabMask) {
            // the reference has no grammar step: penalties, then the mask (the sampler's order), then the reference without penalties
            applyPenalties(s, info);
            applyVocabMask(s, info.vocabMask);
            return sampleRowReference(s, { ...info, vocabMask: null, outputCounts: new Map(), params: { ...info.params, logitBias: [], frequencyPenalty: 0, presencePenalty: 0, repetitionPenalty: 1, minNewTokens: 0 } });
          }
          return sampleRowReference(s, info);
        });
        const got = sampleRows(logits.slice(), V, c.map((info, b) => ({ logitIdx: b, info })));
        for (let b = 0; b < BATCH; b++) {
          const what = `${name} V ${V} row ${done + b}`;
          assert.equal(got[b].tokenId, want[b].tokenId, `${what}: token`);
          assert.equal(c[b].rng.nextU32(), a[b].rng.nextU32(), `${what}: RNG use`);
          const pairs: [number, number][] = [[got[b].logprob, want[b].logprob], ...got[b].topLogprobs.map((x, i) => [x[0], want[b].topLogprobs[i]?.[0] ?? NaN] as [number, number])];
          assert.equal(got[b].topLogprobs.length, want[b].topLogprobs.length, what);
          for (const [x, y] of pairs) {
            logprobs++;
            if (!Object.is(x, y)) notBitEqual++;
            assert.ok(withinUlp(x, y), `${what}: logprob ${x} vs ${y}`);
          }
          assert.deepEqual(got[b].topLogprobs.map((x) => x[1]).sort(), want[b].topLogprobs.map((x) => x[1]).sort(), `${what}: top-logprob ids`);
        }
      }
    }
    assert.ok(logprobs > 200_000);
    process.stderr.write(`fused sampler: ${notBitEqual} of ${logprobs} logprobs differ from the reference's f32 in the last bit(s)\n`);
  } finally {
    setSamplerKernels(saved);
  }
});

test('fused sampler: chi-square of 40,000 draws at temperature 1 (whole vocabulary and top-p 0.8) against softmax', { skip }, () => {
  const saved = samplerKernels();
  try {
    assert.ok(installNativeSampling(undefined, 2));
    const V = 24;
    const base = Float32Array.from({ length: V }, (_, i) => Math.sin(i * 1.7) * 2 + (i === 5 ? 1.5 : 0));
    for (const topP of [1, 0.8]) {
      const params = normalizeSamplingParams({ temperature: 1, topP }, V);
      // expected: softmax, then (top-p) the smallest descending prefix whose mass before each kept id is ≤ topP, renormalized
      const mx = Math.max(...base);
      const e = Array.from(base, (x) => Math.exp(x - mx));
      const z = e.reduce((x, y) => x + y, 0);
      const p = e.map((x) => x / z);
      const order = p.map((_, i) => i).sort((x, y) => p[y] - p[x]);
      const keep = new Array<boolean>(V).fill(false);
      let cum = 0;
      for (const i of order) {
        if (cum > topP) break;
        keep[i] = true;
        cum += p[i];
      }
      const kept = p.reduce((s, x, i) => s + (keep[i] ? x : 0), 0);
      const expected = p.map((x, i) => (keep[i] ? x / kept : 0));
      const counts = new Array<number>(V).fill(0);
      const B = 100;
      const N = 40_000;
      let seed = 1;
      for (let n = 0; n < N; n += B) {
        const logits = new Float32Array(B * V);
        for (let b = 0; b < B; b++) logits.set(base, b * V);
        const out = sampleRows(logits, V, Array.from({ length: B }, (_, b) => ({ logitIdx: b, info: { params, rng: new Rng(seed++ * 2654435761), outputCounts: new Map(), numOutputTokens: 0, stopTokenIds: [], topLogprobsNum: 0 } })));
        for (const o of out) counts[o.tokenId]++;
      }
      let chi2 = 0;
      let df = -1;
      for (let i = 0; i < V; i++) {
        if (expected[i] === 0) {
          assert.equal(counts[i], 0, `top-p ${topP}: id ${i} outside the nucleus drawn`);
          continue;
        }
        const ex = expected[i] * N;
        chi2 += (counts[i] - ex) ** 2 / ex;
        df++;
      }
      // 99.9th percentile of chi-square with df degrees of freedom (Wilson–Hilferty, z = 3.09)
      const crit = df * (1 - 2 / (9 * df) + 3.09 * Math.sqrt(2 / (9 * df))) ** 3;
      assert.ok(chi2 < crit, `top-p ${topP}: chi-square ${chi2.toFixed(1)} with ${df} df ≥ ${crit.toFixed(1)}`);
    }
  } finally {
    setSamplerKernels(saved);
  }
});
