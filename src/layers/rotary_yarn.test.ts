import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Rng } from '../common/index.js';
import { createCpuOps } from '../kernels/index.js';
import { deepseekRopeParams, deepseekRotaryTable, deepseekSoftmaxScale, yarnCorrectionRange, yarnGetMscale, yarnInvFreq } from './rotary_yarn.js';
import type { YarnScaling } from './rotary_yarn.js';

const V32: YarnScaling = { factor: 40, originalMaxPositionEmbeddings: 4096, betaFast: 32, betaSlow: 1, mscale: 1, mscaleAllDim: 1 };

function close(a: number, b: number, rel: number, what: string): void {
  assert.ok(Math.abs(a - b) <= rel * Math.abs(b), `${what}: ${a} vs ${b}`);
}

test('YaRN correction range and inv_freq of the released DeepSeek-V3.2 config (model-spec §3.4)', () => {
  assert.deepEqual(yarnCorrectionRange(32, 1, 64, 10000, 4096), [10, 23]);
  const inv = yarnInvFreq(64, 10000, V32);
  assert.equal(inv.length, 32);
  close(inv[0], 1.0, 1e-6, 'j=0');
  close(inv[1], 0.749894, 1e-5, 'j=1');
  close(inv[10], 0.0562341, 1e-5, 'j=10');
  close(inv[11], 0.0390069, 1e-5, 'j=11');
  close(inv[23], 3.33380e-5, 1e-5, 'j=23');
  close(inv[31], 3.33380e-6, 1e-5, 'j=31');
  // between low and high the table interpolates: strictly between f/40 and f
  const f15 = Math.pow(10000, -30 / 64);
  assert.ok(inv[15] < f15 && inv[15] > f15 / 40);
});

test('mscale and softmax scale: 0.13523378 for V3.2, cos/sin multiplier 1, no correction without rope_scaling', () => {
  close(yarnGetMscale(40, 1), 0.1 * Math.log(40) + 1, 1e-12, 'mscale');
  assert.equal(yarnGetMscale(1, 1), 1);
  close(deepseekSoftmaxScale(192, V32), 0.13523378, 1e-7, 'softmax scale');
  close(deepseekSoftmaxScale(48, V32), Math.pow(48, -0.5) * Math.pow(0.1 * Math.log(40) + 1, 2), 1e-12, 'tiny scale');
  assert.equal(deepseekSoftmaxScale(192, null), 1 / Math.sqrt(192));
  assert.equal(deepseekRotaryTable(64, 10000, V32).cosSinScale, 1);
  const t = deepseekRotaryTable(64, 10000, { ...V32, mscale: 0.707, mscaleAllDim: 1 });
  close(t.cosSinScale, yarnGetMscale(40, 0.707) / yarnGetMscale(40, 1), 1e-6, 'cos/sin scale');
});

test('DeepSeek rope params: MLA interleaved and indexer NeoX keep norms; q·k depends only on the position gap', () => {
  const ops = createCpuOps();
  const rng = new Rng(3);
  const table = deepseekRotaryTable(16, 10000, V32);
  for (const style of ['interleaved', 'neox'] as const) {
    const params = deepseekRopeParams(table, style);
    assert.equal(params.style, style);
    // one head of width 20 with the rotated slice at offset 4 (like MLA's [nope | rope] q heads)
    const q = Float32Array.from({ length: 20 }, () => rng.nextGaussian());
    const k = Float32Array.from({ length: 20 }, () => rng.nextGaussian());
    const dotAt = (pq: number, pk: number): number => {
      const a = q.slice(), b = k.slice();
      ops.rope(a, 1, Int32Array.of(pq), { numHeads: 1, headDim: 20, offset: 4 }, params);
      ops.rope(b, 1, Int32Array.of(pk), { numHeads: 1, headDim: 20, offset: 4 }, params);
      assert.deepEqual(a.subarray(0, 4), q.subarray(0, 4));
      let d = 0, n = 0, n0 = 0;
      for (let i = 0; i < 20; i++) { d += a[i] * b[i]; n += a[i] * a[i]; n0 += q[i] * q[i]; }
      close(n, n0, 1e-5, `${style} norm`);
      return d;
    };
    close(dotAt(7, 3), dotAt(104, 100), 1e-4, `${style} relative`);
  }
});
