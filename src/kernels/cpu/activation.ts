// Reference element-wise ops: add, sigmoid, SiLU-and-mul, softmax.

/** a + b element-wise. @param a [n] f32 @param b [n] f32 @returns [n] f32 (out may alias a or b) */
export function add(a: Float32Array, b: Float32Array, out: Float32Array = new Float32Array(a.length)): Float32Array {
  for (let i = 0; i < a.length; i++) out[i] = a[i] + b[i];
  return out;
}

/** 1/(1+e^-x) element-wise. @param x [n] f32 @returns [n] f32 */
export function sigmoid(x: Float32Array, out: Float32Array = new Float32Array(x.length)): Float32Array {
  for (let i = 0; i < x.length; i++) out[i] = 1 / (1 + Math.exp(-x[i]));
  return out;
}

/** silu(gate) ⊙ up with silu(z) = z/(1+e^-z) (model-spec §1.6). @param gate [n] f32 @param up [n] f32 @returns [n] f32 */
export function siluAndMul(gate: Float32Array, up: Float32Array, out: Float32Array = new Float32Array(gate.length)): Float32Array {
  for (let i = 0; i < gate.length; i++) {
    const g = gate[i];
    out[i] = (g / (1 + Math.exp(-g))) * up[i];
  }
  return out;
}

/**
 * Row softmax: exp(x − max) / Σ exp(x − max), sum in f64 ascending.
 * @param x [numRows, width] f32
 * @returns [numRows, width] f32 (out may alias x)
 */
export function softmax(x: Float32Array, numRows: number, width: number, out: Float32Array = new Float32Array(numRows * width)): Float32Array {
  for (let r = 0; r < numRows; r++) {
    const o = r * width;
    let max = -Infinity;
    for (let i = 0; i < width; i++) if (x[o + i] > max) max = x[o + i];
    let sum = 0;
    for (let i = 0; i < width; i++) {
      const e = Math.exp(x[o + i] - max);
      out[o + i] = e;
      sum += e;
    }
    const inv = 1 / sum;
    for (let i = 0; i < width; i++) out[o + i] *= inv;
  }
  return out;
}
