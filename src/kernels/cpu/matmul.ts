// Reference matmul and embedding over any Weight format. Each output row is computed independently with a
// fixed k order (batch invariant); decoding of non-f32 weights happens one weight row at a time.
import { assert } from '../../common/index.js';
import type { Weight } from '../ops.js';
import { weightRowToF32 } from './quant.js';

/**
 * y = x · Wᵀ (no bias). Dot products accumulate in f64 in ascending k, then round to f32.
 * @param x [numRows, K] f32
 * @param w [N, K]
 * @returns [numRows, N] f32
 * @throws InternalError on size mismatch
 */
export function matmul(x: Float32Array, numRows: number, w: Weight, out?: Float32Array): Float32Array {
  assert(w.shape.length === 2, 'matmul: weight must be 2-D');
  const [n, k] = w.shape;
  assert(x.length >= numRows * k, () => `matmul: x has ${x.length} elements, need ${numRows}×${k}`);
  const y = out ?? new Float32Array(numRows * n);
  assert(y.length >= numRows * n, 'matmul: out too small');
  if (w.format === 'f32') {
    const wd = w.data;
    for (let m = 0; m < numRows; m++) {
      const xOff = m * k;
      let j = 0;
      for (; j + 1 < n; j += 2) dot2(x, xOff, wd, j * k, k, y, m * n + j);
      for (; j < n; j++) y[m * n + j] = dot(x, xOff, wd, j * k, k);
    }
    return y;
  }
  // Stored encodings: decode weight row j once, use it for every activation row.
  const row = new Float32Array(k);
  for (let j = 0; j < n; j++) {
    weightRowToF32(w, j, row);
    for (let m = 0; m < numRows; m++) y[m * n + j] = dot(x, m * k, row, 0, k);
  }
  return y;
}

/** Σ_{i<len} a[aOff+i]·b[bOff+i], accumulated in f64 in ascending i. */
export function dot(a: Float32Array, aOff: number, b: Float32Array, bOff: number, len: number): number {
  let s0 = 0;
  let s1 = 0;
  let s2 = 0;
  let s3 = 0;
  let i = 0;
  for (; i + 3 < len; i += 4) {
    s0 += a[aOff + i] * b[bOff + i];
    s1 += a[aOff + i + 1] * b[bOff + i + 1];
    s2 += a[aOff + i + 2] * b[bOff + i + 2];
    s3 += a[aOff + i + 3] * b[bOff + i + 3];
  }
  for (; i < len; i++) s0 += a[aOff + i] * b[bOff + i];
  return (s0 + s1) + (s2 + s3);
}

/**
 * Two dot products sharing the loads of `a`: out[o] = a·b[bOff..], out[o+1] = a·b[bOff+len..]. Each result is
 * accumulated exactly as `dot` does (same partial sums, same order), so results are bit-identical to two dot calls.
 */
function dot2(a: Float32Array, aOff: number, b: Float32Array, bOff: number, len: number, out: Float32Array, o: number): void {
  const c = bOff + len;
  let s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  let t0 = 0, t1 = 0, t2 = 0, t3 = 0;
  let i = 0;
  for (; i + 3 < len; i += 4) {
    const x0 = a[aOff + i];
    const x1 = a[aOff + i + 1];
    const x2 = a[aOff + i + 2];
    const x3 = a[aOff + i + 3];
    s0 += x0 * b[bOff + i];
    s1 += x1 * b[bOff + i + 1];
    s2 += x2 * b[bOff + i + 2];
    s3 += x3 * b[bOff + i + 3];
    t0 += x0 * b[c + i];
    t1 += x1 * b[c + i + 1];
    t2 += x2 * b[c + i + 2];
    t3 += x3 * b[c + i + 3];
  }
  for (; i < len; i++) {
    s0 += a[aOff + i] * b[bOff + i];
    t0 += a[aOff + i] * b[c + i];
  }
  out[o] = (s0 + s1) + (s2 + s3);
  out[o + 1] = (t0 + t1) + (t2 + t3);
}

/**
 * Embedding lookup.
 * @param ids [n] i32 in [0, V)
 * @param table [V, D]
 * @returns [n, D] f32
 * @throws InternalError for an id out of range
 */
export function embedding(ids: Int32Array, table: Weight, out?: Float32Array): Float32Array {
  const [v, d] = table.shape;
  const y = out ?? new Float32Array(ids.length * d);
  for (let t = 0; t < ids.length; t++) {
    const id = ids[t];
    assert(id >= 0 && id < v, () => `embedding: id ${id} outside [0, ${v})`);
    weightRowToF32(table, id, y.subarray(t * d, (t + 1) * d));
  }
  return y;
}
