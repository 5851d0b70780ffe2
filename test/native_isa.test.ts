// The AVX-512 linear-layer kernels (native/src/gemm_avx512.cc) and fused sampler passes against the AVX2 ones: test/helpers/isa_digests.ts
// digests every kernel's outputs on fixed inputs; run with TSGLANG_NO_AVX512=1 (AVX2 kernels) and without (AVX-512
// where the CPU has it), at 1 and 2 threads, every digest must be equal — the two instruction sets give the same bits
// (batch invariance across machines, design README decision 9). Skipped without the addon or without AVX-512.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { loadNativeAddon } from '../src/kernels/index.js';

const status = loadNativeAddon();
const avx512 = /^flags\s*:.*\bavx512f\b.*\bavx512bw\b/m.test(readFileSync('/proc/cpuinfo', 'utf8')) && /\bavx512dq\b/.test(readFileSync('/proc/cpuinfo', 'utf8')) && /\bavx512vl\b/.test(readFileSync('/proc/cpuinfo', 'utf8'));
const skip = !status.addon ? `native addon unavailable: ${status.reason}` : !avx512 ? 'this CPU has no AVX-512 (the AVX2 kernels run either way)' : false;
const script = fileURLToPath(new URL('./helpers/isa_digests.js', import.meta.url));

function digests(env: Record<string, string>): Record<string, string> {
  const r = spawnSync(process.execPath, [script], { encoding: 'utf8', env: { ...process.env, ...env }, timeout: 240_000 });
  assert.equal(r.status, 0, `isa_digests failed: ${r.stderr}`);
  return JSON.parse(r.stdout.trim()) as Record<string, string>;
}

test('matmul / groupedMatmul / fusedMoe / fused sampler: AVX-512 kernels == AVX2 kernels bit for bit, 1 and 2 threads', { skip }, () => {
  const avx2 = digests({ TSGLANG_NO_AVX512: '1', ISA_THREADS: '1' });
  assert.ok(Object.keys(avx2).length > 400, 'every case digested');
  for (const [what, env] of [['AVX-512, 1 thread', { TSGLANG_NO_AVX512: '0', ISA_THREADS: '1' }], ['AVX-512, 2 threads', { TSGLANG_NO_AVX512: '0', ISA_THREADS: '2' }], ['AVX2, 2 threads', { TSGLANG_NO_AVX512: '1', ISA_THREADS: '2' }]] as const) {
    const got = digests(env);
    const differ = Object.keys(avx2).filter((k) => got[k] !== avx2[k]);
    assert.deepEqual(differ, [], `${what}: cases whose bits differ from AVX2 at 1 thread`);
  }
});
