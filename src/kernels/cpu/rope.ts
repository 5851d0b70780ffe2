// Reference rotary position embedding (NeoX half-split or GPT-J interleaved, partial, with offset and mscale).
import { assert } from '../../common/index.js';
import type { RopeParams, RopeTarget } from '../ops.js';

/**
 * Rotates dims [offset, offset+rotaryDim) of every head in place (model-spec §1.5; SGLang
 * `layers/rotary_embedding.py`). θ_i = f32(pos · invFreq[i]); cos/sin rounded to f32, times mscale.
 * NeoX pairs (i, i+d/2); interleaved pairs (2i, 2i+1).
 * @param x [numTokens, rowStride] f32, in place
 * @param positions [numTokens] i32
 * @throws InternalError when the rotated slice does not fit in a head
 */
export function rope(x: Float32Array, numTokens: number, positions: Int32Array, target: RopeTarget, params: RopeParams): void {
  const { numHeads, headDim } = target;
  const rowStride = target.rowStride ?? numHeads * headDim;
  const offset = target.offset ?? 0;
  const d = params.rotaryDim;
  const half = d / 2;
  const mscale = params.mscale ?? 1;
  assert(d % 2 === 0 && offset + d <= headDim, () => `rope: rotaryDim ${d} at offset ${offset} exceeds headDim ${headDim}`);
  assert(params.invFreq.length >= half, 'rope: invFreq shorter than rotaryDim/2');
  const cos = new Float32Array(half);
  const sin = new Float32Array(half);
  for (let t = 0; t < numTokens; t++) {
    const pos = positions[t];
    for (let i = 0; i < half; i++) {
      const angle = Math.fround(pos * params.invFreq[i]);
      cos[i] = Math.fround(Math.cos(angle)) * mscale;
      sin[i] = Math.fround(Math.sin(angle)) * mscale;
    }
    for (let h = 0; h < numHeads; h++) {
      const base = t * rowStride + h * headDim + offset;
      if (params.style === 'neox') {
        for (let i = 0; i < half; i++) {
          const a = x[base + i];
          const b = x[base + i + half];
          x[base + i] = a * cos[i] - b * sin[i];
          x[base + i + half] = b * cos[i] + a * sin[i];
        }
      } else {
        for (let i = 0; i < half; i++) {
          const a = x[base + 2 * i];
          const b = x[base + 2 * i + 1];
          x[base + 2 * i] = a * cos[i] - b * sin[i];
          x[base + 2 * i + 1] = b * cos[i] + a * sin[i];
        }
      }
    }
  }
}

/**
 * Default RoPE inverse frequencies `base^(-2i/rotaryDim)`, i = 0..rotaryDim/2-1, computed in f32 like torch
 * (`1 / base ** (arange(0, d, 2).float() / d)`).
 * @returns [rotaryDim/2] f32
 */
export function ropeInvFreq(base: number, rotaryDim: number): Float32Array {
  const out = new Float32Array(rotaryDim / 2);
  for (let i = 0; i < out.length; i++) out[i] = 1 / Math.fround(Math.pow(base, Math.fround((2 * i) / rotaryDim)));
  return out;
}
