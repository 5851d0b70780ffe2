// The native backend against the TypeScript reference: A's conformance suite (src/kernels/ops.case.ts), a method
// coverage check of both backends, every op on random inputs (odd sizes, partial FP8 blocks, batch 1..64) within
// stated tolerances, and bit-exact batch / thread-count invariance. Skipped (with the reason) when the addon is not
// built, unless TSGLANG_REQUIRE_NATIVE=1.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Rng, f32ToBf16, f32ToFp8E4m3 } from '../src/common/index.js';
import { CpuOps, createOps, loadNativeAddon } from '../src/kernels/index.js';
import type { AttentionBatch, AttentionParams, ExpertWeights, Ops, StoredTensor, Weight } from '../src/kernels/index.js';
import { runOpsConformance } from '../src/kernels/ops.case.js';
import { randomAttentionBatch } from './helpers/attention_batch.js';

/** Every method of the Ops interface; the type checks below fail to compile if Ops gains or loses one. */
const OPS_METHODS = ['prepareWeight', 'allocateWeightBytes', 'allocateKvBuffer', 'matmul', 'embedding', 'rmsNorm', 'layerNorm', 'rope', 'softmax', 'add', 'sigmoid', 'siluAndMul', 'topk', 'attention', 'fusedMoe', 'groupedMatmul', 'indexerTopK'] as const;
type Listed = (typeof OPS_METHODS)[number];
type OpsMethod = { [K in keyof Ops]: Ops[K] extends (...args: never[]) => unknown ? K : never }[keyof Ops];
const everyMethodListed: [Exclude<OpsMethod, Listed>] extends [never] ? true : false = true;
const onlyMethodsListed: [Exclude<Listed, OpsMethod>] extends [never] ? true : false = true;

const status = loadNativeAddon();
const required = process.env.TSGLANG_REQUIRE_NATIVE === '1';
const skip = status.addon ? false : `native addon unavailable: ${status.reason}`;

test('TSGLANG_REQUIRE_NATIVE=1 → the addon must load', { skip: !required }, () => {
  assert.equal(status.reason, null);
});

const ref = new CpuOps();
const nat: Ops | null = status.addon ? createOps({ backend: 'native', threads: 1 }) : null;
const nat2: Ops | null = status.addon ? createOps({ backend: 'native', threads: 2 }) : null;

test('both backends implement every Ops method', { skip }, () => {
  assert.ok(everyMethodListed && onlyMethodsListed);
  for (const ops of [ref, nat!]) {
    for (const m of OPS_METHODS) assert.equal(typeof (ops as unknown as Record<string, unknown>)[m], 'function', `${ops.name} lacks ${m}`);
    assert.equal(typeof ops.name, 'string');
  }
  // the check itself fails on an object without a method
  const partial = { ...Object.fromEntries(OPS_METHODS.map((m) => [m, () => 0])), matmul: undefined };
  assert.ok(OPS_METHODS.some((m) => typeof (partial as Record<string, unknown>)[m] !== 'function'));
});

if (nat) runOpsConformance('native', () => nat, { tol: 1e-6 });

function randn(rng: Rng, n: number, scale = 1): Float32Array {
  const a = new Float32Array(n);
  for (let i = 0; i < n; i++) a[i] = rng.nextGaussian() * scale;
  return a;
}

/** |a − b| ≤ rtol·bound + atol elementwise, where bound is a per-element magnitude (e.g. Σ|x||w| of a dot). */
function closeTo(a: ArrayLike<number>, b: ArrayLike<number>, bound: ArrayLike<number> | number, rtol: number, what: string, atol = 0): void {
  assert.equal(a.length, b.length, `${what}: length`);
  for (let i = 0; i < b.length; i++) {
    const m = typeof bound === 'number' ? bound : bound[i];
    const lim = rtol * Math.max(m, Math.abs(b[i])) + atol;
    if (!(Math.abs(a[i] - b[i]) <= lim) && !(Number.isNaN(a[i]) && Number.isNaN(b[i]))) {
      assert.fail(`${what}[${i}]: native ${a[i]} vs reference ${b[i]} (limit ${lim})`);
    }
  }
}

