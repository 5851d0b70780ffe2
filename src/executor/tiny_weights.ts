// Deterministic tiny random checkpoints for any registered architecture, generated from the model's own
// TensorSpec list (so every size comes from the config): tests, make-tiny, the embedded default model.
// Each tensor's values depend only on (seed, tensor name), not on the other tensors or on how it is stored.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { FP8_E4M3_TO_F32, Rng, f32ToBf16, makeDirs, numel } from '../common/index.js';
import { parseModelConfig } from '../config/index.js';
import type { ModelConfig } from '../config/index.js';
import { getTinyModelDefinition, scaleInvName, writeCheckpoint } from '../models/index.js';
import type { StoredAs, TensorSpec, TensorToWrite } from '../models/index.js';

/** Options of generateTinyTensors. */
export interface TinyWeightsOptions {
  /** PRNG seed (default 0). */
  readonly seed?: number;
  /** Storage per tensor (default: spec.storedAs). E.g. store some FP8 linears as BF16. */
  readonly storedAs?: (spec: TensorSpec) => StoredAs;
  /**
   * Round FP8 block scales to powers of two, so FP8 values (4 significant bits) are exactly representable in BF16:
   * the same weights then load bit-identically whether stored as FP8, BF16 or F32 (tests).
   */
  readonly pow2Scales?: boolean;
  /**
   * Edits a tensor's freshly initialized values in place, before FP8 quantization and storage (e.g. the embedded
   * default model's EOS shaping, cli/embedded_model.ts). Called once per spec.
   * @param values [...spec.shape] f32, row-major
   */
  readonly adjustValues?: (spec: TensorSpec, values: Float32Array) => void;
}

/** Options of writeTinyCheckpoint. */
export interface TinyCheckpointOptions extends TinyWeightsOptions {
  /** Config preset of the architecture (default 'tiny'). */
  readonly preset?: string;
  /** Top-level config.json fields replacing the preset's (e.g. vocab_size to match a tokenizer). */
  readonly configOverrides?: Record<string, unknown>;
  /** 1 = single model.safetensors; n > 1 = n shards + model.safetensors.index.json (default 2). */
  readonly numShards?: number;
}

/** What writeTinyCheckpoint wrote. */
export interface TinyCheckpoint {
  readonly dir: string;
  /** The config.json object written. */
  readonly config: Record<string, unknown>;
  /** File names written in `dir` (config.json, shards, index). */
  readonly files: string[];
}

/**
 * Random tensors for `specs`, encoded as they would be stored (FP8 weights followed by their `_scale_inv`).
 * Init: linear N(0,1)/sqrt(K); embedding N(0,1); norm 1 + 0.1·N; norm_bias 0.1·N; router_bias 0.05·N.
 * @param config for the FP8 block size (quantization_config.weight_block_size, default [128, 128])
 */
export function generateTinyTensors(specs: readonly TensorSpec[], config: ModelConfig, options: TinyWeightsOptions = {}): TensorToWrite[] {
  const seed = options.seed ?? 0;
  const block = config.quantization?.weightBlockSize ?? [128, 128];
  const out: TensorToWrite[] = [];
  for (const spec of specs) {
    const rng = new Rng(hashSeed(seed, spec.name));
    const n = numel(spec.shape);
    let values: Float32Array = new Float32Array(n);
    const fanIn = spec.shape[spec.shape.length - 1];
    for (let i = 0; i < n; i++) {
      const g = rng.nextGaussian();
      switch (spec.init) {
        case 'linear': values[i] = g / Math.sqrt(fanIn); break;
        case 'embedding': values[i] = g; break;
        case 'norm': values[i] = 1 + 0.1 * g; break;
        case 'norm_bias': values[i] = 0.1 * g; break;
        case 'router_bias': values[i] = 0.05 * g; break;
      }
    }
    options.adjustValues?.(spec, values);
    let fp8: { codes: Uint8Array; scale: Float32Array; scaleShape: [number, number] } | null = null;
    if (spec.storedAs === 'fp8') {
      fp8 = quantizeFp8Block(values, spec.shape[0], spec.shape[1], block, options.pow2Scales ?? false);
      values = dequantize(fp8.codes, fp8.scale, spec.shape[0], spec.shape[1], block);
    }
    const target = options.storedAs?.(spec) ?? spec.storedAs;
    if (target === 'fp8') {
      if (!fp8) fp8 = quantizeFp8Block(values, spec.shape[0], spec.shape[1], block, options.pow2Scales ?? false);
      out.push({ name: spec.name, dtype: 'f8_e4m3', shape: spec.shape, data: fp8.codes });
      out.push({ name: scaleInvName(spec.name), dtype: 'f32', shape: fp8.scaleShape, data: new Uint8Array(fp8.scale.buffer) });
    } else if (target === 'bf16') {
      const bits = new Uint16Array(n);
      for (let i = 0; i < n; i++) bits[i] = f32ToBf16(values[i]);
      out.push({ name: spec.name, dtype: 'bf16', shape: spec.shape, data: new Uint8Array(bits.buffer) });
    } else {
      out.push({ name: spec.name, dtype: 'f32', shape: spec.shape, data: new Uint8Array(values.buffer) });
    }
  }
  return out;
}

