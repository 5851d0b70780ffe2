// Tensor = {data, shape, dtype}: a row-major contiguous typed array with its shape. Views vs copies are explicit.
import { assert } from './assert.js';

/** An f32 tensor, row-major and contiguous: `data.length === numel(shape)`. */
export interface Tensor {
  readonly data: Float32Array;
  readonly shape: readonly number[];
}

/** Number of elements of a shape (1 for a scalar `[]`). */
export function numel(shape: readonly number[]): number {
  let n = 1;
  for (const d of shape) n *= d;
  return n;
}

/** Row-major strides of a shape, in elements. */
export function strides(shape: readonly number[]): number[] {
  const out = new Array<number>(shape.length);
  let s = 1;
  for (let i = shape.length - 1; i >= 0; i--) {
    out[i] = s;
    s *= shape[i];
  }
  return out;
}

/**
 * Wraps `data` as a tensor of `shape`, without copying.
 * @param data [numel(shape)] f32, row-major (the tensor is a view: writes through it change `data`)
 * @param shape dimension sizes, outermost first
 * @throws InternalError if data.length differs from numel(shape)
 */
export function tensor(data: Float32Array, shape: readonly number[]): Tensor {
  assert(data.length === numel(shape), () => `tensor: data length ${data.length} != numel([${shape.join(', ')}])`);
  return { data, shape: [...shape] };
}

/** A zero-filled f32 tensor of `shape`. */
export function zeros(shape: readonly number[]): Tensor {
  return { data: new Float32Array(numel(shape)), shape: [...shape] };
}

/**
 * View of rows [start, end) along the first dimension (shares memory with `t`).
 * @throws InternalError when the range is out of bounds
 */
export function rowsView(t: Tensor, start: number, end: number): Tensor {
  assert(t.shape.length >= 1 && 0 <= start && start <= end && end <= t.shape[0], 'rowsView: range out of bounds');
  const rowSize = numel(t.shape.slice(1));
  return { data: t.data.subarray(start * rowSize, end * rowSize), shape: [end - start, ...t.shape.slice(1)] };
}
