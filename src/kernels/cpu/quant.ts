// Weight decoding for the reference backend: stored tensors (F32/BF16/F16/FP8 block-scaled/ints) → f32.
// Pure functions; the only place kernels know checkpoint encodings (bit layouts themselves live in common/dtype.ts).
import { FP8_E4M3_TO_F32, assert, numel, toF32 } from '../../common/index.js';
import type { BlockScale, StoredTensor, Weight } from '../ops.js';

/**
 * Dequantizes a block-FP8 matrix: `W[n,k] = fp8(codes[n,k]) · scale[floor(n/bn), floor(k/bk)]`, f32 product.
 * Partial trailing blocks (N or K not a multiple of the block) use the same formula (model-spec §1.2;
 * DeepSeek-V3 `inference/kernel.py` weight_dequant).
 * @param codes [N, K] u8 float8_e4m3fn codes
 * @param scale [ceil(N/bn), ceil(K/bk)] f32 multipliers
 * @returns [N, K] f32
 * @throws InternalError if the scale shape does not cover the matrix
 */
export function dequantizeFp8Block(codes: Uint8Array, numRows: number, numCols: number, scale: BlockScale, out: Float32Array = new Float32Array(numRows * numCols)): Float32Array {
  const [bn, bk] = scale.blockSize;
  const [sRows, sCols] = scale.shape;
  assert(sRows === Math.ceil(numRows / bn) && sCols === Math.ceil(numCols / bk),
    () => `dequantizeFp8Block: scale [${sRows}, ${sCols}] does not match [${numRows}, ${numCols}] with block [${bn}, ${bk}]`);
  for (let n = 0; n < numRows; n++) {
    const sRow = Math.floor(n / bn) * sCols;
    const base = n * numCols;
    for (let k = 0; k < numCols; k++) out[base + k] = FP8_E4M3_TO_F32[codes[base + k]] * scale.data[sRow + Math.floor(k / bk)];
  }
  return out;
}

/**
 * Decodes a checkpoint tensor to f32 (FP8 with its block scale applied; FP8 without a scale is taken as-is).
 * @returns [numel(shape)] f32
 */
export function storedToF32(t: StoredTensor): Float32Array {
  const n = numel(t.shape);
  if (t.dtype === 'f8_e4m3' && t.scale) {
    assert(t.shape.length === 2, () => `${t.name}: block-FP8 tensor must be 2-D`);
    return dequantizeFp8Block(t.bytes, t.shape[0], t.shape[1], t.scale);
  }
  return toF32(t.bytes, t.dtype, n);
}

/**
 * Decodes row `row` of a 2-D weight into `out` (length K) without touching the other rows.
 * @param w [N, K]
 * @returns out, [K] f32
 */
export function weightRowToF32(w: Weight, row: number, out: Float32Array): Float32Array {
  const k = w.shape[1];
  const base = row * k;
  switch (w.format) {
    case 'f32':
      out.set(w.data.subarray(base, base + k));
      return out;
    case 'bf16': {
      const o32 = new Uint32Array(out.buffer, out.byteOffset, k);
      for (let i = 0; i < k; i++) o32[i] = w.data[base + i] << 16;
      return out;
    }
    case 'f16': {
      const bytes = new Uint8Array(w.data.buffer, w.data.byteOffset + base * 2, k * 2);
      return toF32(bytes, 'f16', k, out as Float32Array<ArrayBuffer>);
    }
    case 'fp8_block': {
      const [bn, bk] = w.scale.blockSize;
      const sRow = Math.floor(row / bn) * w.scale.shape[1];
      for (let i = 0; i < k; i++) out[i] = FP8_E4M3_TO_F32[w.data[base + i]] * w.scale.data[sRow + Math.floor(i / bk)];
      return out;
    }
  }
}

/**
 * Whole weight as f32 (a copy unless the weight is already f32, in which case its own array is returned).
 * @returns [numel(shape)] f32
 */
export function weightToF32(w: Weight): Float32Array {
  if (w.format === 'f32') return w.data;
  const n = numel(w.shape);
  if (w.shape.length === 2) {
    const [rows, cols] = w.shape;
    const out: Float32Array = new Float32Array(n);
    for (let r = 0; r < rows; r++) weightRowToF32(w, r, out.subarray(r * cols, (r + 1) * cols));
    return out;
  }
  const bytes = new Uint8Array(w.data.buffer, w.data.byteOffset, w.data.byteLength);
  assert(w.format !== 'fp8_block', 'weightToF32: block-FP8 weight must be 2-D');
  return toF32(bytes, w.format, n);
}
