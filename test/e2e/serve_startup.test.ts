// End to end: `tsglang serve` start-up failures exit non-zero promptly (after stopping the engine worker thread),
// and SIGTERM / SIGINT on a running server exit cleanly. Uses the embedded default model (same cache as server.test).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createServer, type Server } from 'node:net';
import { mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FIXTURES_DIR, NEEDS_SHARED, REPO_ROOT, TSGLANG_BIN } from '../helpers/paths.js';

const HOME = join(tmpdir(), 'tsglang-e2e-home');
/** Watchdog: a child still alive after this is killed and the test fails (it used to hang forever). */
const WATCHDOG_MS = 180_000;

interface Exit { code: number | null; signal: NodeJS.Signals | null; stderr: string; killedByWatchdog: boolean }

/**
 * Runs `tsglang serve ARGS` (with --skip-server-warmup unless `warmup`); `onReady` (if given) is called once the ready
 * line is printed.
 */
function serve(args: string[], onReady?: (kill: (sig: NodeJS.Signals) => void) => void, warmup = false): Promise<Exit> {
  mkdirSync(HOME, { recursive: true });
  const child = spawn(process.execPath, [TSGLANG_BIN, 'serve', '--num-threads', '1', ...(warmup ? [] : ['--skip-server-warmup']), ...args], {
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

test('serve on a port already in use exits 1 with uvicorn\'s bind error, before the model loads', { timeout: WATCHDOG_MS + 30_000 }, async () => {
  const { server, port } = await holdPort();
  try {
    const r = await serve(['--host', '127.0.0.1', '--port', String(port)]);
    assert.equal(r.killedByWatchdog, false, `still running after the watchdog:\n${r.stderr}`);
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stderr, /\[Errno 98\] error while attempting to bind on address \('127\.0\.0\.1', \d+\): address already in use/);
    assert.doesNotMatch(r.stderr, /KV Cache is allocated/);
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
  // the signal arrives twice, as one Ctrl-C under `npm start` does (the terminal's and npm's forwarded copy): one
  // graceful shutdown, one log line (a second signal later than a second would mean "leave now")
  test(`a running server exits 0 on ${sig}, also when the signal arrives twice at once`, { timeout: WATCHDOG_MS + 30_000 }, async () => {
    let sent = false;
    const r = await serve(['--host', '127.0.0.1', '--port', '0'], (kill) => { sent = true; kill(sig); kill(sig); });
    assert.ok(sent, `never became ready:\n${r.stderr}`);
    assert.equal(r.killedByWatchdog, false, `still running after ${sig}:\n${r.stderr}`);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stderr.match(new RegExp(`Received ${sig}, shutting down`, 'g'))?.length, 1, r.stderr);
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

const TINY_MINIMAX = join(FIXTURES_DIR, 'tiny-minimax-m2');
/** A tokenizer whose vocabulary (DeepSeek-V3's, 129280) is larger than the fixture model's (512). */
const BIG_VOCAB_TOKENIZER = join(REPO_ROOT, 'node_modules', '@lenml', 'tokenizer-deepseek_v3', 'models');

test('a warmup that fails (its prompt tokenizes outside the model\'s vocabulary) stops start-up: exit 1, SGLang\'s log line, never ready', { ...NEEDS_SHARED, timeout: WATCHDOG_MS + 30_000 }, async () => {
  const r = await serve(['--host', '127.0.0.1', '--port', '0', '--model-path', TINY_MINIMAX, '--tokenizer-path', BIG_VOCAB_TOKENIZER, '--max-total-tokens', '4096'], undefined, true);
  assert.equal(r.killedByWatchdog, false, `still running after the watchdog:\n${r.stderr}`);
  assert.equal(r.code, 1, r.stderr);
  assert.match(r.stderr, /ERROR Initialization failed\. warmup error: The input_ids \[[\d, ]+\] contains values greater than the vocab size \(512\)\./);
  assert.doesNotMatch(r.stderr, /ready to roll/);
});

test('--skip-tokenizer-init with the warmup: it runs on input_ids [10, 11, 12] and the server comes up', { ...NEEDS_SHARED, timeout: WATCHDOG_MS + 30_000 }, async () => {
  let sent = false;
  const r = await serve(['--host', '127.0.0.1', '--port', '0', '--model-path', TINY_MINIMAX, '--skip-tokenizer-init', '--max-total-tokens', '4096'], (kill) => { sent = true; kill('SIGTERM'); }, true);
  assert.ok(sent, `never became ready:\n${r.stderr}`);
  assert.equal(r.code, 0, r.stderr);
  const ready = r.stderr.indexOf('ready to roll');
  // the warmup's prefill (3 prompt tokens) ran before the server declared itself ready
  assert.match(r.stderr.slice(0, ready), /Prefill batch\. #new-seq: 1, #new-token: 3, #cached-token: 0,/);
  assert.doesNotMatch(r.stderr, /Initialization failed/);
});
