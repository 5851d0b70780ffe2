// KV-cache codecs (--kv-cache-dtype): FP8 / BF16 encodings against their definitions, row layouts and sizes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  decodeBf16, decodeKvRow, E4M3_LUT, E5M2_LUT, encodeBf16, encodeE4m3, encodeE5m2, encodeKvRow, fp8BlockScale, kvRowBytes, parseKvCacheDtype,
} from './kv_dtype.js';
import type { KvCodec, KvStore } from './kv_dtype.js';

test('e4m3fn / e5m2 tables: the format definitions (bias 7 / 15, subnormals, e4m3fn NaN only at S.1111.111, e5m2 inf)', () => {
  assert.equal(E4M3_LUT[0x7e], 448);
  assert.equal(E4M3_LUT[0x08], 2 ** -6);
  assert.equal(E4M3_LUT[0x01], 2 ** -9);
  assert.equal(E4M3_LUT[0x38], 1);
  assert.equal(E4M3_LUT[0xb8], -1);
  assert.ok(Number.isNaN(E4M3_LUT[0x7f]) && Number.isNaN(E4M3_LUT[0xff]));
  assert.equal(E5M2_LUT[0x7b], 57344);
  assert.equal(E5M2_LUT[0x3c], 1);
  assert.equal(E5M2_LUT[0x01], 2 ** -16);
  assert.equal(E5M2_LUT[0x7c], Infinity);
});

test('encoding: every finite code round-trips; round to nearest even between codes; saturation', () => {
  for (let c = 0; c < 256; c++) {
    if (c === 0x80) continue; // -0 encodes as 0x80 too, checked below
    if (Number.isFinite(E4M3_LUT[c])) assert.equal(encodeE4m3(E4M3_LUT[c]), c, `e4m3 ${c}`);
    if (Number.isFinite(E5M2_LUT[c])) assert.equal(encodeE5m2(E5M2_LUT[c]), c, `e5m2 ${c}`);
  }
  assert.equal(encodeE4m3(-0), 0x80);
  // 1 + 1/16 lies halfway between 1 (0x38, even) and 1.125 (0x39): ties to even
  assert.equal(encodeE4m3(1 + 1 / 16), 0x38);
  assert.equal(encodeE4m3(1.125 + 1 / 16), 0x3a);
  assert.equal(encodeE4m3(1 + 1 / 16 + 1e-6), 0x39);
  // subnormals: halfway between 0 and 2^-9 → 0, 1.5·2^-9 → 2·2^-9 (even)
  assert.equal(encodeE4m3(2 ** -10), 0);
  assert.equal(encodeE4m3(1.5 * 2 ** -9), 0x02);
  assert.equal(encodeE4m3(7.5 * 2 ** -9), 0x08); // rounds up into the first normal
  assert.equal(encodeE4m3(1e6), 0x7e);
  assert.equal(encodeE4m3(-470), 0xfe);
  assert.equal(encodeE5m2(1e9), 0x7b);
  // every f32 maps to the nearest code (brute force over a grid)
  for (let i = 0; i < 20000; i++) {
    const x = (i - 10000) * 0.0517;
    const c = encodeE4m3(x);
    const best = Math.min(...Array.from({ length: 127 }, (_, k) => Math.abs(E4M3_LUT[k] - Math.abs(x))));
    assert.ok(Math.abs(Math.abs(E4M3_LUT[c]) - Math.abs(x)) <= best + 1e-12, `x=${x}`);
  }
  assert.equal(encodeBf16(1), 0x3f80);
  assert.equal(decodeBf16(encodeBf16(3.140625)), 3.140625);
  assert.equal(encodeBf16(1 + 2 ** -8), 0x3f80, 'tie to even');
  assert.equal(encodeBf16(1 + 3 * 2 ** -8), 0x3f82);
});

function roundTrip(codec: KvCodec, width: number, row: Float32Array): Float32Array {
  const rowFloats = kvRowBytes(codec, width) / 4;
  const store: KvStore = { codec, raw: new Float32Array(3 * rowFloats), rowFloats, width };
  encodeKvRow(store, 1, row, 0);
  const out = new Float32Array(width);
  decodeKvRow(store, 1, 0, width, out);
  assert.ok(store.raw.subarray(0, rowFloats).every((v) => v === 0) && store.raw.subarray(2 * rowFloats).every((v) => v === 0), 'neighbour rows untouched');
  return out;
}

test('row codecs: sizes (4x smaller FP8, 2x BF16), scales, and SGLang\'s block-scaled DSA layouts', () => {
  const width = 80;
  const row = Float32Array.from({ length: width }, (_, i) => Math.sin(i * 1.7) * (i < 64 ? 3 : 0.2));
  assert.equal(kvRowBytes({ kind: 'f32' }, width), 320);
  assert.equal(kvRowBytes({ kind: 'bf16', scale: 1 }, width), 160);
  assert.equal(kvRowBytes({ kind: 'fp8_e4m3', scale: 1 }, width), 80);
  // fp8_ds_mla of SGLang: 512 e4m3 + 4 f32 scales + 64 bf16 = 656 bytes
  assert.equal(kvRowBytes({ kind: 'fp8_block', fp8Dims: 512 }, 576), 656);
  // indexer keys: 128 e4m3 + one f32 scale
  assert.equal(kvRowBytes({ kind: 'fp8_block', fp8Dims: 128 }, 128), 132);
  const f = roundTrip({ kind: 'f32' }, width, row);
  assert.deepEqual(f, row);
  const b = roundTrip({ kind: 'bf16', scale: 1 }, width, row);
  b.forEach((v, i) => assert.equal(v, decodeBf16(encodeBf16(row[i]))));
  const s = 0.0625;
  const e = roundTrip({ kind: 'fp8_e4m3', scale: s }, width, row);
  e.forEach((v, i) => assert.equal(v, Math.fround(E4M3_LUT[encodeE4m3(row[i] / s)] * s)));
  const blk = roundTrip({ kind: 'fp8_block', fp8Dims: 64 }, width, row);
  let amax = 0;
  for (let i = 0; i < 64; i++) amax = Math.max(amax, Math.abs(row[i]));
  const scale = fp8BlockScale(amax);
  assert.ok(Number.isInteger(Math.log2(scale)), 'ue8m0: a power of two');
  assert.ok(amax / scale <= 448 && amax / scale > 224);
  for (let i = 0; i < 64; i++) assert.equal(blk[i], E4M3_LUT[encodeE4m3(row[i] / scale)] * scale);
  for (let i = 64; i < width; i++) assert.equal(blk[i], decodeBf16(encodeBf16(row[i])), 'rope part in bf16');
  assert.equal(fp8BlockScale(0), 1);
  assert.equal(parseKvCacheDtype('bfloat16'), 'bf16');
  assert.equal(parseKvCacheDtype('fp4_e2m1'), null);
});