/** A random [n, k] checkpoint tensor of the given stored dtype (FP8 with block scales of `block`). */
function storedTensor(rng: Rng, dtype: 'f32' | 'bf16' | 'f16' | 'f8_e4m3', n: number, k: number, block: [number, number] = [128, 128]): StoredTensor {
  const vals = randn(rng, n * k, 0.5);
  if (dtype === 'f32') return { name: 'w', dtype, shape: [n, k], bytes: new Uint8Array(vals.buffer) };
  if (dtype === 'bf16') return { name: 'w', dtype, shape: [n, k], bytes: new Uint8Array(Uint16Array.from(vals, (v) => f32ToBf16(v)).buffer) };
  if (dtype === 'f16') {
    const h = new Uint16Array(n * k);
    const dv = new DataView(new ArrayBuffer(4));
    for (let i = 0; i < h.length; i++) {
      // f32 → f16 by truncation of a value in f16 normal range (exactness is all we need: both backends read the same bits)
      dv.setFloat32(0, vals[i]);
      const b = dv.getUint32(0);
      const e = ((b >>> 23) & 0xff) - 127 + 15;
      h[i] = e <= 0 ? (b >>> 16) & 0x8000 : ((b >>> 16) & 0x8000) | (Math.min(e, 30) << 10) | ((b >>> 13) & 0x3ff);
    }
    return { name: 'w', dtype, shape: [n, k], bytes: new Uint8Array(h.buffer) };
  }
  const codes = new Uint8Array(n * k);
  for (let i = 0; i < codes.length; i++) codes[i] = f32ToFp8E4m3(rng.nextGaussian() * 40);
  const sRows = Math.ceil(n / block[0]);
  const sCols = Math.ceil(k / block[1]);
  const scale = { data: Float32Array.from({ length: sRows * sCols }, () => 2 ** -8 * (0.5 + rng.nextFloat())), shape: [sRows, sCols] as [number, number], blockSize: block };
  return { name: 'w', dtype, shape: [n, k], bytes: codes, scale };
}

function absArr(a: Float32Array): Float32Array {
  return a.map(Math.abs);
}

const FORMATS = ['f32', 'bf16', 'f16', 'f8_e4m3'] as const;

test('matmul: every stored format, odd sizes, partial FP8 blocks, M 1..64 vs the reference (rtol 2e-6 of Σ|x·w|)', { skip }, () => {
  const rng = new Rng(11);
  for (const fmt of FORMATS) {
    for (const [n, k, block] of [[131, 261, [128, 128]], [7, 9, [128, 128]], [260, 136, [128, 128]], [37, 45, [16, 24]]] as [number, number, [number, number]][]) {
      const st = storedTensor(rng, fmt, n, k, block);
      const wn = nat!.prepareWeight(st);
      const wr = ref.prepareWeight(st);
      if (fmt === 'f8_e4m3') assert.equal(wn.format, 'fp8_block', 'native keeps FP8 codes');
      if (fmt === 'bf16') assert.equal(wn.format, 'bf16', 'native keeps BF16');
      const wAbs: Weight = { format: 'f32', shape: [n, k], data: absArr(wr.data as Float32Array) };
      for (const m of [1, 2, 3, 4, 7, 64]) {
        const x = randn(rng, m * k);
        const got = nat!.matmul(x, m, wn);
        const want = ref.matmul(x, m, wr);
        const bound = ref.matmul(absArr(x), m, wAbs);
        closeTo(got, want, bound, 2e-6, `${fmt} [${n},${k}] block ${block} M=${m}`);
        // the native kernel sees exactly the dequantized values (an f32 copy of them gives identical bits), except
        // FP8, which scales x instead (x·scale·2^64 times fp8·2^-120, native/src/common.h)
        if (fmt !== 'f8_e4m3') {
          assert.deepEqual(nat!.matmul(x, m, { format: 'f32', shape: [n, k], data: wr.data as Float32Array }), got, `${fmt} M=${m}: stored == dequantized f32`);
        }
      }
    }
  }
});

