// End to end: `tsglang serve` on the embedded default model, driven by `tsglang bench-serving` and
// `tsglang eval gsm8k` as child processes (a few short prompts: the CI machine has 2 cores).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DATA_DIR, NEEDS_SHARED, TSGLANG_BIN } from './helpers/paths.js';

const TMP = mkdtempSync(join(tmpdir(), 'tsglang-bench-e2e-'));
const PORT = 20000 + Math.floor(Math.random() * 20000);
let server: ChildProcess | null = null;
let serverLog = '';

function runCli(args: string[], timeoutMs: number): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [TSGLANG_BIN, ...args], { cwd: TMP, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

async function waitReady(timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (server?.exitCode !== null) throw new Error(`tsglang serve exited:\n${serverLog}`);
    try {
      const r = await fetch(`http://127.0.0.1:${PORT}/v1/models`);
      if (r.ok && serverLog.includes('ready to roll')) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 500));
  }
  throw new Error(`tsglang serve not ready after ${timeoutMs} ms:\n${serverLog}`);
}

before(async () => {
  server = spawn(process.execPath, [TSGLANG_BIN, 'serve', '--port', String(PORT), '--host', '127.0.0.1'], { stdio: ['ignore', 'pipe', 'pipe'] });
  server.stdout!.on('data', (d: Buffer) => (serverLog += d.toString()));
  server.stderr!.on('data', (d: Buffer) => (serverLog += d.toString()));
  await waitReady(240_000);
});

after(() => {
  if (server && server.exitCode === null) server.kill('SIGTERM');
  rmSync(TMP, { recursive: true, force: true });
});

function row(stdout: string, label: string): string {
  const line = stdout.split('\n').find((l) => l.slice(0, 40).trimEnd() === label);
  assert.ok(line !== undefined, `no '${label}' row in:\n${stdout}`);
  return line.slice(41).trimEnd();
}

for (const concurrency of ['1', '4']) {
  test(`bench-serving against tsglang serve (embedded default), --max-concurrency ${concurrency}`, { timeout: 240_000 }, async () => {
    const out = join(TMP, `bench_${concurrency}.jsonl`);
    const r = await runCli(
      ['bench-serving', '--backend', 'sglang', '--host', '127.0.0.1', '--port', String(PORT), '--dataset-name', 'random',
        '--random-input-len', '16', '--random-output-len', '8', '--num-prompts', '4', '--max-concurrency', concurrency, '--output-file', out],
      200_000,
    );
    assert.equal(r.code, 0, r.stderr);
    // the server honours ignore_eos: it generates exactly the drawn output lengths
    const drawnOut = /#Output tokens: (\d+)/.exec(r.stdout)![1];
    const drawnIn = /#Input tokens: (\d+)/.exec(r.stdout)![1];
    assert.equal(row(r.stdout, 'Total generated tokens:'), drawnOut);
    assert.equal(row(r.stdout, 'Total input tokens:'), drawnIn);
    assert.equal(row(r.stdout, 'Successful requests:'), '4');
    assert.equal(row(r.stdout, 'Max request concurrency:'), concurrency);
    assert.ok(r.stdout.includes('============ Serving Benchmark Result ============'));
    const rec = JSON.parse(readFileSync(out, 'utf8').trim().replace(/\bInfinity\b/g, '1e999')) as Record<string, unknown>;
    assert.equal(rec.completed, 4);
    assert.equal(rec.total_output_tokens, Number(drawnOut));
    assert.equal(typeof rec.server_info, "object");
    assert.notEqual(rec.server_info, null);
  });
}

test('eval gsm8k against tsglang serve: 2 questions, 1 shot', { ...NEEDS_SHARED, timeout: 240_000 }, async () => {
  const r = await runCli(
    ['eval', 'gsm8k', '--host', '127.0.0.1', '--port', String(PORT), '--data-path', join(DATA_DIR, 'gsm8k', 'test.jsonl'),
      '--num-questions', '2', '--num-shots', '1', '--max-new-tokens', '8'],
    200_000,
  );
  assert.equal(r.code, 0, r.stderr);
  const lines = r.stdout.trim().split('\n');
  assert.equal(lines.length, 4);
  assert.match(lines[0], /^Accuracy: (0\.000|0\.500|1\.000)$/);
  assert.match(lines[1], /^Invalid: (0\.000|0\.500|1\.000)$/);
  assert.match(lines[2], /^Latency: \d+\.\d{3} s$/);
  assert.match(lines[3], /^Output throughput: \d+\.\d{3} token\/s$/);
  const dump = readFileSync(join(TMP, 'tmp_output_gsm8k.txt'), 'utf8');
  assert.ok(dump.startsWith(`${'='.repeat(40)} 0 ${'='.repeat(40)}\nQuestion: Janet’s ducks`));
});
