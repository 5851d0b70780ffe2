// Paths tests use. Tests run from the repository root (npm test). The read-only shared/ folder (fixtures, design
// vectors, data, seeds) is found by env override first, else as `shared/fixtures` beside the repository or beside
// one of its ancestors.
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';

/** Repository root (tests are run with it as the working directory). */
export const REPO_ROOT = process.cwd();

/** Folders searched for `shared/fixtures`: the repository's parent, then its ancestors up to the root. */
const SEARCHED: string[] = [];
function findShared(): string | null {
  let dir = dirname(REPO_ROOT);
  for (;;) {
    SEARCHED.push(join(dir, 'shared'));
    if (existsSync(join(dir, 'shared', 'fixtures'))) return join(dir, 'shared');
    const up = dirname(dir);
    if (up === dir) return null;
    dir = up;
  }
}

/** The shared/ folder: TSGLANG_SHARED, else the nearest `shared/` holding `fixtures/` (null when none). */
export const SHARED_DIR: string | null = process.env.TSGLANG_SHARED || findShared();

const sharedSub = (name: string, envVar: string): string =>
  process.env[envVar] || (SHARED_DIR !== null ? join(SHARED_DIR, name) : resolve(REPO_ROOT, '..', 'shared', name));

/** shared/fixtures: tiny checkpoints with golden outputs (read-only; override with TSGLANG_FIXTURES). */
export const FIXTURES_DIR = sharedSub('fixtures', 'TSGLANG_FIXTURES');

/** shared/design: specs and the parser / template vectors (read-only; override with TSGLANG_DESIGN). */
export const DESIGN_DIR = sharedSub('design', 'TSGLANG_DESIGN');

/** shared/data: test data sets (GSM8K test split; override with TSGLANG_DATA). */
export const DATA_DIR = sharedSub('data', 'TSGLANG_DATA');

/** shared/seeds: the task's seed documents (read-only; override with TSGLANG_SEEDS). */
export const SEEDS_DIR = sharedSub('seeds', 'TSGLANG_SEEDS');

/**
 * Null when the shared folders exist; else the one message explaining where shared/ was looked for and which env
 * var to set (test/shared_dir.test.ts fails with it; the tests that need shared/ skip with {@link NEEDS_SHARED}).
 */
export const SHARED_MISSING: string | null = (() => {
  const missing = [FIXTURES_DIR, DESIGN_DIR, DATA_DIR, SEEDS_DIR].filter((d) => !existsSync(d));
  if (missing.length === 0) return null;
  const where = process.env.TSGLANG_SHARED ? `TSGLANG_SHARED=${process.env.TSGLANG_SHARED}` : `looked for shared/fixtures in ${SEARCHED.join(', ')}`;
  return `the read-only shared/ folder (fixtures, design vectors, data, seeds) was not found (${where}; missing: ${missing.join(', ')}). ` +
    'Set TSGLANG_SHARED=/path/to/shared (or TSGLANG_FIXTURES / TSGLANG_DESIGN / TSGLANG_DATA / TSGLANG_SEEDS per folder).';
})();

/**
 * Options for a test that reads shared/: when shared/ is missing it is skipped, pointing at the shared-dir guard
 * test, which fails with {@link SHARED_MISSING} (one clear failure instead of one stack trace per test).
 */
export const NEEDS_SHARED: { skip: string | false } = {
  skip: SHARED_MISSING === null ? false : 'needs shared/ (not found: see the failing "shared/ folder is found" test)',
};

/** The compiled CLI entry, for tests that spawn `tsglang` as a child process. */
export const TSGLANG_BIN = resolve(REPO_ROOT, 'bin', 'tsglang.js');

/**
 * Reads a JSON file from shared/ at module load; returns `whenMissing` instead when shared/ is missing (the tests
 * using it are skipped by {@link NEEDS_SHARED}, and the guard test reports the missing folder once).
 * @throws the read / parse error when shared/ exists but the file is unreadable or not JSON
 */
export function readSharedJson<T>(path: string, whenMissing: T): T {
  if (SHARED_MISSING !== null) return whenMissing;
  return JSON.parse(readFileSync(path, 'utf8')) as T;
}

/**
 * Runs `load` (module-level set-up that reads shared/) only when shared/ exists; otherwise returns undefined typed
 * as T, which only the skipped {@link NEEDS_SHARED} tests would touch.
 */
export function whenShared<T>(load: () => T): T {
  return SHARED_MISSING === null ? load() : (undefined as T);
}
