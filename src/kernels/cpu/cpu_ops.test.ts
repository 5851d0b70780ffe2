// Runs the Ops conformance suite on the f32 reference backend, plus tests of its weight decoding.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { FP8_E4M3_TO_F32 } from '../../common/index.js';
import { runOpsConformance } from '../ops.case.js';
import { CpuOps } from './cpu_ops.js';
import { dequantizeFp8Block, storedToF32, weightToF32 } from './quant.js';

runOpsConformance('cpu-ref', () => new CpuOps(), { tol: 1e-6 });

test('dequantizeFp8Block: partial edge blocks in both dims use scale[floor(n/bn), floor(k/bk)]', () => {
  // 3×5 matrix with 2×2 blocks → scale [2, 3]; code 0x38 = 1.0, 0x40 = 2.0
  const codes = new Uint8Array(15).fill(0x38);
  codes[14] = 0x40;
  const scale = { data: Float32Array.of(1, 2, 3, 4, 5, 6), shape: [2, 3] as [number, number], blockSize: [2, 2] as [number, number] };
  const w = dequantizeFp8Block(codes, 3, 5, scale);
  assert.deepEqual(Array.from(w), [1, 1, 2, 2, 3, 1, 1, 2, 2, 3, 4, 4, 5, 5, 12]);
  assert.throws(() => dequantizeFp8Block(codes, 3, 5, { ...scale, shape: [1, 3] }), /does not match/);
});

test('prepareWeight keeps one f32 copy; weightToF32 decodes held bf16 / fp8 weights the same way', () => {
  const ops = new CpuOps();
  const codes = Uint8Array.of(0x38, 0xc0, 0x01, 0x7e); // 1, -2, 2^-9, 448
  const scale = { data: Float32Array.of(0.5), shape: [1, 1] as [number, number], blockSize: [128, 128] as [number, number] };
  const w = ops.prepareWeight({ name: 'w', dtype: 'f8_e4m3', shape: [2, 2], bytes: codes, scale });
  assert.equal(w.format, 'f32');
  assert.deepEqual(Array.from(weightToF32(w)), [0.5, -1, 2 ** -10, 224]);
  assert.deepEqual(weightToF32({ format: 'fp8_block', shape: [2, 2], data: codes, scale }), weightToF32(w));
  assert.deepEqual(Array.from(weightToF32({ format: 'bf16', shape: [2], data: Uint16Array.of(0x3f80, 0xc040) })), [1, -3]);
  assert.equal(FP8_E4M3_TO_F32[0x7e], 448);
});

test('storedToF32 decodes integer and float header dtypes', () => {
  const i64 = new Uint8Array(new BigInt64Array([5n, -7n]).buffer);
  assert.deepEqual(Array.from(storedToF32({ name: 'i', dtype: 'i64', shape: [2], bytes: i64 })), [5, -7]);
  const f16 = new Uint8Array(Uint16Array.of(0x3c00, 0xbc00).buffer);
  assert.deepEqual(Array.from(storedToF32({ name: 'h', dtype: 'f16', shape: [2], bytes: f16 })), [1, -1]);
});
