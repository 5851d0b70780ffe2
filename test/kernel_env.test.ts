// The kernel backend's environment variables (TSGLANG_NATIVE_ADDON, TSGLANG_NATIVE, TSGLANG_THREADS, TSGLANG_BACKEND,
// TSGLANG_GEMM) are read by config/ (readKernelEnv, part of readServerEnv) and reach createOps / loadNativeAddon as
// values; nothing under src/ outside config/ reads process.env for them (layout-and-style §3.7).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { readKernelEnv, readServerEnv } from '../src/config/index.js';
import type { KernelEnv } from '../src/config/index.js';
import { createOps, defaultThreads } from '../src/kernels/index.js';

const BASE: KernelEnv = readKernelEnv({});

test('readKernelEnv: names and defaults of the kernel variables', () => {
  assert.deepEqual(BASE, { nativeAddonPath: null, nativeDisabled: false, threads: null, backend: 'auto', gemm: 'own' });
  assert.deepEqual(readKernelEnv({ TSGLANG_NATIVE_ADDON: '/x/a.node', TSGLANG_NATIVE: '0', TSGLANG_THREADS: '6', TSGLANG_BACKEND: 'cpu', TSGLANG_GEMM: 'blas' }),
    { nativeAddonPath: '/x/a.node', nativeDisabled: true, threads: 6, backend: 'cpu', gemm: 'blas' });
  // invalid thread counts fall back to the cores; an empty backend is 'auto'; other gemm values are 'own'
  for (const t of ['0', '-2', '1.5', 'x', '']) assert.equal(readKernelEnv({ TSGLANG_THREADS: t }).threads, null, t);
  assert.equal(readKernelEnv({ TSGLANG_BACKEND: '' }).backend, 'auto');
  assert.equal(readKernelEnv({ TSGLANG_NATIVE: '1' }).nativeDisabled, false);
  assert.equal(readKernelEnv({ TSGLANG_GEMM: 'own' }).gemm, 'own');
  const s = readServerEnv({ HOME: '/h', TSGLANG_THREADS: '3' });
  assert.equal(s.cacheDir, '/h/.cache/tsglang');
  assert.equal(s.threads, 3);
});

test('createOps and defaultThreads take the environment as values', () => {
  assert.equal(defaultThreads({ threads: 5 }), 5);
  assert.ok(defaultThreads({ threads: null }) >= 1);
  assert.equal(createOps({ env: { ...BASE, backend: 'cpu' } }).name, 'cpu-ref');
  assert.throws(() => createOps({ env: { ...BASE, backend: 'gpu' } }), /TSGLANG_BACKEND must be one of auto, native, cpu; got 'gpu'/);
  assert.throws(() => createOps({ env: { ...BASE, backend: 'cpu', threads: null }, threads: 0 }), /threads must be an integer ≥ 1, got 0/);
});

test('no file under src/ outside config/ reads process.env for a TSGLANG_ kernel variable', () => {
  const offenders: string[] = [];
  const walk = (dir: string): void => {
    for (const name of readdirSync(dir)) {
      const p = join(dir, name);
      if (statSync(p).isDirectory()) { if (name !== 'config') walk(p); continue; }
      if (!p.endsWith('.ts') || p.endsWith('.test.ts')) continue;
      if (/process\.env\.TSGLANG_/.test(readFileSync(p, 'utf8'))) offenders.push(p);
    }
  };
  walk(resolve('src'));
  assert.deepEqual(offenders, []);
});
