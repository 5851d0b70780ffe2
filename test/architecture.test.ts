// Enforces the layer table of ARCHITECTURE.md (layout-and-style.md §2.1): a file imports only from its own
// folder or from a strictly lower level, across folders only through that folder's index.ts, and nothing in
// src/ has a default export.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, dirname, resolve, sep } from 'node:path';

const SRC = resolve('src');

/** Folder → level and the lower folders it may import (when narrower than "every lower level"). */
const LAYERS: Record<string, { level: number; only?: string[] }> = {
  common: { level: 0 },
  config: { level: 1 },
  protocol: { level: 2, only: ['common'] },
  tokenizer: { level: 2, only: ['common'] },
  parsers: { level: 2, only: ['common'] },
  sampling: { level: 2 },
  kernels: { level: 2 },
  distributed: { level: 2 },
  mem_cache: { level: 2 },
  constrained: { level: 2, only: ['common'] },
  layers: { level: 3, only: ['common', 'config', 'kernels', 'distributed', 'mem_cache', 'sampling'] },
  models: { level: 4 },
  executor: { level: 5 },
  speculative: { level: 6 },
  scheduler: { level: 7 },
  disagg: { level: 8 },
  engine: { level: 9 },
  server: { level: 10 },
  router: { level: 10, only: ['common', 'config', 'protocol'] },
  bench: { level: 10, only: ['common', 'config', 'protocol'] },
  cli: { level: 11 },
};
/** The engine side never imports the HTTP-edge folders; of it, only engine imports tokenizer. */
const ENGINE_SIDE = ['layers', 'models', 'executor', 'speculative', 'scheduler', 'disagg', 'engine'];

function listTs(dir: string, out: string[] = []): string[] {
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) listTs(p, out);
    else if (name.endsWith('.ts') && !name.endsWith('.d.ts')) out.push(p);
  }
  return out;
}

function folderOf(file: string): string {
  return relative(SRC, file).split(sep)[0];
}

function importsOf(source: string): string[] {
  const specs: string[] = [];
  const re = /(?:^|\n)\s*(?:import|export)\b[^'"]*?from\s*['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)/g;
  for (let m = re.exec(source); m; m = re.exec(source)) specs.push(m[1] ?? m[2]);
  return specs;
}

test('every cross-folder import follows the layer table and goes through index.ts', () => {
  const violations: string[] = [];
  for (const file of listTs(SRC)) {
    const from = folderOf(file);
    if (file.endsWith('.test.ts') || file.endsWith('.case.ts')) continue;
    const rule = LAYERS[from];
    if (!rule) {
      if (from !== 'index.ts') violations.push(`${relative(SRC, file)}: folder '${from}' is not in the layer table`);
      continue;
    }
    for (const spec of importsOf(readFileSync(file, 'utf8'))) {
      if (!spec.startsWith('.')) continue;
      const target = resolve(dirname(file), spec);
      if (!target.startsWith(SRC + sep)) continue;
      const to = folderOf(target);
      if (to === from) continue;
      const toRule = LAYERS[to];
      const where = `${relative(SRC, file)} imports ${spec}`;
      if (!toRule) { violations.push(`${where}: unknown folder '${to}'`); continue; }
      if (toRule.level >= rule.level) violations.push(`${where}: '${to}' (L${toRule.level}) is not below '${from}' (L${rule.level})`);
      if (rule.only && !rule.only.includes(to)) violations.push(`${where}: '${from}' may import only ${rule.only.join(', ')}`);
      if (ENGINE_SIDE.includes(from) && (to === 'protocol' || to === 'parsers')) violations.push(`${where}: the engine side never imports ${to}`);
      if (ENGINE_SIDE.includes(from) && from !== 'engine' && to === 'tokenizer') violations.push(`${where}: only engine imports tokenizer`);
      const rel = relative(join(SRC, to), target);
      if (rel !== 'index.js' && rel !== 'index.ts' && rel !== 'index') violations.push(`${where}: cross-folder imports go through ${to}/index.ts`);
    }
  }
  assert.deepEqual(violations, []);
});

test('no default exports in src/', () => {
  const offenders = listTs(SRC).filter((f) => /(^|\n)\s*export\s+default\b/.test(readFileSync(f, 'utf8')));
  assert.deepEqual(offenders.map((f) => relative(SRC, f)), []);
});

test('the checker itself flags a bad import (self-test)', () => {
  assert.deepEqual(importsOf(`import { x } from '../models/minimax_m2.js';\nexport * from './a.js';`), ['../models/minimax_m2.js', './a.js']);
});
