// --kv-cache-dtype in the attention and indexer kernels: reading K/V rows stored in a codec (bf16, FP8 e4m3 / e5m2
// with a scale, SGLang's block-scaled DSA layouts) gives exactly what the f32 kernels give over the dequantized rows,
// on both backends (the native kernels dequantize in registers), and stays batch invariant.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { decodeKvRow, encodeKvRow, kvRowBytes, Rng } from '../src/common/index.js';
import type { KvCodec, KvStore } from '../src/common/index.js';
import { CpuOps, createOps, loadNativeAddon } from '../src/kernels/index.js';
import type { AttentionBatch, AttentionParams, Ops } from '../src/kernels/index.js';
import { randomAttentionBatch } from './helpers/attention_batch.js';

const status = loadNativeAddon();
const ref = new CpuOps();
const nat: Ops | null = status.addon ? createOps({ backend: 'native', threads: 1 }) : null;
const nat3: Ops | null = status.addon ? createOps({ backend: 'native', threads: 3 }) : null;
const backends: [string, Ops][] = [['cpu-ref', ref], ...(nat ? [['native', nat] as [string, Ops]] : [])];

function randn(rng: Rng, n: number, scale = 1): Float32Array {
  return Float32Array.from({ length: n }, () => rng.nextGaussian() * scale);
}

/** `rows` random rows of `width` stored in `codec`, and the same rows dequantized to f32. */
function storeOf(rng: Rng, codec: KvCodec, rows: number, width: number, scale = 1): { store: KvStore; f32: Float32Array } {
  const rowFloats = kvRowBytes(codec, width) / 4;
  const store: KvStore = { codec, raw: new Float32Array(rows * rowFloats), rowFloats, width };
  const src = randn(rng, width, scale);
  const f32 = new Float32Array(rows * width);
  for (let r = 0; r < rows; r++) {
    for (let e = 0; e < width; e++) src[e] = rng.nextGaussian() * scale;
    encodeKvRow(store, r, src, 0);
    decodeKvRow(store, r, 0, width, f32.subarray(r * width, (r + 1) * width));
  }
  return { store, f32 };
}

const CODECS: [string, KvCodec][] = [
  ['bf16', { kind: 'bf16', scale: 1 }],
  ['bf16 x0.5', { kind: 'bf16', scale: 0.5 }],
  ['fp8_e4m3', { kind: 'fp8_e4m3', scale: 1 }],
  ['fp8_e4m3 k_scale 0.03125', { kind: 'fp8_e4m3', scale: 0.03125 }],
  ['fp8_e4m3 k_scale 0.7', { kind: 'fp8_e4m3', scale: 0.7 }],
  ['fp8_e5m2', { kind: 'fp8_e5m2', scale: 1 }],
];

test('attention over K/V stored in each codec == attention over the dequantized f32 rows (GQA, odd head dims, sparse), both backends', () => {
  const rng = new Rng(41);
  const numLocs = 200;
  for (const [name, codec] of CODECS) {
    for (const [hd, vhd] of [[48, 48], [13, 11], [64, 40]]) {
      const k = storeOf(rng, codec, numLocs, 2 * hd);
      const v = storeOf(rng, codec, numLocs, 2 * vhd);
      const base = { numHeads: 6, numKvHeads: 2, headDim: hd, vHeadDim: vhd, scale: 1 / Math.sqrt(hd), kRowWidth: 2 * hd, kOffset: 0, vRowWidth: 2 * vhd, vOffset: 0 };
      const stored: AttentionParams = { ...base, kBuf: k.store, vBuf: v.store };
      const plain: AttentionParams = { ...base, kBuf: k.f32, vBuf: v.f32 };
      const { batch, numTokens } = randomAttentionBatch(rng, [0, 9, 60, 0], [7, 1, 3, 1], numLocs);
      const q = randn(rng, numTokens * 6 * hd);
      const idx = Int32Array.from({ length: numTokens * 5 }, () => (rng.nextFloat() < 0.2 ? -1 : Math.floor(rng.nextFloat() * 60)));
      for (const [bn, ops] of backends) {
        assert.deepEqual(ops.attention(q, numTokens, stored, batch), ops.attention(q, numTokens, plain, batch), `${bn} ${name} ${hd}/${vhd}`);
        assert.deepEqual(ops.attention(q, numTokens, stored, batch, { indices: idx, width: 5 }), ops.attention(q, numTokens, plain, batch, { indices: idx, width: 5 }), `${bn} ${name} sparse`);
      }
      if (nat3) assert.deepEqual(nat3.attention(q, numTokens, stored, batch), nat!.attention(q, numTokens, stored, batch), `${name}: threads 3 == threads 1`);
    }
  }
});

