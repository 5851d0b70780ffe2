// Small CLI defects of issue 14 (item 7): --version, a closed stdout pipe, the busy-port check before the model
// loads, error lines without class names or double prefixes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { FIXTURES_DIR, NEEDS_SHARED, TSGLANG_BIN } from '../../test/helpers/paths.js';

test('tsglang --version prints tsglang\'s version and the SGLang version it follows', () => {
  for (const argv of [['--version'], ['serve', '--version']]) {
    const r = spawnSync(process.execPath, [TSGLANG_BIN, ...argv], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /^tsglang \d+\.\d+\.\d+\S* \(SGLang 0\.5\.10\.post1 compatible\)\n$/);
  }
});

test('tsglang logits | head: a reader that closes the pipe ends the command quietly', NEEDS_SHARED, async () => {
  const ids = Array.from({ length: 40 }, (_, i) => 3 + i).join(',');
  const child = spawn(process.execPath, [TSGLANG_BIN, 'logits', '--model-path', join(FIXTURES_DIR, 'tiny-minimax-m2'), '--input-ids', ids, '--positions', 'all'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (c: Buffer) => { stderr += c.toString(); });
  child.stdout.once('data', () => child.stdout.destroy());
  const code = await new Promise<number | null>((r) => child.on('close', (c) => r(c)));
  assert.equal(code, 0, stderr);
  assert.doesNotMatch(stderr, /EPIPE|Error/);
});

test('tsglang serve on a busy port stops before the model loads, with uvicorn\'s bind error and no class name', async () => {
  const blocker = createServer();
  const port = await new Promise<number>((r) => blocker.listen(0, '127.0.0.1', () => r((blocker.address() as { port: number }).port)));
  try {
    const t0 = performance.now();
    const r = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
      const c = spawn(process.execPath, [TSGLANG_BIN, 'serve', '--port', String(port)], { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, TSGLANG_CACHE_DIR: '/nonexistent/never-created' } });
      let stderr = '';
      c.stderr.on('data', (d: Buffer) => { stderr += d.toString(); });
      c.on('close', (code) => resolve({ code, stderr }));
    });
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stderr, /tsglang serve: error: \[Errno 98\] error while attempting to bind on address \('127\.0\.0\.1', \d+\): address already in use/);
    assert.doesNotMatch(r.stderr, /Error: |InvalidRequestError|embedded|KV Cache/);
    assert.ok(performance.now() - t0 < 60_000);
  } finally {
    blocker.close();
  }
});
