// The contract every model class implements (CausalLM) and how it is described to the registry, the loader
// and tiny_weights (ModelDefinition). Knows no concrete model.
import type { KvCacheDtype } from '../common/index.js';
import type { ModelConfig } from '../config/index.js';
import type { Ops } from '../kernels/index.js';
import type { ForwardBatch, ForwardOutput, ParallelGroups, PipelineStage } from '../layers/index.js';
import type { KVPoolLayout } from '../mem_cache/index.js';
import type { TensorSpec, WeightStore } from './weights.js';

/**
 * A constructed model with its weights. `forward` runs one step over a flat multi-request batch (any ForwardMode),
 * writes every token's K/V at `batch.outCacheLoc` in `batch.kvPool` (built from `kvPoolLayout()`), and returns the
 * logits of `batch.logitRows`. Batch invariant: a row's outputs do not depend on the other rows.
 */
export interface CausalLM {
  readonly config: ModelConfig;
  /** KV pool buffers per layer this model reads and writes. */
  /** The KV pool this model writes, its buffers in the codec of `kvCacheDtype` (default 'auto': f32). */
  kvPoolLayout(kvCacheDtype?: KvCacheDtype): KVPoolLayout;
  /**
   * @throws InternalError on inconsistent batch geometry (a caller bug)
   */
  forward(batch: ForwardBatch): ForwardOutput;
}

/** Options for `ModelDefinition.create`. */
export interface CreateModelOptions {
  readonly ops: Ops;
  /** This rank's TP/EP place (default: one rank); the weights are then this rank's shards (shardTensors). */
  readonly parallel?: ParallelGroups;
  /**
   * Pipeline parallelism: this rank's stage (default: the whole model). The model then holds only the stage's decoder
   * layers (its KV pool too), the embedding on the first stage, the final norm and LM head on the last; a stage after
   * the first reads batch.ppHiddenIn, a stage before the last returns ppHiddenOut instead of logits.
   */
  readonly stage?: PipelineStage;
}

/** Everything the registry knows about one architecture. */
export interface ModelDefinition {
  /** HF `architectures` values handled (first one is the canonical name). */
  readonly architectures: readonly string[];
  /** Names accepted by `tsglang make-tiny --arch` (e.g. 'minimax-m2'). */
  readonly tinyArchNames: readonly string[];
  /**
   * Every tensor the checkpoint must hold, with shapes from the config. Validates the config fields it reads.
   * @throws ModelLoadError naming config.json and the field for an unsupported or inconsistent config
   */
  expectedTensors(config: ModelConfig): TensorSpec[];
  /**
   * Under TP/EP (tp_size > 1): the tensors one rank loads — expectedTensors with each split tensor's `shard` set and
   * tensors the rank does not hold (other ranks' experts) left out. Absent = the architecture has no TP layout.
   * @throws InvalidRequestError naming --tp-size / --ep-size and the numbers when the config does not split that way
   */
  shardTensors?(config: ModelConfig, specs: readonly TensorSpec[], parallel: ParallelGroups): TensorSpec[];
  /** True when create() honours CreateModelOptions.stage (pipeline parallelism); absent = the model runs whole only. */
  readonly pipelineStages?: boolean;
  /** Builds the model from loaded weights (all of expectedTensors present and shape-checked). */
  create(config: ModelConfig, weights: WeightStore, options: CreateModelOptions): CausalLM;
  /**
   * A config.json object (real field names, shrunk sizes) for make-tiny.
   * @throws InvalidRequestError for an unknown preset
   */
  tinyConfig(preset: string): Record<string, unknown>;
}
