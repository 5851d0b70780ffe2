// Shared pieces of the model golden tests (test/golden/{minimax_m2,deepseek_v32}.test.ts): the layout of a
// fixture's golden.json (written by the float64 reference of ../shared/fixtures/<name>/) and the comparisons.
// NOTE: this file must not import src/kernels: test/native_golden_hooks.ts swaps that import only for files
// under test/golden/, so the ops are created there.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { SHARED_MISSING } from './paths.js';

/** One prompt of golden.json: tokens, reference logits (float64 rounded to JSON), greedy tokens, debug values. */
export interface GoldenPrompt {
  name: string;
  /** Prompt length (tokens). */
  length: number;
  tokens: number[];
  /** [vocabSize] logits of the last position. */
  logits_last: number[];
  /** [vocabSize] logits at selected positions. */
  logits_at: { position: number; logits: number[] }[];
  /** Position (as a string) → argmax token id. */
  argmax_at: Record<string, number>;
  /** [hiddenSize] final-norm hidden state of the last position. */
  hidden_last: number[];
  greedy: { num_tokens: number; tokens: number[] };
  /** Model-specific discrete decisions of the last position (e.g. `experts_3`, `main_indexer_0`). */
  debug_last_position: Record<string, number[]>;
}

/** One weight check of golden.json: a tensor element after dequantization, and its BF16 bits when stored so. */
export interface GoldenWeightCheck {
  tensor: string;
  /** Element index, one entry per tensor dimension. */
  index: number[];
  stored_dtype: string;
  dequantized: number;
  raw_bf16_bits?: number;
}

/** A fixture's golden.json; `P` adds model-specific prompt fields (e.g. DeepSeek's `mtp`). */
export interface GoldenFile<P extends GoldenPrompt = GoldenPrompt> {
  recommended_tolerances_float32?: { logits_max_abs: number };
  prompts: P[];
  weight_checks: GoldenWeightCheck[];
}

/**
 * Reads `<fixtureDir>/golden.json`.
 * @throws the fs / JSON error when the fixture is missing or malformed (the test file then fails to load)
 */
export function readGolden<P extends GoldenPrompt = GoldenPrompt>(fixtureDir: string): GoldenFile<P> {
  // shared/ missing: an empty golden so the module loads; its tests skip (NEEDS_SHARED) and the guard test fails once.
  if (SHARED_MISSING !== null) return { prompts: [], recommended_tolerances_float32: {} } as unknown as GoldenFile<P>;
  return JSON.parse(readFileSync(join(fixtureDir, 'golden.json'), 'utf8')) as GoldenFile<P>;
}

/** max_i |a[i] − b[i]|; asserts equal lengths. */
export function maxAbsDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  assert.equal(a.length, b.length);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i] - b[i]));
  return m;
}

/**
 * Index of the largest of `x[off .. off + n)` (first on ties), relative to `off`.
 * @param x [rows · n] logits, row-major
 */
export function argmaxAt(x: ArrayLike<number>, off = 0, n = x.length - off): number {
  let best = 0;
  for (let i = 1; i < n; i++) if (x[off + i] > x[off + best]) best = i;
  return best;
}

/** max_i |a[i] − b[i]| / max_i |b[i]|: the relative error of `a` against the reference `b` (same length). */
export function relDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let d = 0;
  let m = 0;
  for (let i = 0; i < b.length; i++) {
    d = Math.max(d, Math.abs(a[i] - b[i]));
    m = Math.max(m, Math.abs(b[i]));
  }
  return d / m;
}
