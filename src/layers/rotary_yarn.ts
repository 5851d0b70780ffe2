// DeepSeek YaRN RoPE ("deepseek_yarn"): the inv_freq table, the cos/sin multiplier (mscale), the attention
// softmax-scale correction, and the two rotation layouts (GPT-J interleaved for MLA, NeoX half-split for the
// DSA indexer). Pure maths on typed arrays; knows nothing of checkpoints or batches.
//
// Formulas: model-spec.md §1.5, §3.4, §3.5; upstream python/sglang/srt/layers/rotary_embedding.py
// (DeepseekScalingRotaryEmbedding, _yarn_find_correction_range, _yarn_linear_ramp_mask, yarn_get_mscale) and
// python/sglang/srt/models/deepseek_v2.py (softmax scale), YaRN paper (Peng et al. 2023, arXiv:2309.00071).
import { ModelLoadError } from '../common/index.js';

/** HF `rope_scaling` of type "yarn" / "deepseek_yarn" (DeepSeek config.json field names, camelCased). */
export interface YarnScaling {
  /** `factor` (s): context extension factor, e.g. 40. */
  readonly factor: number;
  /** `original_max_position_embeddings` (L0), e.g. 4096. */
  readonly originalMaxPositionEmbeddings: number;
  /** `beta_fast` (default 32). */
  readonly betaFast: number;
  /** `beta_slow` (default 1). */
  readonly betaSlow: number;
  /** `mscale` (default 1). */
  readonly mscale: number;
  /** `mscale_all_dim` (default 0: no softmax correction). */
  readonly mscaleAllDim: number;
}

/** A precomputed rotary table: per-pair inverse frequencies and the cos/sin multiplier. */
export interface RotaryTable {
  /** [rotaryDim / 2] f32 inverse frequency of pair i (radians per position). */
  readonly invFreq: Float32Array;
  /** Even number of rotated dims. */
  readonly rotaryDim: number;
  /** Multiplier applied to cos and sin (YaRN `mscale`; 1 for plain RoPE). */
  readonly cosSinScale: number;
}

/** Which pairs a rotation mixes (model-spec.md §1.5). */
export type RotaryStyle = 'interleaved' | 'neox';

/**
 * YaRN attention-temperature factor: `0.1·m·ln(s) + 1` for s > 1, else 1.
 * Source: sglang `yarn_get_mscale` (rotary_embedding.py); YaRN paper eq. for `sqrt(1/t)`.
 */
export function yarnGetMscale(scale: number, mscale: number): number {
  if (scale <= 1) return 1;
  return 0.1 * mscale * Math.log(scale) + 1;
}

/**
 * YaRN correction range: the rotary pair indices where interpolation starts and ends.
 * `cd(n) = d·ln(L0/(2πn)) / (2 ln base)`; `low = max(floor(cd(betaFast)), 0)`, `high = min(ceil(cd(betaSlow)), d−1)`.
 * @param rotaryDim d (even)
 * @returns [low, high] pair indices
 */
export function yarnCorrectionRange(
  betaFast: number, betaSlow: number, rotaryDim: number, base: number, originalMaxPos: number,
): [number, number] {
  const cd = (numRotations: number): number =>
    (rotaryDim * Math.log(originalMaxPos / (numRotations * 2 * Math.PI))) / (2 * Math.log(base));
  const low = Math.max(Math.floor(cd(betaFast)), 0);
  const high = Math.min(Math.ceil(cd(betaSlow)), rotaryDim - 1);
  return [low, high];
}

/**
 * DeepSeek YaRN inverse frequencies (model-spec.md §3.4 steps 1–4), computed in f32 like torch:
 * `f_j = 1/base^(2j/d)`, ramp `r_j = clamp((j−low)/(high−low), 0, 1)`, mask `m_j = 1 − r_j`,
 * `invFreq_j = (f_j/s)·(1−m_j) + f_j·m_j`.
 * @param rotaryDim d, even (qk_rope_head_dim)
 * @param base rope_theta
 * @returns [d/2] f32
 * @throws ModelLoadError when rotaryDim is not a positive even number or factor/base are not positive
 */
export function yarnInvFreq(rotaryDim: number, base: number, scaling: YarnScaling): Float32Array {
  checkRotaryDim(rotaryDim);
  if (!(scaling.factor > 0) || !(base > 0)) throw new ModelLoadError('config.json: rope_scaling.factor and rope_theta must be positive');
  const half = rotaryDim / 2;
  const [low, lowHigh] = yarnCorrectionRange(scaling.betaFast, scaling.betaSlow, rotaryDim, base, scaling.originalMaxPositionEmbeddings);
  const high = lowHigh === low ? low + 0.001 : lowHigh; // avoid a division by zero (sglang ramp mask does the same)
  const f = Math.fround;
  const out = new Float32Array(half);
  for (let j = 0; j < half; j++) {
    const posFreq = f(Math.pow(base, f(f(2 * j) / rotaryDim)));
    const extrapolation = f(1 / posFreq);
    const interpolation = f(1 / f(scaling.factor * posFreq));
    const ramp = Math.min(1, Math.max(0, f(f(j - low) / f(high - low))));
    const mask = f(1 - ramp);
    out[j] = f(f(interpolation * f(1 - mask)) + f(extrapolation * mask));
  }
  return out;
}