test('matmul: a row alone == the same row in batches of 1..64, and 1 thread == 2 threads (bit-exact)', { skip }, () => {
  const rng = new Rng(12);
  // [203, 300]: partial register tiles and k tail; [50, 1100]: several k blocks of the blocked GEMM (accumulators
  // carried between blocks) plus a k tail and a partial FP8 block
  for (const [n, k] of [[203, 300], [50, 1100]]) {
    for (const fmt of FORMATS) {
      const st = storedTensor(rng, fmt, n, k);
      const w = nat!.prepareWeight(st);
      const x = randn(rng, 64 * k);
      const all = nat!.matmul(x, 64, w);
      assert.deepEqual(nat2!.matmul(x, 64, w), all, `${fmt} [${n},${k}]: threads 2 vs 1`);
      for (const m of [1, 2, 3, 5, 8, 13, 33]) {
        const part = nat!.matmul(x, m, w);
        assert.deepEqual(part, all.subarray(0, m * n), `${fmt} [${n},${k}]: first ${m} rows`);
        assert.deepEqual(nat2!.matmul(x, m, w), part, `${fmt} [${n},${k}]: M=${m} threads 2`);
      }
      for (const r of [0, 31, 63]) assert.deepEqual(nat!.matmul(x.subarray(r * k, (r + 1) * k), 1, w), all.subarray(r * n, (r + 1) * n), `${fmt} [${n},${k}]: row ${r}`);
    }
  }
});

test('matmul FP8 at large M: rows == the same rows alone, 1 thread == 2 threads (x scaled by the first panel, several chunks per scale row-block)', { skip }, () => {
  const rng = new Rng(13);
  // K 1800: several chunks (whole 3-row panels) per 128-row scale block, each scaling x in its first panel, two k
  // blocks; M 600: partial x tiles at the thread split; N 140: a partial row block; and a block shape whose k blocks
  // (40) are no multiple of 8
  for (const [n, k, block] of [[140, 1800, [128, 128]], [96, 1000, [32, 40]]] as [number, number, [number, number]][]) {
    const w = nat!.prepareWeight(storedTensor(rng, 'f8_e4m3', n, k, block));
    const m = 600;
    const x = randn(rng, m * k);
    const all = nat!.matmul(x, m, w);
    assert.deepEqual(nat2!.matmul(x, m, w), all, `[${n},${k}] M=${m}: threads 2 vs 1`);
    for (const r of [0, 1, 255, 599]) assert.deepEqual(nat!.matmul(x.subarray(r * k, (r + 1) * k), 1, w), all.subarray(r * n, (r + 1) * n), `[${n},${k}] row ${r}`);
    assert.deepEqual(nat!.matmul(x.subarray(300 * k), 300, w), all.subarray(300 * n), `[${n},${k}] rows 300.. alone`);
  }
});

test('embedding: every stored format equals the reference exactly', { skip }, () => {
  const rng = new Rng(13);
  for (const fmt of FORMATS) {
    const st = storedTensor(rng, fmt, 150, 77);
    const ids = Int32Array.of(0, 149, 128, 3, 3);
    assert.deepEqual(nat!.embedding(ids, nat!.prepareWeight(st)), ref.embedding(ids, ref.prepareWeight(st)), fmt);
  }
  assert.throws(() => nat!.embedding(Int32Array.of(150), nat!.prepareWeight(storedTensor(rng, 'bf16', 150, 8))), /outside/);
});

test('rmsNorm, layerNorm, softmax, add, sigmoid, siluAndMul: random rows vs the reference', { skip }, () => {
  const rng = new Rng(14);
  for (const [rows, width] of [[1, 1], [3, 7], [17, 129], [64, 1000]]) {
    const x = randn(rng, rows * (width + 3), 3);
    const w = randn(rng, width);
    const b = randn(rng, width);
    closeTo(nat!.rmsNorm(x, rows, width, w, 1e-6), ref.rmsNorm(x, rows, width, w, 1e-6), 0, 1e-6, 'rmsNorm', 1e-30);
    closeTo(nat!.rmsNorm(x, rows, width, w, 1e-5, undefined, width + 3), ref.rmsNorm(x, rows, width, w, 1e-5, undefined, width + 3), 0, 1e-6, 'rmsNorm stride', 1e-30);
    closeTo(nat!.layerNorm(x, rows, width, w, b, 1e-5), ref.layerNorm(x, rows, width, w, b, 1e-5), 0, 1e-6, 'layerNorm', 1e-6);
    closeTo(nat!.softmax(x, rows, width), ref.softmax(x, rows, width), 0, 2e-6, 'softmax', 1e-37);
    const n = rows * width;
    const y = randn(rng, n, 4);
    assert.deepEqual(nat!.add(x.subarray(0, n), y), ref.add(x.subarray(0, n), y), 'add');
    closeTo(nat!.sigmoid(y), ref.sigmoid(y), 0, 2e-6, 'sigmoid', 1e-37);
    closeTo(nat!.siluAndMul(y, x.subarray(0, n)), ref.siluAndMul(y, x.subarray(0, n)), 0, 2e-6, 'siluAndMul', 1e-30);
  }
  // extremes: exp under/overflow, in-place softmax
  const ext = Float32Array.of(-1000, -90, -87, 0, 80, 88, 89, 1000, -Infinity);
  closeTo(nat!.sigmoid(ext), ref.sigmoid(ext), 0, 2e-6, 'sigmoid extremes', 1e-37);
  const sm = Float32Array.of(-Infinity, 0, 1, -200);
  const want = ref.softmax(sm, 1, 4);
  closeTo(nat!.softmax(sm, 1, 4, sm), want, 0, 2e-6, 'softmax in place', 1e-37);
});

