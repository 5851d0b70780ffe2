// Loads a checkpoint directory into a model: config.json (+ overrides) → registry → expected tensors → validated,
// tensor-by-tensor reads → Ops.prepareWeight (one copy per weight) → ModelDefinition.create. Progress on stderr
// (a bar only on a TTY); every failure is a ModelLoadError naming the file and the tensor.
import { join } from 'node:path';
import cliProgress from 'cli-progress';
import { ModelLoadError, SILENT_LOGGER, UnsupportedFeatureError, numel, toF32 } from '../common/index.js';
import { SINGLE_RANK, stageHoldsTensor, type ParallelGroups, type PipelineStage } from '../layers/index.js';
import type { Logger } from '../common/index.js';
import { loadModelConfig } from '../config/index.js';
import type { ModelConfig } from '../config/index.js';
import type { BlockScale, Ops } from '../kernels/index.js';
import type { CausalLM, ModelDefinition } from './model_base.js';
import { getModelDefinition } from './registry.js';
import { Checkpoint, SAFETENSORS_INDEX } from './safetensors.js';
import { WeightStore, scaleInvName } from './weights.js';
import type { TensorShard, TensorSpec } from './weights.js';

/** Options of loadModel / loadWeights. */
export interface LoadOptions {
  readonly ops: Ops;
  /** `--json-model-override-args`: a JSON string or parsed object, merged over config.json (top-level keys). */
  readonly overrides?: Record<string, unknown> | string;
  /** Show a progress bar (default: only when stderr is a TTY). Never writes to stdout. */
  readonly progress?: boolean;
  readonly logger?: Logger;
  /** This rank's TP/EP place (default: one rank): only its shards are read (ModelDefinition.shardTensors). */
  readonly parallel?: ParallelGroups;
  /** This rank's pipeline stage (default: the whole model): only the stage's tensors are read (stageHoldsTensor). */
  readonly stage?: PipelineStage;
}

/** A loaded model with the config and definition it came from. */
export interface LoadedModel {
  readonly model: CausalLM;
  readonly config: ModelConfig;
  readonly definition: ModelDefinition;
  /** Checkpoint bytes this rank read (its shard of the weights, FP8 scales included). */
  readonly weightBytes: number;
}

/**
 * Loads `modelPath` (a local HF checkpoint directory).
 * @throws ModelLoadError for a missing/bad config.json, an unsupported architecture, or any checkpoint problem
 *   (missing shard, truncated file, bad header JSON, missing tensor, shape disagreeing with config.json)
 */
export function loadModel(modelPath: string, options: LoadOptions): LoadedModel {
  const config = loadModelConfig(modelPath, options.overrides ?? {});
  const definition = getModelDefinition(config);
  const parallel = options.parallel ?? SINGLE_RANK;
  let specs = definition.expectedTensors(config);
  if (parallel.tpSize > 1) {
    if (!definition.shardTensors) throw new UnsupportedFeatureError(`architecture ${config.architectures[0] ?? '?'} has no tensor-parallel layout (--tp-size ${parallel.tpSize})`);
    specs = definition.shardTensors(config, specs, parallel);
  }
  const stage = options.stage;
  if (stage) {
    if (!definition.pipelineStages) throw new UnsupportedFeatureError(`architecture ${config.architectures[0] ?? '?'} has no pipeline-parallel layout (--pp-size ${stage.ppSize})`);
    const tied = config.raw['tie_word_embeddings'] === true;
    specs = specs.filter((sp) => stageHoldsTensor(sp.name, stage, config.numHiddenLayers, tied));
  }
  // A model without tensors (the scripted test architecture) needs no safetensors files.
  if (specs.length === 0) return { model: definition.create(config, new WeightStore(), { ops: options.ops, parallel, ...(stage ? { stage } : {}) }), config, definition, weightBytes: 0 };
  const ckpt = Checkpoint.open(modelPath);
  try {
    const weights = loadWeights(ckpt, specs, config, options);
    loadKvCacheScales(ckpt, config.numHiddenLayers, weights);
    const model = definition.create(config, weights, { ops: options.ops, parallel, ...(stage ? { stage } : {}) });
    return { model, config, definition, weightBytes: weights.bytesLoaded };
  } finally {
    ckpt.close();
  }
}

/**
 * Reads and validates every expected tensor, one at a time (positional reads; each stored buffer is handed to
 * Ops.prepareWeight and then dropped, so at most one extra tensor is in flight). FP8 tensors are paired with their
 * `weight_scale_inv`. Tensors the checkpoint holds beyond the specs (e.g. MTP layers) are ignored; optional specs
 * absent from the checkpoint are skipped (check `weights.has(name)`).
 * @throws ModelLoadError naming file and tensor for missing tensors/scales, shape mismatches, and NaN/Inf in a norm
 *   weight or an FP8 block scale (checkFinite)
 */
