// Speculative decoding set-up of the engine core (serving-spec §4.1): which model the draft comes from, SGLang's
// resolved (steps, topk, draft tokens), the draft pool's share of the KV budget, and the SpecDecoder the scheduler
// drives. The draft always runs unsharded on the core thread: at tp 1 EAGLE drafts with the target's own MTP layer;
// under --tp (or with another --speculative-draft-model-path) the draft checkpoint is loaded once more here.
import { UnsupportedFeatureError, type KvCacheDtype, type Logger } from '../common/index.js';
import type { ForwardModel } from '../executor/index.js';
import { createOps } from '../kernels/index.js';
import { loadModel } from '../models/index.js';
import { SpecDecoder } from '../scheduler/index.js';
import { createDraftModel, draftKvBytesPerToken, draftKvLayout, resolveSpecConfig, type SpecConfig } from '../speculative/index.js';
import type { EngineOptions } from './types.js';

/** The model a draft is built from and its vocabulary. */
export interface DraftSource {
  readonly model: ForwardModel;
  readonly vocabSize: number;
  /** KV storage of the backend it was loaded on (when it was loaded here). */
  readonly allocKv?: (n: number) => Float32Array;
}

/**
 * Loads (or reuses) the draft's model when --speculative-algorithm is set; null otherwise.
 * @param target the target as loaded on this thread (rank 0's shard under TP)
 * @throws ModelLoadError for a draft checkpoint that does not load
 */
export function loadDraftSource(options: EngineOptions, target: { model: ForwardModel; vocabSize: number }, tpSize: number, logger: Logger): DraftSource | null {
  const algo = options.speculativeAlgorithm === 'NEXTN' ? 'EAGLE' : options.speculativeAlgorithm;
  if (algo !== 'EAGLE' && algo !== 'STANDALONE') return null; // unset, or refused by resolveSpecConfig
  const path = options.speculativeDraftModelPath ?? options.modelPath;
  if (algo === 'EAGLE' && tpSize === 1 && path === options.modelPath) return target;
  const ops = createOps({ ...(options.numThreads !== undefined ? { threads: options.numThreads } : {}), ...(options.kernelEnv ? { env: options.kernelEnv } : {}) });
  const d = loadModel(path, { ops, overrides: path === options.modelPath ? options.jsonModelOverrideArgs ?? {} : {}, logger });
  return { model: d.model, vocabSize: d.config.vocabSize, allocKv: (n) => ops.allocateKvBuffer(n) };
}

/** The resolved speculative configuration and the draft pool's KV bytes per token (0 when off). */
export interface SpecPlan {
  readonly cfg: SpecConfig;
  readonly draftBytesPerToken: number;
}

/**
 * SGLang's resolution of the flags for this target (null when speculation is off).
 * @throws UnsupportedFeatureError for EAGLE3 / NGRAM, EAGLE without an MTP layer, or an injected model
 */
export function planSpec(options: EngineOptions, draft: DraftSource | null, architecture: string, pageSize: number, kvCacheDtype: KvCacheDtype): SpecPlan | null {
  if (!options.speculativeAlgorithm) return null;
  const cfg = resolveSpecConfig({
    algorithm: options.speculativeAlgorithm, numSteps: options.speculativeNumSteps ?? null, topk: options.speculativeEagleTopk ?? null,
    numDraftTokens: options.speculativeNumDraftTokens ?? null, acceptThresholdSingle: options.speculativeAcceptThresholdSingle ?? 1,
    acceptThresholdAcc: options.speculativeAcceptThresholdAcc ?? 1,
  }, architecture, pageSize);
  if (!draft) throw new UnsupportedFeatureError('speculative decoding needs a loaded model (no draft for an injected model)');
  return { cfg, draftBytesPerToken: draftKvBytesPerToken(draftKvLayout(draft.model, cfg.algorithm, kvCacheDtype)) };
}

/**
 * The scheduler's SpecDecoder with the draft's pool (the target's token slots plus scratch slots for the draft steps
 * of a full batch).
 */
export function createSpecDecoder(
  plan: SpecPlan, draft: DraftSource, targetVocabSize: number, targetMaxLocs: number, maxRunningRequests: number, kvCacheDtype: KvCacheDtype,
  allocKv: ((n: number) => Float32Array) | undefined, logger: Logger,
): SpecDecoder {
  const { cfg } = plan;
  const alloc = draft.allocKv ?? allocKv;
  const model = createDraftModel({
    algorithm: cfg.algorithm, model: draft.model, vocabSize: draft.vocabSize, targetVocabSize, targetMaxLocs,
    scratchLocs: maxRunningRequests * cfg.topk * Math.max(0, cfg.numSteps - 1), kvCacheDtype, ...(alloc ? { allocKv: alloc } : {}),
  });
  logger.info(`Speculative decoding: ${cfg.algorithm} (num_steps=${cfg.numSteps}, eagle_topk=${cfg.topk}, num_draft_tokens=${cfg.numDraftTokens}), draft KV ${plan.draftBytesPerToken} bytes/token`);
  return new SpecDecoder(cfg, model, targetMaxLocs);
}