test('rope: neox and interleaved, partial, offset, rowStride, mscale, large positions vs the reference', { skip }, () => {
  const rng = new Rng(15);
  for (const style of ['neox', 'interleaved'] as const) {
    const target = { numHeads: 3, headDim: 24, rowStride: 80, offset: 8 };
    const invFreq = Float32Array.from({ length: 8 }, (_, i) => 1 / 10000 ** (i / 8));
    const positions = Int32Array.of(0, 1, 17, 4095, 163839);
    const a = randn(rng, 5 * 80);
    const b = a.slice();
    nat!.rope(a, 5, positions, target, { invFreq, rotaryDim: 16, style, mscale: 1.25 });
    ref.rope(b, 5, positions, target, { invFreq, rotaryDim: 16, style, mscale: 1.25 });
    closeTo(a, b, 0, 1e-6, `rope ${style}`, 1e-7);
  }
});

test('topk: random rows, ties and NaN: same indices and values as the reference', { skip }, () => {
  const rng = new Rng(16);
  for (const [rows, width, k] of [[5, 256, 8], [3, 1000, 37], [2, 9, 9], [1, 3000, 2048]]) {
    const x = Float32Array.from({ length: rows * width }, () => Math.round(rng.nextGaussian() * 20) / 4);
    x[3] = NaN;
    const a = nat!.topk(x, rows, width, k);
    const b = ref.topk(x, rows, width, k);
    assert.deepEqual(a.indices, b.indices, `topk [${rows},${width}] k=${k}`);
    assert.deepEqual(a.values, b.values);
  }
});

function subBatch(b: AttentionBatch, i: number): AttentionBatch {
  return { ...b, numReqs: 1, extendStartLoc: Int32Array.of(0), extendSeqLens: b.extendSeqLens.subarray(i, i + 1), extendPrefixLens: b.extendPrefixLens.subarray(i, i + 1), reqPoolIndices: b.reqPoolIndices.subarray(i, i + 1) };
}

