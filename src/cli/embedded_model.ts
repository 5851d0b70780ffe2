// The embedded default model of `tsglang serve` (no --model-path): a tiny MiniMax-M2 checkpoint with a real
// tokenizer, generated once, deterministically, into <cacheDir>/<name>. It is written under a temporary name and
// renamed into place, so concurrent starts never see a half-written checkpoint. Its answers are gibberish (random
// weights) but every other part of the serving path is real.
import { existsSync, mkdirSync, mkdtempSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from '../common/index.js';
import { writeTinyCheckpoint } from '../executor/index.js';
import { tinyTokenizerSpec, writeTinyTokenizer } from '../tokenizer/index.js';

/** Directory name of the embedded model (bump the version when its content changes). */
export const EMBEDDED_MODEL_NAME = 'tiny-minimax-m2-v1';

/**
 * Context length of the embedded model: room for the seed examples (max_tokens 2048 plus the prompt) while a chat
 * request without max_tokens (generated until the context is full, as SGLang does) still ends in minutes.
 */
export const EMBEDDED_CONTEXT_LENGTH = 4096;

/**
 * Writes a complete tiny checkpoint (weights + tokenizer + chat template) of `arch` into `dir`.
 * @returns the files written
 */
export function writeTinyModelWithTokenizer(arch: string, dir: string, options: { seed?: number; numShards?: number; configOverrides?: Record<string, unknown> } = {}): string[] {
  const spec = tinyTokenizerSpec(arch === 'minimax-m2' ? 'minimax-m2' : arch === 'deepseek-v3' ? 'deepseek-v3' : 'deepseek-v32');
  const ckpt = writeTinyCheckpoint(arch, dir, {
    seed: options.seed ?? 0,
    numShards: options.numShards ?? 1,
    configOverrides: { ...spec.configOverrides, ...(options.configOverrides ?? {}) },
  });
  return [...ckpt.files, ...writeTinyTokenizer(dir, spec.family)];
}

/**
 * Returns the embedded model directory, generating it first if absent (atomic: temp dir + rename).
 * @param cacheDir e.g. ~/.cache/tsglang
 * @returns absolute path of the checkpoint directory
 */
export function ensureEmbeddedModel(cacheDir: string, logger: Logger): string {
  const target = join(cacheDir, EMBEDDED_MODEL_NAME);
  if (existsSync(join(target, 'config.json'))) return target;
  mkdirSync(cacheDir, { recursive: true });
  const tmp = mkdtempSync(join(cacheDir, `.${EMBEDDED_MODEL_NAME}.tmp-`));
  logger.info(`Generating the embedded tiny MiniMax-M2 model (random weights, DeepSeek-V3 BPE tokenizer + MiniMax tokens) into ${target}`);
  try {
    writeTinyModelWithTokenizer('minimax-m2', tmp, { configOverrides: { max_position_embeddings: EMBEDDED_CONTEXT_LENGTH } });
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