/**
 * Writes a tiny random checkpoint of a registered architecture: config.json (the preset, every released field,
 * overrides on top) and sharded safetensors with an index. Weights only: tokenizer files and the chat template
 * are added by the caller (make-tiny's hook).
 * @param arch a `make-tiny --arch` name, e.g. 'minimax-m2'
 * @throws InvalidRequestError for an unknown arch or preset; ModelLoadError for an invalid resulting config
 */
export function writeTinyCheckpoint(arch: string, outDir: string, options: TinyCheckpointOptions = {}): TinyCheckpoint {
  const def = getTinyModelDefinition(arch);
  const raw = { ...def.tinyConfig(options.preset ?? 'tiny'), ...(options.configOverrides ?? {}) };
  makeDirs(outDir);
  const configPath = join(outDir, 'config.json');
  const config = parseModelConfig(raw, configPath);
  const tensors = generateTinyTensors(def.expectedTensors(config), config, options);
  writeFileSync(configPath, JSON.stringify(raw, null, 2) + '\n');
  const files = ['config.json', ...writeCheckpoint(outDir, tensors, options.numShards ?? 2)];
  return { dir: outDir, config: raw, files };
}

/** FNV-1a of the name mixed with the seed: an independent stream per tensor. */
function hashSeed(seed: number, name: string): number {
  let h = 0x811c9dc5 ^ (seed >>> 0);
  for (let i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 0x01000193);
  return (h >>> 0) + Math.floor(seed / 4294967296) * 4294967296;
}

/** Positive finite e4m3 values by code 0..0x7e (monotonically increasing). */
const FP8_POS = FP8_E4M3_TO_F32.subarray(0, 0x7f);

/** Nearest e4m3fn code (round half to even, saturating at ±448) by binary search. */
function encodeFp8(x: number): number {
  const sign = x < 0 ? 0x80 : 0;
  const a = Math.min(Math.abs(x), 448);
  let lo = 0;
  let hi = 0x7e;
  while (hi - lo > 1) {
    const mid = (lo + hi) >> 1;
    if (FP8_POS[mid] <= a) lo = mid;
    else hi = mid;
  }
  const dLo = a - FP8_POS[lo];
  const dHi = FP8_POS[hi] - a;
  const code = dLo < dHi ? lo : dHi < dLo ? hi : (lo & 1) === 0 ? lo : hi;
  return sign | code;
}

/** Block-FP8 quantization: scale = amax/448 per block (or the next power of two ≥ it), codes = e4m3(v/scale). */
function quantizeFp8Block(v: Float32Array, rows: number, cols: number, block: readonly [number, number], pow2: boolean): { codes: Uint8Array; scale: Float32Array; scaleShape: [number, number] } {
  const [bn, bk] = block;
  const sr = Math.ceil(rows / bn);
  const sc = Math.ceil(cols / bk);
  const scale = new Float32Array(sr * sc);
  const codes = new Uint8Array(rows * cols);
  for (let bi = 0; bi < sr; bi++) {
    for (let bj = 0; bj < sc; bj++) {
      let amax = 0;
      for (let r = bi * bn; r < Math.min(rows, (bi + 1) * bn); r++) for (let c = bj * bk; c < Math.min(cols, (bj + 1) * bk); c++) amax = Math.max(amax, Math.abs(v[r * cols + c]));
      let s = Math.max(amax, 1e-10) / 448;
      if (pow2) s = 2 ** Math.ceil(Math.log2(s));
      s = Math.fround(s);
      scale[bi * sc + bj] = s;
      for (let r = bi * bn; r < Math.min(rows, (bi + 1) * bn); r++) for (let c = bj * bk; c < Math.min(cols, (bj + 1) * bk); c++) codes[r * cols + c] = encodeFp8(v[r * cols + c] / s);
    }
  }
  return { codes, scale, scaleShape: [sr, sc] };
}

function dequantize(codes: Uint8Array, scale: Float32Array, rows: number, cols: number, block: readonly [number, number]): Float32Array {
  const sc = Math.ceil(cols / block[1]);
  const out = new Float32Array(rows * cols);
  for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) out[r * cols + c] = FP8_E4M3_TO_F32[codes[r * cols + c]] * scale[Math.floor(r / block[0]) * sc + Math.floor(c / block[1])];
  return out;
}