test('MLA over an fp8_ds_mla latent row (e4m3 latent with 128-block scales + bf16 rope key), K and V in one row, both backends', () => {
  const rng = new Rng(42);
  const numLocs = 150;
  for (const [r, dr] of [[64, 16], [512, 64], [136, 24]]) {
    const lat = storeOf(rng, { kind: 'fp8_block', fp8Dims: r }, numLocs, r + dr, 2);
    const base = { numHeads: 5, numKvHeads: 1, headDim: r + dr, vHeadDim: r, scale: 0.1, kRowWidth: r + dr, kOffset: 0, vRowWidth: r + dr, vOffset: 0 };
    const { batch, numTokens } = randomAttentionBatch(rng, [0, 30, 3], [4, 1, 2], numLocs);
    const q = randn(rng, numTokens * 5 * (r + dr));
    for (const [bn, ops] of backends) {
      assert.deepEqual(ops.attention(q, numTokens, { ...base, kBuf: lat.store, vBuf: lat.store }, batch), ops.attention(q, numTokens, { ...base, kBuf: lat.f32, vBuf: lat.f32 }, batch), `${bn} ${r}+${dr}`);
    }
  }
});

test('DSA indexer top-k over FP8 index keys with a 128-block scale (SGLang act_quant layout) == over the dequantized keys', () => {
  const rng = new Rng(43);
  const numLocs = 300;
  for (const D of [64, 128]) {
    const keys = storeOf(rng, { kind: 'fp8_block', fp8Dims: D }, numLocs, D);
    const { batch, numTokens } = randomAttentionBatch(rng, [0, 100, 7], [40, 1, 2], numLocs);
    const H = 4;
    const q = randn(rng, numTokens * H * D);
    const w = randn(rng, numTokens * H);
    for (const [bn, ops] of backends) {
      const a = ops.indexerTopK(q, w, numTokens, { numHeads: H, headDim: D, topK: 16, kBuf: keys.store, kRowWidth: D }, batch);
      const b = ops.indexerTopK(q, w, numTokens, { numHeads: H, headDim: D, topK: 16, kBuf: keys.f32, kRowWidth: D }, batch);
      assert.deepEqual(a, b, `${bn} D=${D}`);
    }
  }
});

test('native and reference agree on stored K/V (the same dequantized values; f64 vs f32 accumulation only)', { skip: nat ? false : `native addon unavailable: ${status.reason}` }, () => {
  const rng = new Rng(44);
  const k = storeOf(rng, { kind: 'fp8_e4m3', scale: 0.5 }, 100, 96);
  const v = storeOf(rng, { kind: 'fp8_e4m3', scale: 0.25 }, 100, 96);
  const p: AttentionParams = { numHeads: 4, numKvHeads: 2, headDim: 48, vHeadDim: 48, scale: 0.14, kBuf: k.store, kRowWidth: 96, kOffset: 0, vBuf: v.store, vRowWidth: 96, vOffset: 0 };
  const { batch, numTokens } = randomAttentionBatch(rng, [0, 20], [5, 1], 100);
  const q = randn(rng, numTokens * 4 * 48);
  const a = nat!.attention(q, numTokens, p, batch);
  const b = ref.attention(q, numTokens, p, batch);
  for (let i = 0; i < a.length; i++) assert.ok(Math.abs(a[i] - b[i]) <= 2e-5 * Math.max(1, Math.abs(b[i])), `${i}: ${a[i]} vs ${b[i]}`);
});
