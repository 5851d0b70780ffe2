// The golden-logit tests of both architectures (A's test/golden/minimax_m2.test.ts, B's deepseek_v32.test.ts) run a
// second time on the native backend, unchanged: a resolve hook (native_golden_hooks.ts) swaps createCpuOps() for the
// native ops inside test/golden/. Every assertion of theirs must pass on both backends.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { loadNativeAddon } from '../src/kernels/index.js';

const status = loadNativeAddon();
const here = (name: string): string => fileURLToPath(new URL(name, import.meta.url));

for (const file of ['golden/minimax_m2.test.js', 'golden/deepseek_v32.test.js']) {
  const path = here(file);
  const skip = !status.addon ? `native addon unavailable: ${status.reason}` : !existsSync(path) ? `${file} not built` : false;
  test(`${file} passes on the native backend (threads 1)`, { skip }, () => {
    const env: NodeJS.ProcessEnv = { ...process.env, TSGLANG_THREADS: '1' };
    delete env.NODE_TEST_CONTEXT; // else the child runner talks the parent runner's binary protocol
    const r = spawnSync(process.execPath, ['--import', here('native_golden_register.js'), '--test', '--test-reporter=tap', path], {
      encoding: 'utf8', timeout: 10 * 60 * 1000, env,
    });
    const out = `${r.stdout}\n${r.stderr}`;
    assert.match(out, /native-golden-shim: createCpuOps\(\) -> native backend/, 'the golden test did not pick up the native backend');
    const pass = /# pass (\d+)/.exec(out);
    const fail = /# fail (\d+)/.exec(out);
    assert.ok(pass && Number(pass[1]) > 0, `no passing test in ${file}:\n${out.slice(-2000)}`);
    assert.equal(fail?.[1], '0', `failures in ${file} on the native backend:\n${out.split('\n').filter((l) => /not ok|error|expected|actual/.test(l)).slice(0, 30).join('\n')}`);
    assert.equal(r.status, 0, out.slice(-2000));
  });
}