export function loadWeights(ckpt: Checkpoint, specs: readonly TensorSpec[], config: ModelConfig, options: LoadOptions): WeightStore {
  const logger = options.logger ?? SILENT_LOGGER;
  const where = (name: string): string => ckpt.info(name)?.file ?? join(ckpt.dir, SAFETENSORS_INDEX);
  // 1. validate all names and shapes before reading any data
  const present = specs.filter((s) => !s.optional || ckpt.has(s.name));
  for (const spec of present) {
    const info = ckpt.info(spec.name);
    if (!info) {
      throw new ModelLoadError(`checkpoint ${ckpt.dir} is missing tensor '${spec.name}' (shape [${spec.shape.join(', ')}] expected from ${config.source})`, { file: ckpt.dir, tensor: spec.name });
    }
    if (!sameShape(info.shape, spec.shape)) {
      throw new ModelLoadError(`${info.file}: tensor '${spec.name}' has shape [${info.shape.join(', ')}] but ${config.source} implies [${spec.shape.join(', ')}]`, { file: info.file, tensor: spec.name });
    }
    if (info.dtype === 'f8_e4m3') scaleFor(ckpt, spec, config, where, false);
  }
  // 2. read
  const weights = new WeightStore();
  const showBar = options.progress ?? process.stderr.isTTY === true;
  const bar = showBar
    ? new cliProgress.SingleBar({ stream: process.stderr, format: 'Loading safetensors checkpoint tensors: {percentage}% |{bar}| {value}/{total} [{duration_formatted}<{eta_formatted}]', hideCursor: true }, cliProgress.Presets.shades_classic)
    : null;
  bar?.start(present.length, 0);
  const t0 = Date.now();
  try {
    for (const spec of present) {
      const alloc = (n: number): Uint8Array => options.ops.allocateWeightBytes(n);
      const sh = spec.shard;
      const { info, bytes } = sh ? ckpt.readSlice(spec.name, sh.dim, sh.start, sh.count, alloc) : ckpt.read(spec.name, alloc);
      const full = info.dtype === 'f8_e4m3' ? scaleFor(ckpt, spec, config, where, true) : undefined;
      const shape = sh ? info.shape.map((d, i) => (i === sh.dim ? sh.count : d)) : info.shape;
      if (spec.init === 'norm') checkFinite(toF32(bytes, info.dtype, numel(shape)), spec.name, info.file);
      if (full) checkFinite(full.data, scaleInvName(spec.name), ckpt.info(scaleInvName(spec.name))?.file ?? info.file);
      const scale = full && sh ? shardBlockScale(full, sh) : full;
      weights.bytesLoaded += bytes.byteLength + (scale ? scale.data.byteLength : 0);
      weights.set(spec.name, options.ops.prepareWeight({ name: spec.name, dtype: info.dtype, shape, bytes, scale }));
      bar?.increment();
    }
  } finally {
    bar?.stop();
  }
  logger.info(`Loaded ${present.length} tensors from ${ckpt.dir} in ${((Date.now() - t0) / 1000).toFixed(2)} s`);
  return weights;
}

/**
 * Refuses a tensor holding NaN or ±Infinity. Run on the norm weights and the FP8 block scales, which are small (a
 * hidden-size vector per norm; one scale per 128×128 block) and which, when corrupt, make every logit NaN so the model
 * serves token 0 forever. SGLang checks neither; the other weights are not scanned (that would read the whole
 * checkpoint once more).
 * @throws ModelLoadError naming the tensor, its file and the first bad element
 */
function checkFinite(values: Float32Array, tensor: string, file: string): void {
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (v - v !== 0) {
      throw new ModelLoadError(`${file}: tensor '${tensor}' holds ${String(v)} at element ${i}: the checkpoint is corrupt (norm weights and FP8 scales must be finite)`, { file, tensor });
    }
  }
}

/** gcd of two non-negative integers (gcd(b, 0) = b). */
function gcd(a: number, b: number): number {
  while (b !== 0) [a, b] = [b, a % b];
  return a;
}

/**
 * The block scale of a slice of an FP8 weight. A slice starting inside a scale block gets a finer block size, the
 * gcd of the block size and the slice start, so every block of the slice still lies inside one checkpoint block and
 * carries its scale: the slice dequantizes to exactly the values of the same elements of the whole tensor.
 * @param scale the whole tensor's scale ([ceil(N/bn), ceil(K/bk)], block [bn, bk])
 */
