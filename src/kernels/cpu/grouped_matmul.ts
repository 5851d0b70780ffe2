// Reference per-group linear layers (MLA's absorbed per-head products in one call). Each output element is an
// f64 dot product in ascending k (the reference matmul's `dot`), so rows are independent (batch invariant).
import { assert } from '../../common/index.js';
import type { GroupedMatmulLayout, Weight } from '../ops.js';
import { dot } from './matmul.js';
import { weightRowToF32 } from './quant.js';

/** The strides of a groupedMatmul call with every default filled in (elements). */
export function groupedLayout(groups: number, w: Weight, layout?: GroupedMatmulLayout): Required<GroupedMatmulLayout> {
  const [rows, k] = w.shape;
  const n = rows / groups;
  return {
    xRowStride: layout?.xRowStride ?? groups * k,
    xGroupStride: layout?.xGroupStride ?? k,
    outRowStride: layout?.outRowStride ?? groups * n,
    outGroupStride: layout?.outGroupStride ?? n,
  };
}

/**
 * y[m, g, :] = x[m, g, :] · W_gᵀ with W_g = rows g·N .. g·N+N−1 of w (SGLang's per-head `torch.bmm` of the MLA absorbed
 * form). Dot products accumulate in f64 in ascending k, then round to f32.
 * @param x element (m, g, k) at m·xRowStride + g·xGroupStride + k
 * @param w [groups·N, K]
 * @returns y with element (m, g, n) at m·outRowStride + g·outGroupStride + n (other elements of `out` untouched);
 *   a fresh array has numRows·outRowStride elements
 * @throws InternalError when groups does not divide the weight's rows or a buffer is too small
 */
export function groupedMatmul(x: Float32Array, numRows: number, groups: number, w: Weight, layout?: GroupedMatmulLayout, out?: Float32Array): Float32Array {
  assert(w.shape.length === 2 && groups >= 1 && w.shape[0] % groups === 0, () => `groupedMatmul: ${groups} groups do not divide weight [${w.shape.join(', ')}]`);
  const [rows, k] = w.shape;
  const n = rows / groups;
  const l = groupedLayout(groups, w, layout);
  const y = out ?? new Float32Array(numRows * l.outRowStride);
  if (numRows === 0) return y;
  assert(x.length >= (numRows - 1) * l.xRowStride + (groups - 1) * l.xGroupStride + k, 'groupedMatmul: x too small');
  assert(y.length >= (numRows - 1) * l.outRowStride + (groups - 1) * l.outGroupStride + n, 'groupedMatmul: out too small');
  const wRow = new Float32Array(k);
  for (let g = 0; g < groups; g++) {
    for (let j = 0; j < n; j++) {
      weightRowToF32(w, g * n + j, wRow);
      for (let m = 0; m < numRows; m++) y[m * l.outRowStride + g * l.outGroupStride + j] = dot(x, m * l.xRowStride + g * l.xGroupStride, wRow, 0, k);
    }
  }
  return y;
}
