// Shutdown and faults of a `--tp 4` server (issue 16, items 3 and 5): SIGTERM with a request in flight answers it and
// stops every rank; a rank thread that dies mid-request gives that request an error response naming the rank, and
// the server exits (code 1) instead of hanging or serving on broken ranks.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startServe, type ServeChild } from '../../bench/serve_child.js';

const HOME = join(tmpdir(), 'tsglang-e2e-home');
const ENV = { ...process.env, HOME, TSGLANG_CACHE_DIR: join(HOME, '.cache', 'tsglang') };
const LONG = JSON.stringify({ text: 'hi', sampling_params: { max_new_tokens: 4000, ignore_eos: true } });
const post = (base: string, body: string) => fetch(`${base}/generate`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });

/** Resolves with the exit code, or rejects when the process is still alive after `ms` (then kills it). */
async function exitWithin(s: ServeChild, ms: number): Promise<number | null> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => (timer = setTimeout(() => {
    s.child.kill('SIGKILL');
    reject(new Error(`still running ${ms} ms later:\n${s.stderr().slice(-3000)}`));
  }, ms)));
  try {
    return await Promise.race([s.exited, late]);
  } finally {
    clearTimeout(timer);
  }
}

test('--tp 4: SIGTERM with a request decoding answers it (finish_reason abort) and every rank exits (code 0)', async () => {
  mkdirSync(HOME, { recursive: true });
  const s = await startServe(['--tp', '4'], 300_000, ENV);
  const inFlight = post(s.base, LONG);
  // let it reach decode, then stop the server
  for (let t = 0; t < 200 && !/Decode batch|#running-req: 1/.test(s.stderr()); t++) await new Promise((r) => setTimeout(r, 50));
  s.child.kill('SIGTERM');
  const r = await inFlight;
  assert.equal(r.status, 200);
  const body = (await r.json()) as { meta_info: { finish_reason: { type: string }; completion_tokens: number } };
  assert.equal(body.meta_info.finish_reason.type, 'abort');
  assert.ok(body.meta_info.completion_tokens < 4000);
  assert.equal(await exitWithin(s, 30_000), 0);
});

test('--tp 4: a rank thread that dies mid-request → that request gets a 500 naming the rank, the server exits 1', async () => {
  mkdirSync(HOME, { recursive: true });
  // rank 2 exits abruptly at its 40th step (after the warm-up's, during the request below)
  const s = await startServe(['--tp', '4'], 300_000, { ...ENV, TSGLANG_TEST_RANK_EXIT: '2:40' });
  const r = await post(s.base, LONG);
  assert.equal(r.status, 500);
  const body = (await r.json()) as { error: { message: string } };
  assert.match(body.error.message, /TP rank 2: thread exited \(code 70\)/);
  assert.doesNotMatch(body.error.message, /TP rank [13]/, 'only the dead rank is blamed');
  assert.equal(await exitWithin(s, 30_000), 1);
  assert.match(s.stderr(), /shutting the server down/);
});

test('--tp 4 --dp 2 --enable-dp-attention: a rank of one attention-DP group dies mid-request → both groups\' requests get 500s naming it, the server exits 1', async () => {
  mkdirSync(HOME, { recursive: true });
  // TP rank 3 (attn_tp rank 1 of group 1) exits abruptly at its 60th step, while both long requests decode
  const s = await startServe(['--tp', '4', '--dp', '2', '--enable-dp-attention'], 300_000, { ...ENV, TSGLANG_TEST_RANK_EXIT: '3:60' });
  const t0 = Date.now();
  const [a, b] = await Promise.all([post(s.base, LONG), post(s.base, LONG)]);
  for (const r of [a, b]) {
    assert.equal(r.status, 500);
    const body = (await r.json()) as { error: { message: string } };
    assert.match(body.error.message, /TP rank 3 thread exited with code 70|TP rank 3: thread exited \(code 70\)/, body.error.message);
    assert.doesNotMatch(body.error.message, /TP rank [012]\b/, 'only the dead rank is blamed');
  }
  assert.equal(await exitWithin(s, 30_000), 1);
  assert.ok(Date.now() - t0 < 120_000, 'no wait for --dist-timeout');
  assert.match(s.stderr(), /shutting the server down/);
});
