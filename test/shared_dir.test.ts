// Guard: the tests that read the shared/ folder (goldens, vectors, data) skip when it is missing; this test fails
// then, once, saying where shared/ was looked for and which env var to set.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { FIXTURES_DIR, SHARED_MISSING } from './helpers/paths.js';

test('shared/ folder is found (fixtures, design vectors, data, seeds)', () => {
  if (SHARED_MISSING !== null) assert.fail(SHARED_MISSING);
  assert.ok(existsSync(join(FIXTURES_DIR)));
});
