// The trained demo checkpoints (`make-tiny --preset demo`, the embedded default model): tiny MiniMax-M2 and
// DeepSeek-V3.2 models trained by scripts/demo_model/train.py on a synthetic corpus, committed in compact form under
// assets/demo/<arch>.safetensors and expanded here into a full Hugging Face checkpoint.
//
// Compact form (written by train.py): every tensor of the checkpoint in its checkpoint storage (FP8 e4m3 codes +
// `<name>_scale_inv` 128x128 block scales for the FP8 linears; F32 for the rest, holding values already rounded to
// BF16 where the checkpoint stores BF16), except `model.embed_tokens.weight` and `lm_head.weight`: BF16
// [numUsed + 1, hidden], the rows of the token ids in `demo.vocab_ids` (I32 [numUsed]) followed by one row shared by
// every other id of the vocabulary. The file's metadata holds `config` (config.json) and `training` (the run's
// figures: steps, seconds, final loss).
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { InvalidRequestError, ModelLoadError, f32ToBf16, makeDirs, numel } from '../common/index.js';
import { parseModelConfig } from '../config/index.js';
import { SafetensorsFile, getTinyModelDefinition, scaleInvName, writeCheckpoint } from '../models/index.js';
import type { TensorSpec, TensorToWrite } from '../models/index.js';
import type { TinyCheckpoint } from './tiny_weights.js';

/** Architectures (make-tiny --arch names) that have a trained demo checkpoint. */
export const DEMO_ARCHS: readonly string[] = ['minimax-m2', 'deepseek-v32'];

/** The vocabulary tensors stored compactly. */
const VOCAB_TENSORS = new Set(['model.embed_tokens.weight', 'lm_head.weight']);

/**
 * Path of the committed compact demo weights of `arch` (assets/demo/<arch>.safetensors in the package).
 * @throws InvalidRequestError for an architecture without a demo model
 */
export function demoAssetPath(arch: string): string {
  if (!DEMO_ARCHS.includes(arch)) throw new InvalidRequestError(`--preset demo exists for ${DEMO_ARCHS.join(', ')}, not '${arch}'`, 'preset');
  return fileURLToPath(new URL(`../../../assets/demo/${arch}.safetensors`, import.meta.url));
}

/** The training figures recorded by train.py (steps, seconds, final_loss, ...), or {} when absent. */
export function demoTrainingFigures(arch: string): Record<string, unknown> {
  const f = SafetensorsFile.open(demoAssetPath(arch));
  try {
    return f.metadata.training ? (JSON.parse(f.metadata.training) as Record<string, unknown>) : {};
  } finally {
    f.close();
  }
}

/**
 * Writes the demo checkpoint of `arch` into `outDir`: config.json (the trained config, `configOverrides` on top)
 * and safetensors shards with every tensor the architecture expects, vocabulary tensors expanded to
 * [vocab_size, hidden] BF16. Weights only: the caller adds the tokenizer files (the family's tiny tokenizer).
 * @throws InvalidRequestError for an architecture without a demo model; ModelLoadError when the asset is missing,
 *   malformed or lacks a tensor the architecture needs
 */
export function writeDemoCheckpoint(arch: string, outDir: string, options: { numShards?: number; configOverrides?: Record<string, unknown> } = {}): TinyCheckpoint {
  const path = demoAssetPath(arch);
  if (!existsSync(path)) throw new ModelLoadError(`demo weights not found: ${path} (committed under assets/demo/; retrain with scripts/demo_model/train.py)`, { file: path });
  const file = SafetensorsFile.open(path);
  try {
    if (typeof file.metadata.config !== 'string') throw new ModelLoadError(`${path}: metadata has no 'config'`, { file: path });
    const raw = { ...(JSON.parse(file.metadata.config) as Record<string, unknown>), ...(options.configOverrides ?? {}) };
    makeDirs(outDir);
    const configPath = join(outDir, 'config.json');
    const config = parseModelConfig(raw, configPath);
    const ids = new Int32Array(file.read('demo.vocab_ids').slice().buffer);
    const tensors: TensorToWrite[] = [];
    for (const spec of getTinyModelDefinition(arch).expectedTensors(config)) {
      if (!file.tensors.has(spec.name)) {
        if (spec.optional) continue;
        throw new ModelLoadError(`${path}: tensor ${spec.name} missing`, { file: path, tensor: spec.name });
      }
      if (VOCAB_TENSORS.has(spec.name)) tensors.push(expandVocab(file, spec, ids, path));
      else tensors.push(...storedTensors(file, spec, path));
    }
    writeFileSync(configPath, JSON.stringify(raw, null, 2) + '\n');
    return { dir: outDir, config: raw, files: ['config.json', ...writeCheckpoint(outDir, tensors, options.numShards ?? 1)] };
  } finally {
    file.close();
  }
}

