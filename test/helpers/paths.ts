// Paths tests use. Tests run from the repository root (npm test); the read-only shared/ folder sits beside it.
import { resolve } from 'node:path';

/** Repository root (tests are run with it as the working directory). */
export const REPO_ROOT = process.cwd();

/** ../shared/fixtures: tiny checkpoints with golden outputs (read-only; override with TSGLANG_FIXTURES). */
export const FIXTURES_DIR = process.env.TSGLANG_FIXTURES ?? resolve(REPO_ROOT, '..', 'shared', 'fixtures');

/** ../shared/design: specs and the parser / template vectors (read-only). */
export const DESIGN_DIR = process.env.TSGLANG_DESIGN ?? resolve(REPO_ROOT, '..', 'shared', 'design');

/** ../shared/data: test data sets (GSM8K test split). */
export const DATA_DIR = process.env.TSGLANG_DATA ?? resolve(REPO_ROOT, '..', 'shared', 'data');

/** ../shared/seeds: the task's seed documents (read-only; override with TSGLANG_SEEDS). */
export const SEEDS_DIR = process.env.TSGLANG_SEEDS ?? resolve(REPO_ROOT, '..', 'shared', 'seeds');

/** The compiled CLI entry, for tests that spawn `tsglang` as a child process. */
export const TSGLANG_BIN = resolve(REPO_ROOT, 'bin', 'tsglang.js');
