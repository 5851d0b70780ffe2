// The draft model of speculative decoding and its KV pool (SGLang speculative/eagle_worker.py, standalone_worker.py).
// EAGLE / NEXTN: DeepSeek's MTP layer (`model.layers.{num_hidden_layers}`, model-spec.md §3.10) reads the token and
// the target's hidden state of the previous position; STANDALONE: any causal LM of the same vocabulary reads tokens
// only. The draft always runs on this thread, unsharded (under --tp the target fans out to its ranks; the draft is
// small). Its KV pool is indexed by the target's locs shifted by `locOffset`: locs [1, locOffset) are scratch slots for
// the transient draft-step tokens (serving-spec §4.2 step 1), so the pool commits memory only as the target's does.
import { InvalidRequestError, UnsupportedFeatureError } from '../common/index.js';
import type { KvCacheDtype } from '../common/index.js';
import type { ForwardBatch } from '../layers/index.js';
import { KVPool, kvBytesPerToken, type KVPoolLayout } from '../mem_cache/index.js';
import { mtpLayerOf, type CausalLM, type DeepseekMtpLayer } from '../models/index.js';
import type { ForwardModel } from '../executor/index.js';

/** One draft forward's output. */
export interface DraftOutput {
  /** [numLogitRows, vocabSize] f32 logits of batch.logitRows. */
  readonly logits: Float32Array;
  /** [numLogitRows, hiddenSize] f32 the draft's output hidden states (EAGLE: the next step's hidden input), else null. */
  readonly hidden: Float32Array | null;
}

/** A draft model with its KV pool. */
export interface DraftModel {
  readonly algorithm: 'EAGLE' | 'STANDALONE';
  /** True when each draft token pairs with a hidden state (EAGLE). */
  readonly needsHidden: boolean;
  readonly vocabSize: number;
  readonly kvPool: KVPool;
  /** Draft-pool loc of target loc 0 (scratch locs are [1, locOffset)). */
  readonly locOffset: number;
  /**
   * Runs one draft forward (batch.kvPool must be this.kvPool, locs already shifted by locOffset).
   * @param hiddenIn [numTokens, hiddenSize] f32 (EAGLE), null for STANDALONE
   */
  forward(batch: ForwardBatch, hiddenIn: Float32Array | null): DraftOutput;
}

/** The KV layout a draft needs (for memory accounting before the pools exist). */
export function draftKvLayout(model: CausalLM | ForwardModel, algorithm: 'EAGLE' | 'STANDALONE', kvCacheDtype: KvCacheDtype = 'auto'): KVPoolLayout {
  if (algorithm === 'EAGLE') return requireMtp(model as CausalLM).kvPoolLayout(kvCacheDtype);
  return model.kvPoolLayout(kvCacheDtype);
}

/** Bytes per token of a draft's KV layout (added to the target's in the pool sizing). */
export function draftKvBytesPerToken(layout: KVPoolLayout): number {
  return kvBytesPerToken(layout);
}

function requireMtp(model: CausalLM): DeepseekMtpLayer {
  const mtp = mtpLayerOf(model);
  if (!mtp) {
    throw new UnsupportedFeatureError(
      `--speculative-algorithm EAGLE needs the checkpoint's MTP layer (model.layers.{num_hidden_layers} with eh_proj, as DeepSeek-V3/V3.2 ship it); ` +
        `${model.config.architectures[0] ?? 'this model'} has none here. Use --speculative-algorithm STANDALONE --speculative-draft-model-path DIR for a separate draft model.`,
    );
  }
  return mtp;
}

/** Options of createDraftModel. */
export interface DraftModelOptions {
  readonly algorithm: 'EAGLE' | 'STANDALONE';
  /** EAGLE: a (unsharded) DeepSeek model holding the MTP layer; STANDALONE: the draft causal LM. */
  readonly model: CausalLM | ForwardModel;
  readonly vocabSize: number;
  /** The target's vocabulary (STANDALONE must match). */
  readonly targetVocabSize: number;
  /** The target pool's maxLocs. */
  readonly targetMaxLocs: number;
  /** Scratch slots for draft-step tokens (≥ max batch · topk · (steps − 1)). */
  readonly scratchLocs: number;
  readonly kvCacheDtype?: KvCacheDtype;
  /** KV storage allocator (Ops.allocateKvBuffer). */
  readonly allocKv?: (n: number) => Float32Array;
}

/**
 * Builds the draft model and its KV pool.
 * @throws UnsupportedFeatureError when EAGLE has no MTP layer; InvalidRequestError when a STANDALONE draft's
 *   vocabulary differs from the target's
 */
export function createDraftModel(o: DraftModelOptions): DraftModel {
  const dtype = o.kvCacheDtype ?? 'auto';
  const locOffset = o.scratchLocs + 1;
  const maxLocs = o.targetMaxLocs + locOffset;
  const mkPool = (layout: KVPoolLayout): KVPool => new KVPool(layout, maxLocs, Math.min(maxLocs, 64 + locOffset), o.allocKv);
  if (o.algorithm === 'EAGLE') {
    const mtp = requireMtp(o.model as CausalLM);
    const kvPool = mkPool(mtp.kvPoolLayout(dtype));
    return {
      algorithm: 'EAGLE', needsHidden: true, vocabSize: o.targetVocabSize, kvPool, locOffset,
      forward: (batch, hiddenIn) => {
        const out = mtp.forward({ ...batch, captureHiddenStates: true }, hiddenIn!);
        return { logits: out.logits, hidden: out.hiddenStates ?? null };
      },
    };
  }
  if (o.vocabSize !== o.targetVocabSize) {
    throw new InvalidRequestError(`--speculative-draft-model-path: the draft's vocab_size ${o.vocabSize} differs from the target's ${o.targetVocabSize} (a draft model shares the target's tokenizer)`, 'speculative_draft_model_path');
  }
  const model = o.model as ForwardModel;
  const kvPool = mkPool(model.kvPoolLayout(dtype));
  return {
    algorithm: 'STANDALONE', needsHidden: false, vocabSize: o.vocabSize, kvPool, locOffset,
    forward: (batch) => ({ logits: model.forward(batch).logits, hidden: null }),
  };
}
