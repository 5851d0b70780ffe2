// Expert selection for sigmoid/softmax-scored MoE without groups (MiniMax-M2; SGLang `layers/moe/topk.py`
// select_experts → fused_topk with correction_bias). DeepSeek's grouped top-k lives in grouped_topk.ts.
import { InternalError } from '../../common/index.js';
import type { Ops } from '../../kernels/index.js';
import type { TopKOutput } from './grouped_topk.js';

/** Scoring function of the router (config `scoring_func`). */
export type ScoringFunc = 'sigmoid' | 'softmax';

/** Router options. */
export interface RouterOptions {
  readonly topK: number;
  readonly scoringFunc: ScoringFunc;
  /** [numExperts] f32 added to the scores for selection only (`e_score_correction_bias`), or null. */
  readonly correctionBias: Float32Array | null;
  /** Divide the selected (unbiased) scores by their sum. */
  readonly renormalize: boolean;
  /** Multiplier on the final weights (routed_scaling_factor; 1 for MiniMax-M2). */
  readonly routedScalingFactor: number;
}


/**
 * scores = sigmoid(logits) (or softmax); key = scores + bias (f32); top-k on key; weights = the selected unbiased
 * scores, renormalized (sum in f64, selection order), × routedScalingFactor (model-spec §2.4 MoE steps 2–4).
 * @param routerLogits [numTokens, numExperts] f32 (computed in f32)
 * @throws InternalError if the bias length differs from numExperts
 */
export function selectExperts(routerLogits: Float32Array, numTokens: number, numExperts: number, opts: RouterOptions, ops: Ops): TopKOutput {
  const { topK, correctionBias } = opts;
  const scores = opts.scoringFunc === 'sigmoid' ? ops.sigmoid(routerLogits) : ops.softmax(routerLogits, numTokens, numExperts);
  let key = scores;
  if (correctionBias) {
    if (correctionBias.length !== numExperts) throw new InternalError(`selectExperts: bias length ${correctionBias.length} != ${numExperts} experts`);
    key = new Float32Array(scores.length);
    for (let t = 0; t < numTokens; t++) for (let e = 0; e < numExperts; e++) key[t * numExperts + e] = scores[t * numExperts + e] + correctionBias[e];
  }
  const { indices } = ops.topk(key, numTokens, numExperts, topK);
  const topkWeights = new Float32Array(numTokens * topK);
  for (let t = 0; t < numTokens; t++) {
    let sum = 0;
    for (let j = 0; j < topK; j++) sum += scores[t * numExperts + indices[t * topK + j]];
    const norm = opts.renormalize ? 1 / sum : 1;
    for (let j = 0; j < topK; j++) topkWeights[t * topK + j] = scores[t * numExperts + indices[t * topK + j]] * norm * opts.routedScalingFactor;
  }
  return { topKIds: indices, topKWeights: topkWeights };
}
