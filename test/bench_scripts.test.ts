// Every `npm run bench:*` script compiles first and stops on a compile error (issue 21): `tsc -p . && node …`, never
// `(tsc -p . || true)`, which would run the stale dist/ of an earlier build.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

test('bench:* scripts run tsc and stop when it fails', () => {
  const pkg = JSON.parse(readFileSync(join(process.cwd(), 'package.json'), 'utf8')) as { scripts: Record<string, string> };
  const bench = Object.entries(pkg.scripts).filter(([k]) => k.startsWith('bench:'));
  assert.ok(bench.length >= 5, 'bench scripts present');
  for (const [name, cmd] of bench) {
    assert.match(cmd, /^tsc -p \. && node dist\/bench\/\w+\.js$/, `${name}: ${cmd}`);
  }
});

test('bench median (bench:dp, bench:llamacpp): an odd count takes the middle reading, an even one the mean of the middle two', async () => {
  const { median } = await import('../bench/llamacpp_batch.js');
  assert.equal(median([3, 1, 2]), 2);
  assert.equal(median([19.8, 17.5]), (19.8 + 17.5) / 2);
  assert.equal(median([4, 1, 3, 2]), 2.5);
});