/** A [V, D] BF16 vocabulary tensor from its compact rows: row ids[i] ← compact row i, every other row ← the last. */
function expandVocab(file: SafetensorsFile, spec: TensorSpec, ids: Int32Array, path: string): TensorToWrite {
  const info = file.tensors.get(spec.name)!;
  const [V, D] = spec.shape;
  if (info.dtype !== 'bf16' || info.shape.length !== 2 || info.shape[1] !== D || info.shape[0] !== ids.length + 1) {
    throw new ModelLoadError(`${path}: ${spec.name} must be BF16 [${ids.length + 1}, ${D}], got ${info.dtype} [${info.shape.join(', ')}]`, { file: path, tensor: spec.name });
  }
  const compact = new Uint16Array(file.read(spec.name).slice().buffer);
  const out = new Uint16Array(V * D);
  const shared = compact.subarray(ids.length * D, (ids.length + 1) * D);
  for (let r = 0; r < V; r++) out.set(shared, r * D);
  for (let i = 0; i < ids.length; i++) {
    if (ids[i] < 0 || ids[i] >= V) throw new ModelLoadError(`${path}: demo.vocab_ids holds ${ids[i]}, outside vocab_size ${V}`, { file: path });
    out.set(compact.subarray(i * D, (i + 1) * D), ids[i] * D);
  }
  return { name: spec.name, dtype: 'bf16', shape: spec.shape, data: new Uint8Array(out.buffer) };
}

/** The checkpoint tensors of one spec: FP8 codes + scales copied; F32 values written in the spec's storage. */
function storedTensors(file: SafetensorsFile, spec: TensorSpec, path: string): TensorToWrite[] {
  const info = file.tensors.get(spec.name)!;
  if (info.shape.join(',') !== spec.shape.join(',')) {
    throw new ModelLoadError(`${path}: ${spec.name} has shape [${info.shape.join(', ')}], the config needs [${spec.shape.join(', ')}]`, { file: path, tensor: spec.name });
  }
  if (spec.storedAs === 'fp8') {
    const scale = scaleInvName(spec.name);
    if (info.dtype !== 'f8_e4m3' || !file.tensors.has(scale)) throw new ModelLoadError(`${path}: ${spec.name} must be F8_E4M3 with ${scale}`, { file: path, tensor: spec.name });
    const s = file.tensors.get(scale)!;
    return [{ name: spec.name, dtype: 'f8_e4m3', shape: spec.shape, data: file.read(spec.name) }, { name: scale, dtype: s.dtype, shape: s.shape, data: file.read(scale) }];
  }
  if (info.dtype !== 'f32') throw new ModelLoadError(`${path}: ${spec.name} must be F32 in the compact file, got ${info.dtype}`, { file: path, tensor: spec.name });
  if (spec.storedAs === 'f32') return [{ name: spec.name, dtype: 'f32', shape: spec.shape, data: file.read(spec.name) }];
  const v = new Float32Array(file.read(spec.name).slice().buffer);
  const bits = new Uint16Array(numel(spec.shape));
  for (let i = 0; i < bits.length; i++) bits[i] = f32ToBf16(v[i]);
  return [{ name: spec.name, dtype: 'bf16', shape: spec.shape, data: new Uint8Array(bits.buffer) }];
}
