// Architecture-neutral view of a Hugging Face config.json: the common fields typed, every field (known or not)
// kept in `raw`, `--json-model-override-args` merged on top. Model files read their own extra fields from `raw`
// through the typed getters below, which name config.json and the field on error.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { InvalidRequestError, ModelLoadError } from '../common/index.js';

/** quantization_config of an FP8 block-quantized checkpoint (model-spec §1.2, §2.2). */
export interface QuantConfig {
  /** "fp8" for the released checkpoints. */
  readonly quantMethod: string;
  /** [bn, bk] block of `weight_scale_inv` (default [128, 128]). */
  readonly weightBlockSize: readonly [number, number];
  /** Modules left unquantized (name fragments). */
  readonly modulesToNotConvert: readonly string[];
  /** Every field as in the file. */
  readonly raw: Readonly<Record<string, unknown>>;
}

/** Typed config. Fields every supported decoder-only model has; anything else: `raw` + the getters. */
export interface ModelConfig {
  /** Where it came from (for error messages): the config.json path, or '<inline>'. */
  readonly source: string;
  readonly architectures: readonly string[];
  readonly modelType: string;
  readonly hiddenSize: number;
  readonly numHiddenLayers: number;
  readonly numAttentionHeads: number;
  readonly numKeyValueHeads: number;
  /** head_dim when given, else hiddenSize / numAttentionHeads. */
  readonly headDim: number;
  readonly vocabSize: number;
  readonly rmsNormEps: number;
  readonly ropeTheta: number;
  readonly maxPositionEmbeddings: number;
  readonly tieWordEmbeddings: boolean;
  readonly quantization: QuantConfig | null;
  /** The merged JSON object, unknown fields included (never mutated). */
  readonly raw: Readonly<Record<string, unknown>>;
}

function fail(source: string, field: string, what: string): never {
  throw new ModelLoadError(`${source}: field '${field}' ${what}`, { file: source });
}

/**
 * A required or defaulted integer field of `cfg.raw`.
 * @throws ModelLoadError naming the file and field when missing (and no default) or not a non-negative integer
 */
export function configInt(cfg: Pick<ModelConfig, 'raw' | 'source'>, field: string, dflt?: number): number {
  const v = cfg.raw[field];
  if (v === undefined || v === null) {
    if (dflt !== undefined) return dflt;
    fail(cfg.source, field, 'is missing');
  }
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0) fail(cfg.source, field, `must be a non-negative integer, got ${JSON.stringify(v)}`);
  return v;
}

/** A required or defaulted finite number field. @throws ModelLoadError naming file and field */
export function configNumber(cfg: Pick<ModelConfig, 'raw' | 'source'>, field: string, dflt?: number): number {
  const v = cfg.raw[field];
  if (v === undefined || v === null) {
    if (dflt !== undefined) return dflt;
    fail(cfg.source, field, 'is missing');
  }
  if (typeof v !== 'number' || !Number.isFinite(v)) fail(cfg.source, field, `must be a number, got ${JSON.stringify(v)}`);
  return v;
}

/** A defaulted boolean field. @throws ModelLoadError naming file and field when not a boolean */
export function configBool(cfg: Pick<ModelConfig, 'raw' | 'source'>, field: string, dflt: boolean): boolean {
  const v = cfg.raw[field];
  if (v === undefined || v === null) return dflt;
  if (typeof v !== 'boolean') fail(cfg.source, field, `must be true or false, got ${JSON.stringify(v)}`);
  return v;
}

/** A required or defaulted string field. @throws ModelLoadError naming file and field */
export function configString(cfg: Pick<ModelConfig, 'raw' | 'source'>, field: string, dflt?: string): string {
  const v = cfg.raw[field];
  if (v === undefined || v === null) {
    if (dflt !== undefined) return dflt;
    fail(cfg.source, field, 'is missing');
  }
  if (typeof v !== 'string') fail(cfg.source, field, `must be a string, got ${JSON.stringify(v)}`);
  return v;
}

/**
 * Builds the typed config from a parsed config.json object.
 * @param raw the JSON object (after overrides)
 * @param source path shown in errors
 * @throws ModelLoadError naming the file and field for a missing or mistyped required field
 */