test('attention: GQA / MLA-style shared buffer / sparse keys vs the reference, and per-request batch invariance', { skip }, () => {
  const rng = new Rng(17);
  const numLocs = 300;
  // GQA: 6 q heads over 2 kv heads, odd head dims
  const gqa = (hd: number, vhd: number): AttentionParams => {
    const kBuf = randn(rng, numLocs * 2 * hd);
    const vBuf = randn(rng, numLocs * 2 * vhd);
    return { numHeads: 6, numKvHeads: 2, headDim: hd, vHeadDim: vhd, scale: 1 / Math.sqrt(hd), kBuf, kRowWidth: 2 * hd, kOffset: 0, vBuf, vRowWidth: 2 * vhd, vOffset: 0 };
  };
  // MLA absorbed: one kv head, K = [latent 40 | rope 8] and V = latent inside one 48-wide row
  const kv = randn(rng, numLocs * 48);
  const mla: AttentionParams = { numHeads: 5, numKvHeads: 1, headDim: 48, vHeadDim: 40, scale: 0.3, kBuf: kv, kRowWidth: 48, kOffset: 0, vBuf: kv, vRowWidth: 48, vOffset: 0 };
  const { batch, numTokens } = randomAttentionBatch(rng, [0, 5, 40, 0], [7, 1, 3, 1], numLocs, 3);
  for (const [name, p] of [['gqa 13/11', gqa(13, 11)], ['gqa 64/64', gqa(64, 64)], ['mla', mla]] as [string, AttentionParams][]) {
    const q = randn(rng, numTokens * p.numHeads * p.headDim);
    const got = nat!.attention(q, numTokens, p, batch);
    closeTo(got, ref.attention(q, numTokens, p, batch), 0, 2e-5, name, 2e-5);
    assert.deepEqual(nat2!.attention(q, numTokens, p, batch), got, `${name}: threads 2`);
    let row = 0;
    for (let i = 0; i < batch.numReqs; i++) {
      const len = batch.extendSeqLens[i];
      const w = p.numHeads * p.headDim;
      const alone = nat!.attention(q.subarray(row * w, (row + len) * w), len, p, subBatch(batch, i));
      assert.deepEqual(alone, got.subarray(row * p.numHeads * p.vHeadDim, (row + len) * p.numHeads * p.vHeadDim), `${name}: req ${i} alone`);
      row += len;
    }
    // sparse: unsorted picks with -1 padding and picks beyond the causal limit
    const width = 6;
    const idx = new Int32Array(numTokens * width);
    for (let i = 0; i < idx.length; i++) idx[i] = rng.nextFloat() < 0.2 ? -1 : Math.floor(rng.nextFloat() * 50);
    closeTo(nat!.attention(q, numTokens, p, batch, { indices: idx, width }), ref.attention(q, numTokens, p, batch, { indices: idx, width }), 0, 2e-5, `${name} sparse`, 2e-5);
  }
  // a loc outside the K/V buffers is an error, not a crash
  const bad = { ...batch, reqToToken: batch.reqToToken.map((v) => (v === 0 ? 0 : v + 10 * numLocs)) };
  const p = gqa(8, 8);
  assert.throws(() => nat!.attention(randn(rng, numTokens * 6 * 8), numTokens, p, bad), /outside the K\/V buffers/);
});

test('fusedMoe: FP8 / BF16 experts with partial blocks, skipped ids and absent experts vs the reference; per-token invariance', { skip }, () => {
  const rng = new Rng(18);
  const D = 136;
  const I = 72;
  const mk = (i: number): ExpertWeights | null => {
    if (i === 2) return null;
    const dt = i % 2 === 0 ? 'f8_e4m3' : 'bf16';
    return { gate: nat!.prepareWeight(storedTensor(rng, dt, I, D)), up: nat!.prepareWeight(storedTensor(rng, dt, I, D)), down: nat!.prepareWeight(storedTensor(rng, dt, D, I)) };
  };
  const expN = Array.from({ length: 6 }, (_, i) => mk(i));
  const toRef = (w: Weight): Weight => ({ format: 'f32', shape: w.shape, data: ref.prepareWeight({ name: 'w', dtype: 'f32', shape: w.shape, bytes: new Uint8Array(weightF32(w).buffer) }).data as Float32Array });
  const expR = expN.map((e) => (e ? { gate: toRef(e.gate), up: toRef(e.up), down: toRef(e.down) } : null));
  const T = 33;
  const topK = 3;
  const x = randn(rng, T * D);
  const ids = Int32Array.from({ length: T * topK }, () => (rng.nextFloat() < 0.1 ? -1 : Math.floor(rng.nextFloat() * 6)));
  const tw = Float32Array.from({ length: T * topK }, () => rng.nextFloat());
  const got = nat!.fusedMoe(x, T, D, expN, ids, tw, topK);
  const want = ref.fusedMoe(x, T, D, expR, ids, tw, topK);
  // outputs are sums of O(100) terms that cancel: compare against the output scale
  const scale = want.reduce((m, v) => Math.max(m, Math.abs(v)), 0);
  closeTo(got, want, scale, 2e-6, 'fusedMoe');
  assert.deepEqual(nat2!.fusedMoe(x, T, D, expN, ids, tw, topK), got, 'threads 2');
  for (const t of [0, 16, 32]) {
    const alone = nat!.fusedMoe(x.subarray(t * D, (t + 1) * D), 1, D, expN, ids.subarray(t * topK, (t + 1) * topK), tw.subarray(t * topK, (t + 1) * topK), topK);
    assert.deepEqual(alone, got.subarray(t * D, (t + 1) * D), `token ${t} alone`);
  }
  assert.throws(() => nat!.fusedMoe(x, 1, D, expN, Int32Array.of(6, 0, 1), tw, topK), /expert id 6/);
});

