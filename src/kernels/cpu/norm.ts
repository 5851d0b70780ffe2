// Reference RMSNorm and LayerNorm (row-wise, f64 accumulation, f32 output).
import { assert } from '../../common/index.js';

/**
 * RMSNorm: y = x · (mean(x²) + eps)^-1/2 · w (model-spec §1.4; SGLang `layers/layernorm.py` RMSNorm).
 * @param x [numRows, xRowStride] f32; the first `width` values of each row are normalized
 * @param weight [width] f32
 * @returns [numRows, width] f32
 */
export function rmsNorm(x: Float32Array, numRows: number, width: number, weight: Float32Array, eps: number, out?: Float32Array, xRowStride = width): Float32Array {
  assert(weight.length === width, () => `rmsNorm: weight length ${weight.length} != width ${width}`);
  const y = out ?? new Float32Array(numRows * width);
  for (let r = 0; r < numRows; r++) {
    const xo = r * xRowStride;
    let ss = 0;
    for (let i = 0; i < width; i++) ss += x[xo + i] * x[xo + i];
    const inv = 1 / Math.sqrt(ss / width + eps);
    const yo = r * width;
    for (let i = 0; i < width; i++) y[yo + i] = x[xo + i] * inv * weight[i];
  }
  return y;
}

/**
 * LayerNorm with weight and bias, biased variance: y = (x − μ)/sqrt(σ² + eps) · w + b.
 * @param x [numRows, width] f32
 * @param weight [width] f32
 * @param bias [width] f32
 * @returns [numRows, width] f32
 */
export function layerNorm(x: Float32Array, numRows: number, width: number, weight: Float32Array, bias: Float32Array, eps: number, out?: Float32Array): Float32Array {
  assert(weight.length === width && bias.length === width, 'layerNorm: weight/bias length != width');
  const y = out ?? new Float32Array(numRows * width);
  for (let r = 0; r < numRows; r++) {
    const o = r * width;
    let sum = 0;
    for (let i = 0; i < width; i++) sum += x[o + i];
    const mean = sum / width;
    let varSum = 0;
    for (let i = 0; i < width; i++) varSum += (x[o + i] - mean) * (x[o + i] - mean);
    const inv = 1 / Math.sqrt(varSum / width + eps);
    for (let i = 0; i < width; i++) y[o + i] = (x[o + i] - mean) * inv * weight[i] + bias[i];
  }
  return y;
}