export function parseModelConfig(raw: Record<string, unknown>, source = '<inline>'): ModelConfig {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) throw new ModelLoadError(`${source}: config must be a JSON object`, { file: source });
  const c = { raw, source };
  const archs = raw.architectures;
  if (!Array.isArray(archs) || archs.length === 0 || !archs.every((a) => typeof a === 'string')) {
    fail(source, 'architectures', 'must be a non-empty list of strings');
  }
  const numAttentionHeads = configInt(c, 'num_attention_heads');
  const hiddenSize = configInt(c, 'hidden_size');
  if (numAttentionHeads === 0) fail(source, 'num_attention_heads', 'must be positive');
  let quantization: QuantConfig | null = null;
  const q = raw.quantization_config;
  if (q !== undefined && q !== null) {
    if (typeof q !== 'object' || Array.isArray(q)) fail(source, 'quantization_config', 'must be an object');
    const qr = q as Record<string, unknown>;
    const bs = qr.weight_block_size ?? [128, 128];
    if (!Array.isArray(bs) || bs.length !== 2 || !bs.every((x) => Number.isInteger(x) && (x as number) > 0)) {
      fail(source, 'quantization_config.weight_block_size', `must be two positive integers, got ${JSON.stringify(bs)}`);
    }
    const mods = qr.modules_to_not_convert ?? [];
    quantization = {
      quantMethod: typeof qr.quant_method === 'string' ? qr.quant_method : 'unknown',
      weightBlockSize: [bs[0] as number, bs[1] as number],
      modulesToNotConvert: Array.isArray(mods) ? mods.filter((m): m is string => typeof m === 'string') : [],
      raw: qr,
    };
  }
  return {
    source,
    architectures: archs as string[],
    modelType: configString(c, 'model_type', ''),
    hiddenSize,
    numHiddenLayers: configInt(c, 'num_hidden_layers'),
    numAttentionHeads,
    numKeyValueHeads: configInt(c, 'num_key_value_heads', numAttentionHeads),
    headDim: configInt(c, 'head_dim', Math.floor(hiddenSize / numAttentionHeads)),
    vocabSize: configInt(c, 'vocab_size'),
    rmsNormEps: configNumber(c, 'rms_norm_eps', 1e-6),
    ropeTheta: configNumber(c, 'rope_theta', 10000),
    maxPositionEmbeddings: configInt(c, 'max_position_embeddings', 4096),
    tieWordEmbeddings: configBool(c, 'tie_word_embeddings', false),
    quantization,
    raw,
  };
}

/**
 * Parses `--json-model-override-args` (a JSON object) — top-level keys replace those of config.json, as SGLang's
 * `hf_config.update(json.loads(...))` does (python/sglang/srt/configs/model_config.py).
 * @throws ModelLoadError when the text is not a JSON object
 */
export function parseOverrideArgs(json: string | undefined): Record<string, unknown> {
  if (json === undefined || json.trim() === '') return {};
  let v: unknown;
  try {
    v = JSON.parse(json);
  } catch (err) {
    throw new ModelLoadError(`--json-model-override-args is not valid JSON: ${(err as Error).message}`, {}, { cause: err });
  }
  if (v === null || typeof v !== 'object' || Array.isArray(v)) throw new ModelLoadError('--json-model-override-args must be a JSON object');
  return v as Record<string, unknown>;
}

/**
 * Reads `<modelPath>/config.json`, merges the overrides (top-level replace) and parses it.
 * @param overrides already parsed override object (see parseOverrideArgs), or a JSON string
 * @throws ModelLoadError naming config.json when missing, unreadable, not JSON, or lacking a required field
 */
export function loadModelConfig(modelPath: string, overrides: Record<string, unknown> | string = {}): ModelConfig {
  const path = join(modelPath, 'config.json');
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new ModelLoadError(`cannot read ${path}: ${(err as Error).message}`, { file: path }, { cause: err });
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    throw new ModelLoadError(`${path} is not valid JSON: ${(err as Error).message}`, { file: path }, { cause: err });
  }
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) throw new ModelLoadError(`${path}: config must be a JSON object`, { file: path });
  const ov = typeof overrides === 'string' ? parseOverrideArgs(overrides) : overrides;
  return parseModelConfig({ ...(raw as Record<string, unknown>), ...ov }, path);
}

/** True when an SGLang boolean env var is set to a true value (`1`, `true`, `yes`, `y`, any case). */
function envFlag(env: NodeJS.ProcessEnv, name: string): boolean {
  return ['1', 'true', 'yes', 'y'].includes((env[name] ?? '').trim().toLowerCase());
}

/**
 * The serving context length: `--context-length` when given, else the model's derived context length
 * (max_position_embeddings). A `--context-length` above the derived one is refused, as SGLang does, unless the env
 * var SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN is true, in which case `warn` receives the warning and the
 * requested value is used. Source: python/sglang/srt/configs/model_config.py (ModelConfig._derive_context_length).
 * @param derived the model's context length in tokens (max_position_embeddings)
 * @param requested `--context-length` in tokens, or null
 * @param warn receives the warning when a longer context is allowed by the env var
 * @returns the context length in tokens
 * @throws InvalidRequestError (param `context-length`) when `requested` > `derived` without the env var
 */
export function deriveContextLength(
  derived: number,
  requested: number | null | undefined,
  warn: (msg: string) => void = () => {},
  env: NodeJS.ProcessEnv = process.env,
): number {
  if (requested === null || requested === undefined) return derived;
  if (requested <= derived) return requested;
  const msg = `Warning: User-specified context_length (${requested}) is greater than the derived context_length (${derived}). ` +
    'This may lead to incorrect model outputs or CUDA errors. Note that the derived context_length may differ from ' +
    "max_position_embeddings in the model's config.";
  if (envFlag(env, 'SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN')) {
    warn(msg);
    return requested;
  }
  throw new InvalidRequestError(`${msg} To allow overriding this maximum, set the env var SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1`, 'context-length');
}