test('groupedMatmul: every stored format, strided layouts, M 1..64 vs the reference; == matmul per group; batch and thread invariant', { skip }, () => {
  const rng = new Rng(19);
  for (const fmt of FORMATS) {
    for (const [groups, n, k, block] of [[4, 33, 45, [128, 128]], [16, 64, 64, [1, 64]], [3, 40, 130, [16, 128]]] as [number, number, number, [number, number]][]) {
      const st = storedTensor(rng, fmt, groups * n, k, block);
      const wn = nat!.prepareWeight(st);
      const wr = ref.prepareWeight(st);
      const layout = { xRowStride: groups * (k + 3) + 1, xGroupStride: k + 3, outRowStride: groups * (n + 2), outGroupStride: n + 2 };
      const x = randn(rng, 64 * layout.xRowStride);
      const all = nat!.groupedMatmul(x, 64, groups, wn, layout);
      assert.deepEqual(nat2!.groupedMatmul(x, 64, groups, wn, layout), all, `${fmt}: threads 2`);
      for (const m of [1, 2, 3, 7, 64]) {
        const got = nat!.groupedMatmul(x, m, groups, wn, layout);
        const want = ref.groupedMatmul(x, m, groups, wr, layout);
        closeTo(got, want, 1e-3, 2e-6, `${fmt} groups ${groups} [${n},${k}] M=${m}`, 1e-5);
        assert.deepEqual(got, all.subarray(0, m * layout.outRowStride), `${fmt} M=${m}: rows == in the batch of 64`);
      }
      // group g of row m == matmul of that row against the same stored weight, the group's rows (same bits)
      for (const g of [0, groups - 1]) {
        const xg = new Float32Array(5 * k);
        for (let m = 0; m < 5; m++) xg.set(x.subarray(m * layout.xRowStride + g * layout.xGroupStride, m * layout.xRowStride + g * layout.xGroupStride + k), m * k);
        const yg = nat!.matmul(xg, 5, wn);
        for (let m = 0; m < 5; m++) {
          const row = yg.slice(m * groups * n + g * n, m * groups * n + (g + 1) * n);
          assert.deepEqual(all.slice(m * layout.outRowStride + g * layout.outGroupStride, m * layout.outRowStride + g * layout.outGroupStride + n), row, `${fmt} group ${g} row ${m}`);
        }
      }
    }
  }
});

test('indexerTopK: random batches vs the reference (same picks), per-request invariance, threads, bad locs', { skip }, () => {
  const rng = new Rng(20);
  const numLocs = 700;
  for (const [H, D, topK] of [[4, 13, 5], [16, 64, 256], [8, 64, 16]]) {
    const kRowWidth = D + 3;
    const kBuf = randn(rng, numLocs * kRowWidth);
    const { batch, numTokens } = randomAttentionBatch(rng, [0, 300, 12, 0], [9, 1, 5, 330], numLocs, 3);
    const q = randn(rng, numTokens * H * D);
    const wts = randn(rng, numTokens * H);
    const p = { numHeads: H, headDim: D, topK, kBuf, kRowWidth };
    const got = nat!.indexerTopK(q, wts, numTokens, p, batch);
    assert.deepEqual(got, ref.indexerTopK(q, wts, numTokens, p, batch), `H=${H} D=${D} topK=${topK}`);
    assert.deepEqual(nat2!.indexerTopK(q, wts, numTokens, p, batch), got, 'threads 2');
    let row = 0;
    for (let i = 0; i < batch.numReqs; i++) {
      const len = batch.extendSeqLens[i];
      const alone = nat!.indexerTopK(q.subarray(row * H * D, (row + len) * H * D), wts.subarray(row * H, (row + len) * H), len, p, subBatch(batch, i));
      assert.deepEqual(alone, got.subarray(row * topK, (row + len) * topK), `req ${i} alone`);
      row += len;
    }
  }
  const { batch, numTokens } = randomAttentionBatch(rng, [20], [1], 50, 3);
  const bad = { ...batch, reqToToken: batch.reqToToken.map((v) => v + 1000) };
  assert.throws(() => nat!.indexerTopK(randn(rng, numTokens * 8), randn(rng, numTokens), numTokens, { numHeads: 1, headDim: 8, topK: 4, kBuf: randn(rng, 50 * 8), kRowWidth: 8 }, bad), /outside the index keys/);
});