/**
 * Plain RoPE inverse frequencies `1/base^(2j/d)` (no scaling), f32.
 * @returns [d/2] f32
 * @throws ModelLoadError when rotaryDim is not a positive even number
 */
export function plainInvFreq(rotaryDim: number, base: number): Float32Array {
  checkRotaryDim(rotaryDim);
  const f = Math.fround;
  const out = new Float32Array(rotaryDim / 2);
  for (let j = 0; j < out.length; j++) out[j] = f(1 / f(Math.pow(base, f(f(2 * j) / rotaryDim))));
  return out;
}

/**
 * The rotary table DeepSeek uses for both MLA and the indexer: YaRN when `scaling` is given (cos/sin scaled by
 * `yarnGetMscale(s, mscale) / yarnGetMscale(s, mscaleAllDim)`), plain RoPE otherwise.
 * Source: sglang DeepseekScalingRotaryEmbedding (`_compute_cos_sin_cache`).
 * @throws ModelLoadError on a bad rotary dim
 */
export function deepseekRotaryTable(rotaryDim: number, base: number, scaling: YarnScaling | null): RotaryTable {
  if (scaling === null) return { invFreq: plainInvFreq(rotaryDim, base), rotaryDim, cosSinScale: 1 };
  const cosSinScale = yarnGetMscale(scaling.factor, scaling.mscale) / yarnGetMscale(scaling.factor, scaling.mscaleAllDim);
  return { invFreq: yarnInvFreq(rotaryDim, base, scaling), rotaryDim, cosSinScale: Math.fround(cosSinScale) };
}

/**
 * MLA softmax scale: `qkHeadDim^(−1/2) · yarnGetMscale(s, mscaleAllDim)²` when YaRN scaling is present
 * (model-spec.md §3.5; sglang deepseek_v2.py DeepseekV2AttentionMLA `scaling`).
 * @param qkHeadDim qk_nope_head_dim + qk_rope_head_dim
 */
export function deepseekSoftmaxScale(qkHeadDim: number, scaling: YarnScaling | null): number {
  let scale = 1 / Math.sqrt(qkHeadDim);
  if (scaling !== null) {
    const m = yarnGetMscale(scaling.factor, scaling.mscaleAllDim);
    scale *= m * m;
  }
  return scale;
}

/**
 * cos and sin of every (token, pair): `θ = f32(pos·invFreq_j)`, then `cos(θ)·cosSinScale`, `sin(θ)·cosSinScale`.
 * @param positions [numTokens] i32 absolute positions
 * @returns cos, sin: [numTokens, rotaryDim/2] f32 each
 */
export function rotaryCosSin(table: RotaryTable, positions: Int32Array): { cos: Float32Array; sin: Float32Array } {
  const half = table.rotaryDim / 2;
  const cos = new Float32Array(positions.length * half);
  const sin = new Float32Array(positions.length * half);
  for (let t = 0; t < positions.length; t++) {
    for (let j = 0; j < half; j++) {
      const theta = Math.fround(positions[t] * table.invFreq[j]);
      cos[t * half + j] = Math.fround(Math.cos(theta)) * table.cosSinScale;
      sin[t * half + j] = Math.fround(Math.sin(theta)) * table.cosSinScale;
    }
  }
  return { cos, sin };
}

/**
 * Rotates, in place, the dims [offset, offset + rotaryDim) of every head of every token.
 * - interleaved (GPT-J): pairs (2j, 2j+1) — DeepSeek MLA q_rope / k_rope.
 * - neox (half-split): pairs (j, j + d/2) — DeepSeek DSA indexer q/k (first rotaryDim dims of each head).
 * `x'_a = x_a·cos − x_b·sin`, `x'_b = x_b·cos + x_a·sin` (model-spec.md §1.5).
 * @param x [numTokens, numHeads, headDim] f32, modified in place
 * @param cos [numTokens, rotaryDim/2] f32 from rotaryCosSin
 * @param sin [numTokens, rotaryDim/2] f32
 */
export function applyRotaryPairs(
  x: Float32Array, numTokens: number, numHeads: number, headDim: number, offset: number,
  rotaryDim: number, cos: Float32Array, sin: Float32Array, style: RotaryStyle,
): void {
  const half = rotaryDim / 2;
  for (let t = 0; t < numTokens; t++) {
    const cs = t * half;
    for (let h = 0; h < numHeads; h++) {
      const base = (t * numHeads + h) * headDim + offset;
      for (let j = 0; j < half; j++) {
        const ia = style === 'interleaved' ? base + 2 * j : base + j;
        const ib = style === 'interleaved' ? ia + 1 : ia + half;
        const a = x[ia];
        const b = x[ib];
        const c = cos[cs + j];
        const s = sin[cs + j];
        x[ia] = a * c - b * s;
        x[ib] = b * c + a * s;
      }
    }
  }
}

function checkRotaryDim(rotaryDim: number): void {
  if (!Number.isInteger(rotaryDim) || rotaryDim <= 0 || rotaryDim % 2 !== 0) {
    throw new ModelLoadError(`config.json: qk_rope_head_dim (rotary dim) must be a positive even integer, got ${rotaryDim}`);
  }
}
