// Speculative decoding configuration as SGLang resolves it (server_args.py _handle_speculative_decoding,
// auto_choose_speculative_params; serving-spec §4.1).
import { InvalidRequestError, UnsupportedFeatureError } from '../common/index.js';

/** The resolved speculative configuration. */
export interface SpecConfig {
  readonly algorithm: 'EAGLE' | 'STANDALONE';
  /** Draft depth (levels drafted per verify). */
  readonly numSteps: number;
  /** Branching factor (1 = a chain). */
  readonly topk: number;
  /** Tree nodes verified per request per step, the verified token included. */
  readonly numDraftTokens: number;
  readonly acceptThresholdSingle: number;
  readonly acceptThresholdAcc: number;
}

/** The flags as given (null = unset). */
export interface SpecFlags {
  readonly algorithm: string;
  readonly numSteps: number | null;
  readonly topk: number | null;
  readonly numDraftTokens: number | null;
  readonly acceptThresholdSingle?: number;
  readonly acceptThresholdAcc?: number;
}

/** Architectures whose checkpoints carry the MTP draft layer and get SGLang's (3, 1, 4) default. */
const DEEPSEEK_ARCHS = ['DeepseekV3ForCausalLM', 'DeepseekV32ForCausalLM', 'DeepseekV2ForCausalLM'];

/**
 * SGLang's resolution: NEXTN = EAGLE; unset (steps, topk, draft tokens) auto-chosen — DeepSeek V2/V3 (3, 1, 4),
 * other architectures (5, 4, 8); topk = 1 forces num_draft_tokens = steps + 1. Trees (topk > 1) need page_size 1
 * (SGLang builds them on flashinfer only when paged).
 * @param architecture the target's architectures[0]
 * @throws UnsupportedFeatureError for EAGLE3 / NGRAM; InvalidRequestError for values out of range
 */
export function resolveSpecConfig(f: SpecFlags, architecture: string, pageSize: number): SpecConfig {
  const algo = f.algorithm === 'NEXTN' ? 'EAGLE' : f.algorithm;
  if (algo !== 'EAGLE' && algo !== 'STANDALONE') {
    throw new UnsupportedFeatureError(`--speculative-algorithm ${f.algorithm} is not built in tsglang (EAGLE, NEXTN and STANDALONE are)`);
  }
  let steps = f.numSteps;
  let topk = f.topk;
  let draft = f.numDraftTokens;
  if (steps === null || topk === null || draft === null) {
    const [s, k, d] = DEEPSEEK_ARCHS.includes(architecture) ? [3, 1, 4] : [5, 4, 8];
    steps ??= s;
    topk ??= k;
    draft ??= d;
  }
  if (steps < 1) throw new InvalidRequestError(`--speculative-num-steps must be ≥ 1, got ${steps}`, 'speculative_num_steps');
  if (topk < 1) throw new InvalidRequestError(`--speculative-eagle-topk must be ≥ 1, got ${topk}`, 'speculative_eagle_topk');
  if (topk === 1) draft = steps + 1;
  const maxNodes = 1 + topk + (steps - 1) * topk * topk;
  if (draft < 2 || draft > maxNodes) {
    throw new InvalidRequestError(`--speculative-num-draft-tokens must be in [2, ${maxNodes}] for steps ${steps} and topk ${topk}, got ${draft}`, 'speculative_num_draft_tokens');
  }
  if (topk > 1 && pageSize > 1) {
    throw new UnsupportedFeatureError(`--speculative-eagle-topk ${topk} with --page-size ${pageSize}: tree drafts need page_size 1 (SGLang builds them paged only on flashinfer)`);
  }
  const single = f.acceptThresholdSingle ?? 1;
  const acc = f.acceptThresholdAcc ?? 1;
  if (!(single > 0 && single <= 1) || !(acc > 0 && acc <= 1)) {
    throw new InvalidRequestError('--speculative-accept-threshold-single / -acc must be in (0, 1]', 'speculative_accept_threshold');
  }
  return { algorithm: algo, numSteps: steps, topk, numDraftTokens: draft, acceptThresholdSingle: single, acceptThresholdAcc: acc };
}
