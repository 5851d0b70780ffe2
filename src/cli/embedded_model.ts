// The embedded default model of `tsglang serve` (no --model-path): a tiny MiniMax-M2 checkpoint with a real
// tokenizer, generated once, deterministically, into <cacheDir>/<name>. It is written under a temporary name and
// renamed into place, so concurrent starts never see a half-written checkpoint. Its answers are gibberish (random
// weights) but every other part of the serving path is real.
//
// The trained demo models (`make-tiny --preset demo`, writeDemoModelWithTokenizer) are separate: see
// executor/demo_weights.ts.
//
// EOS shaping (why): a purely random model never samples EOS (1 token of 128832, with a logit like any other), so a
// request without max_tokens — the README's first curl — would run until the 4096-token context is full. The
// embedded default therefore gets weights that make its answers end: see EMBEDDED_EOS_SHAPING below (how).
import { existsSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { InvalidRequestError, makeDirs } from '../common/index.js';
import type { Logger } from '../common/index.js';
import { writeDemoCheckpoint, writeTinyCheckpoint } from '../executor/index.js';
import type { TinyCheckpointOptions } from '../executor/index.js';
import { tinyTokenizerFamily, tinyTokenizerSpec, writeTinyTokenizer } from '../tokenizer/index.js';

/** Directory name of the embedded model (bump the version when its content changes). */
export const EMBEDDED_MODEL_NAME = 'tiny-minimax-m2-v3';

/**
 * Context length of the embedded model: room for the seed examples (max_tokens 2048 plus the prompt) while a chat
 * request without max_tokens (generated until the context is full, as SGLang does) still ends in minutes.
 */
export const EMBEDDED_CONTEXT_LENGTH = 4096;


/** Parameters of shapeEosWeights (see EMBEDDED_EOS_SHAPING). */
export interface EosShaping {
  /** The EOS token id (generation_config eos_token_id). */
  readonly eosTokenId: number;
  /** Hidden coordinate reserved as a constant channel. */
  readonly channel: number;
  /** Value of that coordinate in every embedding row. */
  readonly channelValue: number;
  /** Factor on every other lm_head row: sharpens the temperature-1 distribution so EOS need not be the argmax. */
  readonly logitScale: number;
  /** The EOS row's weight on the channel: EOS logit ≈ eosWeight · channelValue / rms(final hidden state). */
  readonly eosWeight: number;
}

/**
 * EOS shaping of the embedded default (how). A constant channel carries a nearly constant EOS logit to the output:
 *  - hidden coordinate `channel` of every embedding row is `channelValue`, and every weight that writes into the
 *    residual stream (o_proj, experts' w2 / down_proj) has a zero row at `channel`, so the final hidden state holds
 *    exactly channelValue there; model.norm.weight[channel] = 1;
 *  - the lm_head row of EOS is zero except `eosWeight` at `channel`: its logit is eosWeight·channelValue/rms(h), which
 *    varies only with the RMS of the final hidden state (±8% measured), not with the token;
 *  - every other lm_head row is scaled by `logitScale` and has a zero at `channel` (no token gets a fixed bias).
 * Calibrated once on this checkpoint (temperature-1 decodes of chat prompts, 800 steps): EOS logit ≈ 14.6 against a
 * log-sum-exp of the other logits ≈ 20, i.e. EOS is sampled at ≈0.7% per step (answers of ~140 tokens on average, tens
 * to a few hundred typically), while greedy decoding picks EOS on ≈0.25% of steps (its logit rarely beats the maximum).
 * All values are exact in BF16 and the generation stays deterministic (same bytes every time).
 */
export const EMBEDDED_EOS_SHAPING: EosShaping = { eosTokenId: tinyTokenizerSpec('minimax-m2').eosTokenId, channel: 0, channelValue: 8, logitScale: 4.5, eosWeight: 2.75 };

/**
 * An adjustValues hook (executor/tiny_weights.ts) applying an EosShaping to a MiniMax-M2 / DeepSeek-style checkpoint
 * (tensor names model.embed_tokens / *.o_proj / *.w2 / *.down_proj / model.norm / lm_head; hidden size read from the
 * embedding and lm_head shapes [vocab, hidden]).
 * @throws InvalidRequestError (when called by the generator) if the EOS id or the channel is outside the shapes
 */
export function shapeEosWeights(shaping: EosShaping): NonNullable<TinyCheckpointOptions['adjustValues']> {
  const { eosTokenId, channel: k, channelValue, logitScale, eosWeight } = shaping;
  return (spec, v) => {
    const name = spec.name;
    const H = spec.shape[spec.shape.length - 1];
    if ((name === 'model.embed_tokens.weight' || name === 'lm_head.weight') && (k < 0 || k >= H)) {
      throw new InvalidRequestError(`EOS shaping: channel ${k} is outside hidden_size ${H} (${name})`, 'channel');
    }
    if (name === 'model.embed_tokens.weight') {
      for (let r = 0; r < spec.shape[0]; r++) v[r * H + k] = channelValue;
    } else if (/(o_proj|w2|down_proj)\.weight$/.test(name) && spec.shape.length === 2 && k < spec.shape[0]) {
      const cols = spec.shape[1];
      v.fill(0, k * cols, (k + 1) * cols);
    } else if (name === 'model.norm.weight') {
      v[k] = 1;
    } else if (name === 'lm_head.weight') {
      const V = spec.shape[0];
      if (eosTokenId < 0 || eosTokenId >= V) throw new InvalidRequestError(`EOS shaping: eos id ${eosTokenId} is outside the vocabulary [0, ${V})`, 'eosTokenId');
      for (let i = 0; i < v.length; i++) v[i] *= logitScale;
      for (let r = 0; r < V; r++) v[r * H + k] = 0;
      v.fill(0, eosTokenId * H, (eosTokenId + 1) * H);
      v[eosTokenId * H + k] = eosWeight;
    }
  };
}

/**
 * Writes a complete tiny checkpoint (weights + tokenizer + chat template) of `arch` into `dir`.
 * @returns the files written
 */
export function writeTinyModelWithTokenizer(arch: string, dir: string, options: { seed?: number; numShards?: number; configOverrides?: Record<string, unknown>; adjustValues?: TinyCheckpointOptions['adjustValues'] } = {}): string[] {
  const spec = tinyTokenizerSpec(arch === 'minimax-m2' ? 'minimax-m2' : arch === 'deepseek-v3' ? 'deepseek-v3' : 'deepseek-v32');
  const ckpt = writeTinyCheckpoint(arch, dir, {
    seed: options.seed ?? 0,
    numShards: options.numShards ?? 1,
    configOverrides: { ...spec.configOverrides, ...(options.configOverrides ?? {}) },
    adjustValues: options.adjustValues,
  });
  return [...ckpt.files, ...writeTinyTokenizer(dir, spec.family)];
}

/**
 * Sampling defaults of the demo checkpoints' generation_config.json (read as SGLang's `--sampling-defaults model`):
 * top_k 1, i.e. greedy unless a request sets top_k. The demo models are a few million parameters trained on a small
 * synthetic corpus; sampled at temperature 1 over the whole vocabulary their text falls apart, so the seed pages'
 * examples, which set no top_k, show what the models learned.
 */
export const DEMO_SAMPLING_DEFAULTS = { top_k: 1 } as const;

/**
 * Writes a demo checkpoint (trained weights + tokenizer + chat template) of `arch` into `dir`; generation_config.json
 * carries DEMO_SAMPLING_DEFAULTS.
 * @param arch 'minimax-m2' or 'deepseek-v32' (DEMO_ARCHS)
 * @returns the files written
 * @throws InvalidRequestError for an architecture without a demo model; ModelLoadError for a missing asset
 */
export function writeDemoModelWithTokenizer(arch: string, dir: string, options: { numShards?: number; configOverrides?: Record<string, unknown> } = {}): string[] {
  const ckpt = writeDemoCheckpoint(arch, dir, options);
  const files = writeTinyTokenizer(dir, tinyTokenizerFamily(arch));
  const genPath = join(dir, 'generation_config.json');
  writeFileSync(genPath, JSON.stringify({ ...(JSON.parse(readFileSync(genPath, 'utf8')) as Record<string, unknown>), ...DEMO_SAMPLING_DEFAULTS }, null, 2) + '\n');
  return [...ckpt.files, ...files];
}

/**
 * Returns the embedded model directory, generating it first if absent (atomic: temp dir + rename).
 * @param cacheDir e.g. ~/.cache/tsglang
 * @returns absolute path of the checkpoint directory
 */
export function ensureEmbeddedModel(cacheDir: string, logger: Logger): string {
  const target = join(cacheDir, EMBEDDED_MODEL_NAME);
  if (existsSync(join(target, 'config.json'))) return target;
  makeDirs(cacheDir);
  const tmp = mkdtempSync(join(cacheDir, `.${EMBEDDED_MODEL_NAME}.tmp-`));
  logger.info(`Generating the embedded tiny MiniMax-M2 model (random weights, DeepSeek-V3 BPE tokenizer + MiniMax tokens) into ${target}`);
  try {
    writeTinyModelWithTokenizer('minimax-m2', tmp, {
      configOverrides: { max_position_embeddings: EMBEDDED_CONTEXT_LENGTH },
      adjustValues: shapeEosWeights(EMBEDDED_EOS_SHAPING),
    });
    try {
      renameSync(tmp, target);
    } catch (err) {
      // Another process renamed its copy first: identical content, keep theirs.
      if (!existsSync(join(target, 'config.json'))) throw err;
    }
  } finally {
    if (existsSync(tmp)) rmSync(tmp, { recursive: true, force: true });
  }
  return target;
}
