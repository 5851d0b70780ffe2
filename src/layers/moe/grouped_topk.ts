// DeepSeek-V3 router: sigmoid scores, e_score_correction_bias for selection only, group-limited top-k
// ("noaux_tc"), renormalisation and the routed scaling factor. Pure f32 maths; knows nothing of weights files.
//
// Formulas: model-spec.md §3.9; upstream python/sglang/srt/layers/moe/topk.py (biased_grouped_topk_impl) and
// DeepSeek-V3 inference/model.py (Gate.forward).
import { InternalError } from '../../common/index.js';

/** Routing hyper-parameters (HF config.json names in brackets). */
export interface GroupedTopKConfig {
  /** [num_experts_per_tok] experts chosen per token. */
  readonly topK: number;
  /** [n_group] expert groups; numExperts must be divisible by it. */
  readonly numExpertGroups: number;
  /** [topk_group] groups kept per token. */
  readonly topKGroup: number;
  /** [norm_topk_prob] renormalise the selected (unbiased) scores to sum to 1. */
  readonly normTopKProb: boolean;
  /** [routed_scaling_factor] multiplier on the routed weights (2.5 for V3/V3.2). */
  readonly routedScalingFactor: number;
}

/** Routing decision of a batch of tokens. */
export interface TopKOutput {
  /** [numTokens, topK] i32 expert ids in selection order (largest biased score first). */
  readonly topKIds: Int32Array;
  /** [numTokens, topK] f32 combine weights (renormalised, × routedScalingFactor). */
  readonly topKWeights: Float32Array;
}

/**
 * Biased group-limited top-k over sigmoid router scores (model-spec.md §3.9 steps 2–7), per token:
 * 1. `s = sigmoid(z)`, `c = s + bias` (f32);
 * 2. group score = sum of the top-2 `c` in each group (top-1 when a group has one expert);
 * 3. keep the `topKGroup` best groups (ties: lower group index), mask the others;
 * 4. pick the `topK` largest `c` among kept experts (ties: lower expert id), in descending order;
 * 5. weights = unbiased `s` of the picks, divided by their sum when normTopKProb, × routedScalingFactor.
 * Each token is independent of the others (batch invariant).
 * @param routerLogits [numTokens, numExperts] f32 (gate GEMM output, f32)
 * @param bias [numExperts] f32 e_score_correction_bias, or null for none
 * @throws InternalError when the sizes are inconsistent (config validation should have caught it)
 */
export function biasedGroupedTopK(
  routerLogits: Float32Array, numTokens: number, numExperts: number, bias: Float32Array | null, cfg: GroupedTopKConfig,
): TopKOutput {
  const { topK, numExpertGroups, topKGroup } = cfg;
  if (routerLogits.length !== numTokens * numExperts) throw new InternalError(`biasedGroupedTopK: logits length ${routerLogits.length} != ${numTokens}×${numExperts}`);
  if (numExperts % numExpertGroups !== 0 || topKGroup > numExpertGroups || topKGroup < 1) {
    throw new InternalError(`biasedGroupedTopK: ${numExperts} experts, ${numExpertGroups} groups, topk_group ${topKGroup} inconsistent`);
  }
  const groupSize = numExperts / numExpertGroups;
  if (topK < 1 || topK > topKGroup * groupSize) throw new InternalError(`biasedGroupedTopK: top-k ${topK} exceeds the ${topKGroup * groupSize} experts of the kept groups`);
  if (bias !== null && bias.length !== numExperts) throw new InternalError(`biasedGroupedTopK: bias length ${bias.length} != ${numExperts}`);

  const topKIds = new Int32Array(numTokens * topK);
  const topKWeights = new Float32Array(numTokens * topK);
  const scores = new Float32Array(numExperts);
  const choice = new Float32Array(numExperts);
  const groupScore = new Float64Array(numExpertGroups);
  const groupKept = new Uint8Array(numExpertGroups);
  const f = Math.fround;
  for (let t = 0; t < numTokens; t++) {
    const row = t * numExperts;
    for (let e = 0; e < numExperts; e++) {
      scores[e] = f(1 / f(1 + f(Math.exp(-routerLogits[row + e]))));
      choice[e] = bias === null ? scores[e] : f(scores[e] + bias[e]);
    }
    // 2. group scores: sum of the two best biased scores of the group
    for (let g = 0; g < numExpertGroups; g++) {
      let best1 = -Infinity;
      let best2 = -Infinity;
      for (let e = g * groupSize; e < (g + 1) * groupSize; e++) {
        const v = choice[e];
        if (v > best1) { best2 = best1; best1 = v; } else if (v > best2) best2 = v;
      }
      groupScore[g] = groupSize >= 2 ? f(best1 + best2) : best1;
    }
    // 3. keep the best topKGroup groups
    groupKept.fill(0);
    for (let k = 0; k < topKGroup; k++) {
      let bestG = -1;
      for (let g = 0; g < numExpertGroups; g++) {
        if (!groupKept[g] && (bestG < 0 || groupScore[g] > groupScore[bestG])) bestG = g;
      }
      groupKept[bestG] = 1;
    }
    // 4. top-k experts among the kept groups, in descending biased score
    for (let k = 0; k < topK; k++) {
      let bestE = -1;
      for (let e = 0; e < numExperts; e++) {
        if (!groupKept[(e / groupSize) | 0] || Number.isNaN(choice[e])) continue;
        if (bestE < 0 || choice[e] > choice[bestE]) bestE = e;
      }
      topKIds[t * topK + k] = bestE;
      topKWeights[t * topK + k] = scores[bestE];
      choice[bestE] = NaN; // taken
    }
    // 5. renormalise (f32 sum in selection order) and scale
    const denom = cfg.normTopKProb ? f(sumF32(topKWeights, t * topK, topK)) : 1;
    for (let k = 0; k < topK; k++) {
      const i = t * topK + k;
      topKWeights[i] = f(f(topKWeights[i] / denom) * cfg.routedScalingFactor);
    }
  }
  return { topKIds, topKWeights };
}

function sumF32(a: Float32Array, start: number, n: number): number {
  let s = 0;
  for (let i = start; i < start + n; i++) s = Math.fround(s + a[i]);
  return s;
}
