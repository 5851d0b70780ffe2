// End to end: `tsglang serve` start-up failures exit non-zero promptly (after stopping the engine worker thread),
// and SIGTERM / SIGINT on a running server exit cleanly. Uses the embedded default model (same cache as server.test).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createServer, type Server } from 'node:net';
import { mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TSGLANG_BIN } from '../helpers/paths.js';

const HOME = join(tmpdir(), 'tsglang-e2e-home');
/** Watchdog: a child still alive after this is killed and the test fails (it used to hang forever). */
const WATCHDOG_MS = 180_000;

interface Exit { code: number | null; signal: NodeJS.Signals | null; stderr: string; killedByWatchdog: boolean }

/** Runs `tsglang serve ARGS`; `onReady` (if given) is called once the ready line is printed. */
function serve(args: string[], onReady?: (kill: (sig: NodeJS.Signals) => void) => void): Promise<Exit> {
  mkdirSync(HOME, { recursive: true });
  const child = spawn(process.execPath, [TSGLANG_BIN, 'serve', '--num-threads', '1', '--skip-server-warmup', ...args], {
    env: { ...process.env, HOME, TSGLANG_CACHE_DIR: join(HOME, '.cache', 'tsglang') },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  let killedByWatchdog = false;
  child.stderr!.setEncoding('utf8');
  child.stderr!.on('data', (d: string) => {
    const before = stderr.includes('ready to roll');
    stderr += d;
    if (!before && stderr.includes('ready to roll') && onReady) onReady((sig) => child.kill(sig));
  });
  const timer = setTimeout(() => { killedByWatchdog = true; child.kill('SIGKILL'); }, WATCHDOG_MS);
  return new Promise((resolve) => {
    child.once('exit', (code, signal) => { clearTimeout(timer); resolve({ code, signal, stderr, killedByWatchdog }); });
  });
}

function holdPort(): Promise<{ server: Server; port: number }> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve({ server, port: (server.address() as { port: number }).port }));
  });
}

test('serve on a port already in use exits 1 naming EADDRINUSE (engine worker shut down)', { timeout: WATCHDOG_MS + 30_000 }, async () => {
  const { server, port } = await holdPort();
  try {
    const r = await serve(['--host', '127.0.0.1', '--port', String(port)]);
    assert.equal(r.killedByWatchdog, false, `still running after the watchdog:\n${r.stderr}`);
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stderr, /EADDRINUSE/);
    assert.doesNotMatch(r.stderr, /ready to roll/);
  } finally {
    server.close();
  }
});

test('serve with an unresolvable --host exits 1', { timeout: WATCHDOG_MS + 30_000 }, async () => {
  const r = await serve(['--host', '999.1.1.1', '--port', '0']);
  assert.equal(r.killedByWatchdog, false, `still running after the watchdog:\n${r.stderr}`);
  assert.equal(r.code, 1, r.stderr);
  assert.match(r.stderr, /tsglang serve: error: .*999\.1\.1\.1/);
});

for (const sig of ['SIGTERM', 'SIGINT'] as const) {
  test(`a running server exits 0 on ${sig}`, { timeout: WATCHDOG_MS + 30_000 }, async () => {
    let sent = false;
    const r = await serve(['--host', '127.0.0.1', '--port', '0'], (kill) => { sent = true; kill(sig); });
    assert.ok(sent, `never became ready:\n${r.stderr}`);
    assert.equal(r.killedByWatchdog, false, `still running after ${sig}:\n${r.stderr}`);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stderr, new RegExp(`Received ${sig}, shutting down`));
  });
}

test('serve refuses a --context-length longer than the model\'s (SGLang ModelConfig), exit non-zero', { timeout: WATCHDOG_MS + 30_000 }, async () => {
  const r = await serve(['--host', '127.0.0.1', '--port', '0', '--context-length', '999999999']);
  assert.equal(r.killedByWatchdog, false, r.stderr);
  assert.notEqual(r.code, 0, r.stderr);
  assert.match(r.stderr, /User-specified context_length \(999999999\) is greater than the derived context_length \(\d+\)\./);
  assert.match(r.stderr, /set the env var SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1/);
  assert.doesNotMatch(r.stderr, /ready to roll/);
});
