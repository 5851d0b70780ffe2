// sampleRow (sampler.ts: candidate-set sampling with per-id scratch) against sampleRowReference (sampler_reference.ts:
// the straightforward full-vocabulary version): the same token, bit-identical logprob and top logprobs, and the same
// RNG use, over random rows of several shapes and every kind of sampling parameters.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Rng } from '../common/index.js';
import { normalizeSamplingParams, type SamplingParamsInput } from './sampling_params.js';
import { logSoftmax, sampleRow, scoreRow, type RowSamplingInfo } from './sampler.js';
import { topLogprobsOf } from './top_logprobs.js';
import { sampleRowReference } from './sampler_reference.js';

/** Random logits rows: flat, peaked, quantized (ties), with masked (−Infinity) ids, a huge range. */
function makeRow(rng: Rng, V: number, kind: number): Float32Array {
  const r = new Float32Array(V);
  for (let i = 0; i < V; i++) {
    const g = rng.nextGaussian();
    r[i] = kind === 0 ? g : kind === 1 ? 1.5 * g : kind === 2 ? Math.round(g * 2) / 2 : kind === 3 ? (rng.nextFloat() < 0.3 ? -Infinity : 2 * g) : 30 * g;
  }
  if (kind === 1 || kind === 3) for (let k = 0; k < 5; k++) r[rng.nextInt(V)] = 12 - k;
  return r;
}

const PARAMS: SamplingParamsInput[] = [
  { temperature: 1 },
  { temperature: 0.7 },
  { temperature: 0.05 },
  { temperature: 3 },
  { temperature: 0.8, topP: 0.95 },
  { temperature: 1, topP: 0.5 },
  { temperature: 1, topP: 0.999 },
  { temperature: 1, topK: 40 },
  { temperature: 1, topK: 1000 },
  { temperature: 0.8, minP: 0.05 },
  { temperature: 1, minP: 1e-6 },
  { temperature: 1.3, topK: 50, topP: 0.9, minP: 0.02 },
  { temperature: 0.8, topK: 40, topP: 0.95, minP: 0.05, frequencyPenalty: 0.3, presencePenalty: 0.3, repetitionPenalty: 1.1 },
  { temperature: 0 },
];

test('sampleRow = sampleRowReference: token, logprob, top logprobs and RNG use', () => {
  const gen = new Rng(2024);
  let cases = 0;
  for (const V of [8, 300, 5000]) {
    for (let kind = 0; kind < 5; kind++) {
      const row = makeRow(gen, V, kind);
      for (const sp of PARAMS) {
        for (const topLogprobsNum of [0, 3]) {
          for (let rep = 0; rep < 3; rep++) {
            const seed = gen.nextInt(1 << 30);
            const counts = new Map<number, number>([[gen.nextInt(V), 2], [gen.nextInt(V), 1]]);
            const mk = (): RowSamplingInfo => ({
              params: normalizeSamplingParams({ ...sp, minNewTokens: 2 }, V),
              rng: new Rng(seed),
              outputCounts: counts,
              numOutputTokens: rep,
              stopTokenIds: [1],
              topLogprobsNum,
              needLogprob: true,
            });
            const a = mk();
            const b = mk();
            const got = sampleRow(Float32Array.from(row), a);
            const want = sampleRowReference(Float32Array.from(row), b);
            const what = `V ${V} kind ${kind} ${JSON.stringify(sp)} top ${topLogprobsNum} seed ${seed}`;
            assert.equal(got.tokenId, want.tokenId, what);
            assert.ok(Object.is(got.logprob, want.logprob), `${what}: logprob ${got.logprob} vs ${want.logprob}`);
            assert.deepEqual(got.topLogprobs, want.topLogprobs, what);
            assert.equal(a.rng.nextU32(), b.rng.nextU32(), `${what}: RNG use`);
            cases++;
          }
        }
      }
    }
  }
  assert.ok(cases > 1000);
});

test('sampleRow = sampleRowReference on rows with NaN / +Infinity / all −Infinity', () => {
  const rows = [
    Float32Array.from([1, NaN, 2, 0.5]),
    Float32Array.from([1, Infinity, 2, 0.5]),
    Float32Array.from([-Infinity, -Infinity, -Infinity]),
  ];
  for (const row of rows) {
    for (const sp of PARAMS) {
      const mk = (): RowSamplingInfo => ({ params: normalizeSamplingParams(sp, row.length), rng: new Rng(5), outputCounts: new Map(), numOutputTokens: 0, stopTokenIds: [], topLogprobsNum: 2 });
      const got = sampleRow(Float32Array.from(row), mk());
      const want = sampleRowReference(Float32Array.from(row), mk());
      assert.equal(got.tokenId, want.tokenId);
      assert.ok(Object.is(got.logprob, want.logprob));
      assert.deepEqual(got.topLogprobs, want.topLogprobs);
    }
  }
});

test('scoreRow = logSoftmax + topLogprobsOf (JavaScript path)', () => {
  const gen = new Rng(4);
  for (const r of [Float32Array.from({ length: 3000 }, () => 2 * gen.nextGaussian()), Float32Array.from([NaN, 1, 3]), Float32Array.from([-Infinity, -Infinity])]) {
    for (const topN of [0, 4]) {
      const lp = new Float32Array(r.length);
      logSoftmax(r, lp);
      const got = scoreRow(r, 1, topN);
      assert.ok(Object.is(got.logprob, lp[1]));
      assert.deepEqual(got.topLogprobs, topLogprobsOf(lp, topN));
    }
  }
});
