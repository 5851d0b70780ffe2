// The native backend's install and fallback paths: the build script never fails `npm install` (skip switch, a failing
// node-gyp), and without the addon `createOps()` falls back to the TypeScript reference with exactly one warning line,
// while an explicit `backend: 'native'` is an error naming the reason.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseOpsBackend } from '../src/kernels/index.js';

const BUILD = resolve('scripts', 'build_native.mjs');
const KERNELS = resolve('dist', 'src', 'kernels', 'index.js');

function envWithout(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, ...extra };
  delete env.NODE_TEST_CONTEXT;
  return env;
}

test('build_native.mjs: TSGLANG_SKIP_NATIVE=1 exits 0 with one note', () => {
  const r = spawnSync(process.execPath, [BUILD], { encoding: 'utf8', env: envWithout({ TSGLANG_SKIP_NATIVE: '1' }) });
  assert.equal(r.status, 0);
  assert.match(r.stderr, /^tsglang native: build skipped \(TSGLANG_SKIP_NATIVE=1\); using the TypeScript kernels\n$/);
});

test('build_native.mjs: a failing node-gyp still exits 0 and says the build failed', () => {
  const dir = mkdtempSync(join(tmpdir(), 'tsglang-gyp-'));
  try {
    const fake = join(dir, 'node-gyp.js');
    writeFileSync(fake, "process.stderr.write('gyp ERR! fake failure\\n'); process.exit(1);\n");
    const r = spawnSync(process.execPath, [BUILD], { encoding: 'utf8', env: envWithout({ npm_config_node_gyp: fake }) });
    assert.equal(r.status, 0);
    assert.match(r.stderr, /tsglang native: build failed \(exit 1: gyp ERR! fake failure\); using the TypeScript kernels/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('createOps without the addon: the TS reference after exactly one warning line; backend native is an error', () => {
  const script = `
    const k = await import(${JSON.stringify(KERNELS)});
    const a = k.createOps(); const b = k.createOps({ threads: 1 });
    let err = '';
    try { k.createOps({ backend: 'native' }); } catch (e) { err = e.name + ': ' + e.message; }
    process.stdout.write(JSON.stringify({ a: a.name, b: b.name, err }));`;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', env: envWithout({ TSGLANG_NATIVE: '0', TSGLANG_BACKEND: '' }) });
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(JSON.parse(r.stdout), { a: 'cpu-ref', b: 'cpu-ref', err: 'InvalidRequestError: native backend unavailable: disabled by TSGLANG_NATIVE=0' });
  assert.equal(r.stderr, 'WARNING tsglang: disabled by TSGLANG_NATIVE=0; using the TypeScript reference kernels (slow)\n');
});

test('parseOpsBackend: auto | native | cpu, anything else names the parameter', () => {
  assert.deepEqual(['auto', 'native', 'cpu'].map((b) => parseOpsBackend(b)), ['auto', 'native', 'cpu']);
  assert.throws(() => parseOpsBackend('gpu', 'backend'), /backend must be one of auto, native, cpu; got 'gpu'/);
});