/** Dequantized f32 copy of a weight (through the reference decoder). */
function weightF32(w: Weight): Float32Array {
  const [n, k] = w.shape;
  if (w.format === 'f32') return w.data;
  const bytes = new Uint8Array(w.data.buffer, w.data.byteOffset, w.data.byteLength);
  const dtype = w.format === 'fp8_block' ? 'f8_e4m3' : w.format;
  return ref.prepareWeight({ name: 'w', dtype, shape: [n, k], bytes: bytes.slice(), scale: w.format === 'fp8_block' ? w.scale : undefined }).data as Float32Array;
}

test('allocateKvBuffer: exact lengths, zeroed, independent (small, 1 MiB and larger on huge pages), both backends; attention reads it alike', { skip }, () => {
  const ops = createOps({ backend: 'native', threads: 1 });
  const sizes = [0, 1, 1000, (1 << 18) - 1, 1 << 18, 3 << 18];
  for (const backend of [ops, ref]) {
    const got = sizes.map((n) => backend.allocateKvBuffer(n));
    got.forEach((b, i) => {
      assert.equal(b.length, sizes[i]);
      assert.ok(b.every((v) => v === 0), `${backend.name}: buffer ${i} not zeroed`);
    });
    got.forEach((b, i) => b.fill(i + 1));
    got.forEach((b, i) => assert.ok(b.every((v) => v === i + 1), `${backend.name}: buffer ${i} was overwritten by another`));
  }
  // a KV pool on this storage gives the attention the same bits as one on plain arrays
  const H = 4, Hkv = 2, hd = 16, locs = (1 << 18) / (Hkv * hd) + 1;
  const plainK = Float32Array.from({ length: locs * Hkv * hd }, (_, i) => Math.sin(i));
  const plainV = Float32Array.from({ length: locs * Hkv * hd }, (_, i) => Math.cos(i));
  const hugeK = ops.allocateKvBuffer(plainK.length), hugeV = ops.allocateKvBuffer(plainV.length);
  hugeK.set(plainK);
  hugeV.set(plainV);
  const n = 300;
  const batch = { numReqs: 1, extendStartLoc: Int32Array.of(0), extendSeqLens: Int32Array.of(1), extendPrefixLens: Int32Array.of(n - 1),
    reqPoolIndices: Int32Array.of(0), reqToToken: Int32Array.from({ length: n }, (_, i) => 1 + ((i * 7) % (locs - 1))), reqToTokenStride: n };
  const q = Float32Array.from({ length: H * hd }, (_, i) => Math.sin(3 * i));
  const geo = { numHeads: H, numKvHeads: Hkv, headDim: hd, vHeadDim: hd, scale: 0.25, kRowWidth: Hkv * hd, kOffset: 0, vRowWidth: Hkv * hd, vOffset: 0 };
  const a = ops.attention(q, 1, { ...geo, kBuf: plainK, vBuf: plainV }, batch);
  const b = ops.attention(q, 1, { ...geo, kBuf: hugeK, vBuf: hugeV }, batch);
  assert.deepEqual([...b], [...a]);
});

test('allocateWeightBytes: exact lengths, zeroed, 64-byte aligned, non-overlapping; large tensors on their own mapping', { skip }, () => {
  const ops = createOps({ backend: 'native', threads: 1 });
  const sizes = [1, 100, 4096, 3 << 20, 7, 64 << 10, 40 << 20];
  const got = sizes.map((n) => ops.allocateWeightBytes(n));
  got.forEach((b, i) => {
    assert.equal(b.byteLength, sizes[i]);
    assert.equal(b.byteOffset % 64, 0);
    assert.ok(b.every((v) => v === 0));
  });
  got.forEach((b, i) => b.fill(i + 1));
  got.forEach((b, i) => assert.ok(b.every((v) => v === i + 1), `slice ${i} was overwritten by another`));
  // the weights stay usable by the kernels: a BF16 matrix whose bytes live in the arena
  const bytes = ops.allocateWeightBytes(2 * 3 * 2);
  new Uint16Array(bytes.buffer, bytes.byteOffset, 6).set([0x3f80, 0x4000, 0x4040, 0xbf80, 0, 0x3f00]); // [[1,2,3],[-1,0,0.5]]
  const w = ops.prepareWeight({ name: 'w', dtype: 'bf16', shape: [2, 3], bytes });
  assert.deepEqual([...ops.matmul(new Float32Array([1, 1, 2]), 1, w)], [9, 0]);
  assert.deepEqual([...ref.allocateWeightBytes(5)], [0, 0, 0, 0, 0]);
});
