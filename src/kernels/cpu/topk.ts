// Reference top-k per row (descending; ties → lower index first; NaN ranks lowest).
import { assert } from '../../common/index.js';
import type { TopKResult } from '../ops.js';

/**
 * Top-k of each row by partial selection (k passes would be O(k·width); we keep a sorted insertion buffer).
 * @param x [numRows, width] f32
 * @param k 1 ≤ k ≤ width
 * @returns indices [numRows, k] i32 and values [numRows, k] f32, descending
 */
export function topk(x: Float32Array, numRows: number, width: number, k: number): TopKResult {
  assert(k >= 1 && k <= width, () => `topk: k=${k} outside [1, ${width}]`);
  const indices = new Int32Array(numRows * k);
  const values = new Float32Array(numRows * k);
  const bufV = new Float64Array(k);
  const bufI = new Int32Array(k);
  for (let r = 0; r < numRows; r++) {
    const o = r * width;
    let filled = 0;
    for (let i = 0; i < width; i++) {
      const v = Number.isNaN(x[o + i]) ? -Infinity : x[o + i];
      if (filled === k && !(v > bufV[k - 1])) continue; // equal values keep the earlier (lower) index
      let p = filled < k ? filled++ : k - 1;
      while (p > 0 && v > bufV[p - 1]) {
        bufV[p] = bufV[p - 1];
        bufI[p] = bufI[p - 1];
        p--;
      }
      bufV[p] = v;
      bufI[p] = i;
    }
    for (let j = 0; j < k; j++) {
      indices[r * k + j] = bufI[j];
      values[r * k + j] = x[o + bufI[j]];
    }
  }
  return { indices, values };
}
