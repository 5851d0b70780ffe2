import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Rng } from '../common/index.js';
import {
  applyRotaryPairs, deepseekRotaryTable, deepseekSoftmaxScale, rotaryCosSin, yarnCorrectionRange, yarnGetMscale, yarnInvFreq,
} from './rotary_yarn.js';
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

test('interleaved rotates pairs (2j, 2j+1), neox rotates pairs (j, j+d/2), only inside [offset, offset+d)', () => {
  const table = deepseekRotaryTable(4, 10000, null); // invFreq = [1, 0.01]
  const { cos, sin } = rotaryCosSin(table, Int32Array.of(1));
  const x0 = Float32Array.of(9, 1, 2, 3, 4, 9);
  const inter = x0.slice();
  applyRotaryPairs(inter, 1, 1, 6, 1, 4, cos, sin, 'interleaved');
  const c0 = Math.cos(1), s0 = Math.sin(1), c1 = Math.cos(0.01), s1 = Math.sin(0.01);
  const expI = [9, 1 * c0 - 2 * s0, 2 * c0 + 1 * s0, 3 * c1 - 4 * s1, 4 * c1 + 3 * s1, 9];
  expI.forEach((v, i) => close(inter[i] + 10, v + 10, 1e-6, `interleaved[${i}]`));
  const neox = x0.slice();
  applyRotaryPairs(neox, 1, 1, 6, 1, 4, cos, sin, 'neox');
  const expN = [9, 1 * c0 - 3 * s0, 2 * c1 - 4 * s1, 3 * c0 + 1 * s0, 4 * c1 + 2 * s1, 9];
  expN.forEach((v, i) => close(neox[i] + 10, v + 10, 1e-6, `neox[${i}]`));
});

test('both layouts keep norms and make q·k depend only on the position difference', () => {
  const rng = new Rng(3);
  const table = deepseekRotaryTable(16, 10000, { ...V32, mscale: 1, mscaleAllDim: 1 });
  for (const style of ['interleaved', 'neox'] as const) {
    const q = Float32Array.from({ length: 16 }, () => rng.nextGaussian());
    const k = Float32Array.from({ length: 16 }, () => rng.nextGaussian());
    const dotAt = (pq: number, pk: number): number => {
      const a = q.slice(), b = k.slice();
      const cq = rotaryCosSin(table, Int32Array.of(pq)), ck = rotaryCosSin(table, Int32Array.of(pk));
      applyRotaryPairs(a, 1, 1, 16, 0, 16, cq.cos, cq.sin, style);
      applyRotaryPairs(b, 1, 1, 16, 0, 16, ck.cos, ck.sin, style);
      let n = 0, d = 0, n0 = 0;
      for (let i = 0; i < 16; i++) { d += a[i] * b[i]; n += a[i] * a[i]; n0 += q[i] * q[i]; }
      close(n, n0, 1e-5, `${style} norm`);
      return d;
    };
    close(dotAt(7, 3), dotAt(104, 100), 1e-4, `${style} relative`);
  }
});
