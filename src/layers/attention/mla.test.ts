import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Rng } from '../../common/index.js';
import { createCpuOps, createOps, nativeBackendAvailable } from '../../kernels/index.js';
import type { Ops } from '../../kernels/index.js';
import { mlaAbsorbOutput, mlaAbsorbOutputOps, mlaAbsorbQuery, mlaAbsorbQueryOps, mlaExpandKv, mlaExpandedAttention, mlaLatentWidth, prepareMlaAbsorbWeights } from './mla_math.js';
import type { MlaDims } from './mla_math.js';

const D: MlaDims = { numHeads: 3, qkNopeHeadDim: 8, qkRopeHeadDim: 4, vHeadDim: 6, kvLoraRank: 10 };

function setup(seed: number, numLocs: number) {
  const rng = new Rng(seed);
  const g = (n: number, s = 1) => Float32Array.from({ length: n }, () => rng.nextGaussian() * s);
  const q = g(D.numHeads * (D.qkNopeHeadDim + D.qkRopeHeadDim));
  const wKvB = g(D.numHeads * (D.qkNopeHeadDim + D.vHeadDim) * D.kvLoraRank, 0.3);
  const latent = g(numLocs * mlaLatentWidth(D));
  return { q, wKvB, latent };
}

test('absorbed (Ops.attention MQA over latent rows) and expanded MLA agree (1e-5) on a selected key subset', () => {
  const numLocs = 40;
  const { q, wKvB, latent } = setup(1, numLocs);
  const { numHeads: H, qkRopeHeadDim: dr, vHeadDim: dv, kvLoraRank: r } = D;
  const numKeys = 30;
  const keyLocs = Int32Array.from({ length: numKeys }, (_, t) => (t * 7 + 3) % numLocs);
  const selected = Int32Array.from([0, 2, 3, 9, 17, 29]);
  const scale = 0.3;
  const ops = createCpuOps();
  const qMqa = mlaAbsorbQuery(q, 1, wKvB, D);
  const batch = {
    numReqs: 1, extendStartLoc: Int32Array.of(0), extendSeqLens: Int32Array.of(1), extendPrefixLens: Int32Array.of(numKeys - 1),
    reqPoolIndices: Int32Array.of(0), reqToToken: keyLocs, reqToTokenStride: numKeys,
  };
  const latentOut = ops.attention(qMqa, 1, {
    numHeads: H, numKvHeads: 1, headDim: r + dr, vHeadDim: r, scale,
    kBuf: latent, kRowWidth: r + dr, kOffset: 0, vBuf: latent, vRowWidth: r + dr, vOffset: 0,
  }, batch, { indices: selected, width: selected.length });
  const outA = mlaAbsorbOutput(latentOut, 1, wKvB, D);
  const kv = new Float32Array(numKeys * H * (D.qkNopeHeadDim + dv));
  mlaExpandKv(latent, keyLocs, numKeys, wKvB, D, kv);
  const outE = new Float32Array(H * dv);
  mlaExpandedAttention(q, 0, kv, latent, keyLocs, selected, selected.length, scale, D, outE, 0, new Float32Array(64));
  let maxDiff = 0;
  for (let i = 0; i < outA.length; i++) maxDiff = Math.max(maxDiff, Math.abs(outA[i] - outE[i]));
  assert.ok(maxDiff < 1e-5, `max diff ${maxDiff}`);
  assert.ok(outA.some((v) => Math.abs(v) > 0.1));
});

