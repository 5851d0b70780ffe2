// DeepSeek YaRN RoPE ("deepseek_yarn"): the inv_freq table, the cos/sin multiplier (mscale), the attention
// softmax-scale correction, and the two rotation layouts (GPT-J interleaved for MLA, NeoX half-split for the
// DSA indexer, applied by Ops.rope). Pure maths; knows nothing of checkpoints or batches.
//
// Formulas: model-spec.md §1.5, §3.4, §3.5; upstream python/sglang/srt/layers/rotary_embedding.py
// (DeepseekScalingRotaryEmbedding, _yarn_find_correction_range, _yarn_linear_ramp_mask, yarn_get_mscale) and
// python/sglang/srt/models/deepseek_v2.py (softmax scale), YaRN paper (Peng et al. 2023, arXiv:2309.00071).
import { ModelLoadError } from '../common/index.js';
import { ropeInvFreq } from '../kernels/index.js';
import type { RopeParams, RopeStyle } from '../kernels/index.js';

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
 * The rotary table DeepSeek uses for both MLA and the indexer: YaRN when `scaling` is given (cos/sin scaled by
 * `yarnGetMscale(s, mscale) / yarnGetMscale(s, mscaleAllDim)`), plain RoPE otherwise.
 * Source: sglang DeepseekScalingRotaryEmbedding (`_compute_cos_sin_cache`).
 * @throws ModelLoadError on a bad rotary dim
 */
export function deepseekRotaryTable(rotaryDim: number, base: number, scaling: YarnScaling | null): RotaryTable {
  if (scaling === null) return { invFreq: (checkRotaryDim(rotaryDim), ropeInvFreq(base, rotaryDim)), rotaryDim, cosSinScale: 1 };
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
 * The kernel-level rope parameters of a DeepSeek rotary table in a given layout: `interleaved` for MLA q_rope/k_rope,
 * `neox` for the DSA indexer (model-spec.md §3.4 step 6). Apply with `Ops.rope`.
 */
export function deepseekRopeParams(table: RotaryTable, style: RopeStyle): RopeParams {
  return { invFreq: table.invFreq, rotaryDim: table.rotaryDim, style, mscale: table.cosSinScale };
}

function checkRotaryDim(rotaryDim: number): void {
  if (!Number.isInteger(rotaryDim) || rotaryDim <= 0 || rotaryDim % 2 !== 0) {
    throw new ModelLoadError(`config.json: qk_rope_head_dim (rotary dim) must be a positive even integer, got ${rotaryDim}`);
  }
}