export function shardBlockScale(scale: BlockScale, shard: TensorShard): BlockScale {
  const [bn, bk] = scale.blockSize;
  const [sRows, sCols] = scale.shape;
  const b = gcd(shard.dim === 0 ? bn : bk, shard.start);
  const n = Math.ceil(shard.count / b);
  if (shard.dim === 0) {
    const data = new Float32Array(n * sCols);
    for (let i = 0; i < n; i++) data.set(scale.data.subarray(Math.floor((shard.start + i * b) / bn) * sCols, (Math.floor((shard.start + i * b) / bn) + 1) * sCols), i * sCols);
    return { data, shape: [n, sCols], blockSize: [b, bk] };
  }
  const data = new Float32Array(sRows * n);
  for (let r = 0; r < sRows; r++) for (let j = 0; j < n; j++) data[r * n + j] = scale.data[r * sCols + Math.floor((shard.start + j * b) / bk)];
  return { data, shape: [sRows, n], blockSize: [bn, b] };
}

function sameShape(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((d, i) => d === b[i]);
}

/** Validates (and, when `read`, reads) the block scale of an FP8 tensor. */
function scaleFor(ckpt: Checkpoint, spec: TensorSpec, config: ModelConfig, where: (n: string) => string, read: boolean): BlockScale | undefined {
  const sName = scaleInvName(spec.name);
  const file = where(spec.name);
  if (spec.shape.length !== 2) throw new ModelLoadError(`${file}: tensor '${spec.name}' is F8_E4M3 but not 2-D`, { file, tensor: spec.name });
  const sInfo = ckpt.info(sName);
  if (!sInfo) throw new ModelLoadError(`${file}: FP8 tensor '${spec.name}' has no '${sName}' in checkpoint ${ckpt.dir}`, { file, tensor: sName });
  const block = config.quantization?.weightBlockSize ?? [128, 128];
  const [n, k] = spec.shape;
  const want = [Math.ceil(n / block[0]), Math.ceil(k / block[1])];
  if (!sameShape(sInfo.shape, want)) {
    throw new ModelLoadError(`${sInfo.file}: tensor '${sName}' has shape [${sInfo.shape.join(', ')}], expected [${want.join(', ')}] for [${n}, ${k}] with weight_block_size [${block.join(', ')}]`, { file: sInfo.file, tensor: sName });
  }
  if (!read) return undefined;
  const { bytes } = ckpt.read(sName);
  return { data: toF32(bytes, sInfo.dtype, numel(sInfo.shape)), shape: [want[0], want[1]], blockSize: [block[0], block[1]] };
}

/** Canonical names under which per-layer KV-cache scales are kept in the WeightStore (SGLang's `self_attn.attn.k_scale`). */
export function kvScaleName(layer: number, which: 'k' | 'v'): string {
  return `model.layers.${layer}.self_attn.attn.${which}_scale`;
}

/**
 * Reads the FP8 KV-cache scales a checkpoint may hold, as SGLang's weight loaders remap them
 * (model_loader/weight_utils.py maybe_remap_kv_scale_name): per layer `self_attn.{k,v}_scale`,
 * `self_attn.{k,v}_proj.{k,v}_scale`, `self_attn.attn.{k,v}_scale`, or the older single `self_attn.kv_scale` (both).
 * Each found scale is stored as a 1-element f32 weight under kvScaleName(); absent scales stay absent (1.0).
 * @throws ModelLoadError for a scale tensor with more than one element or a non-positive / non-finite value
 */
export function loadKvCacheScales(ckpt: Checkpoint, numLayers: number, weights: WeightStore): void {
  for (let l = 0; l < numLayers; l++) {
    const p = `model.layers.${l}.self_attn.`;
    for (const which of ['k', 'v'] as const) {
      const name = [`${p}${which}_scale`, `${p}${which}_proj.${which}_scale`, `${p}attn.${which}_scale`, `${p}kv_scale`].find((n) => ckpt.has(n));
      if (name === undefined) continue;
      const { info, bytes } = ckpt.read(name);
      const n = numel(info.shape);
      const v = n === 1 ? toF32(bytes, info.dtype, 1)[0] : NaN;
      if (!(v > 0) || !Number.isFinite(v)) throw new ModelLoadError(`${info.file}: KV cache scale '${name}' must be one positive finite value (shape [${info.shape.join(', ')}])`, { file: info.file, tensor: name });
      weights.set(kvScaleName(l, which), { format: 'f32', shape: [1], data: Float32Array.of(v) });
    }
  }
}