test('expanded MLA equals a naive per-head softmax attention written from the spec', () => {
  const numLocs = 12;
  const { q, wKvB, latent } = setup(2, numLocs);
  const { numHeads: H, qkNopeHeadDim: dn, qkRopeHeadDim: dr, vHeadDim: dv, kvLoraRank: r } = D;
  const keyLocs = Int32Array.from({ length: numLocs }, (_, t) => numLocs - 1 - t);
  const selected = Int32Array.from([1, 4, 5, 11]);
  const kv = new Float32Array(numLocs * H * (dn + dv));
  mlaExpandKv(latent, keyLocs, numLocs, wKvB, D, kv);
  const out = new Float32Array(H * dv);
  mlaExpandedAttention(q, 0, kv, latent, keyLocs, selected, selected.length, 0.5, D, out, 0, new Float32Array(16));
  for (let h = 0; h < H; h++) {
    const scores = [...selected].map((t) => {
      const c = latent.subarray(keyLocs[t] * (r + dr), keyLocs[t] * (r + dr) + r);
      let s = 0;
      for (let i = 0; i < dn; i++) {
        let kn = 0;
        for (let j = 0; j < r; j++) kn += c[j] * wKvB[(h * (dn + dv) + i) * r + j];
        s += q[h * (dn + dr) + i] * kn;
      }
      for (let i = 0; i < dr; i++) s += q[h * (dn + dr) + dn + i] * latent[keyLocs[t] * (r + dr) + r + i];
      return 0.5 * s;
    });
    const m = Math.max(...scores);
    const p = scores.map((s) => Math.exp(s - m));
    const z = p.reduce((a, b) => a + b, 0);
    for (let v = 0; v < dv; v++) {
      let o = 0;
      [...selected].forEach((t, j) => {
        let vv = 0;
        for (let k = 0; k < r; k++) vv += latent[keyLocs[t] * (r + dr) + k] * wKvB[(h * (dn + dv) + dn + v) * r + k];
        o += (p[j] / z) * vv;
      });
      assert.ok(Math.abs(out[h * dv + v] - o) < 1e-5);
    }
  }
});

const backends: [string, () => Ops][] = [['cpu-ref', createCpuOps]];
if (nativeBackendAvailable()) backends.push(['native', () => createOps({ backend: 'native', threads: 2 })]);
for (const [name, makeOps] of backends) {
  test(`[${name}] absorb through ops.matmul on per-head kv_b_proj weights equals the loop form (1e-5); a row alone == in a batch`, () => {
    const rng = new Rng(7);
    const { numHeads: H, qkNopeHeadDim: dn, qkRopeHeadDim: dr, vHeadDim: dv, kvLoraRank: r } = D;
    const T = 5;
    const g = (n: number, s = 1) => Float32Array.from({ length: n }, () => rng.nextGaussian() * s);
    const q = g(T * H * (dn + dr));
    const wKvB = g(H * (dn + dv) * r, 0.3);
    const latentOut = g(T * H * r);
    const ops = makeOps();
    const w = prepareMlaAbsorbWeights(ops, wKvB, D);
    const pairs: [Float32Array, Float32Array][] = [
      [mlaAbsorbQueryOps(ops, q, T, w, D), mlaAbsorbQuery(q, T, wKvB, D)],
      [mlaAbsorbOutputOps(ops, latentOut, T, w, D), mlaAbsorbOutput(latentOut, T, wKvB, D)],
    ];
    for (const [a, b] of pairs) {
      assert.equal(a.length, b.length);
      for (let i = 0; i < a.length; i++) assert.ok(Math.abs(a[i] - b[i]) <= 1e-5 * (1 + Math.abs(b[i])), `${i}: ${a[i]} vs ${b[i]}`);
    }
    const t = 3;
    const qRow = q.subarray(t * H * (dn + dr), (t + 1) * H * (dn + dr));
    assert.deepEqual(mlaAbsorbQueryOps(ops, qRow, 1, w, D), pairs[0][0].subarray(t * H * (r + dr), (t + 1) * H * (r + dr)));
    const lRow = latentOut.subarray(t * H * r, (t + 1) * H * r);
    assert.deepEqual(mlaAbsorbOutputOps(ops, lRow, 1, w, D), pairs[1][0].subarray(t * H * dv, (t + 1) * H * dv));
    assert.throws(() => prepareMlaAbsorbWeights(ops, wKvB.subarray(1), D), /kv_b_proj/);
  });
}
