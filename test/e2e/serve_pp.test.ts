// `tsglang serve --pp-size 2` end to end (issue 19, PP): greedy continuations of the DeepSeek fixture equal its
// goldens through HTTP with concurrent requests; SIGTERM with a request decoding answers it (finish_reason abort) and
// exits 0; a stage whose rank thread dies mid-request gives that request a 500 naming the stage and rank, and the
// server exits 1 (no hang).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startServe, type ServeChild } from '../../bench/serve_child.js';
import { FIXTURES_DIR, NEEDS_SHARED, SHARED_MISSING } from '../helpers/paths.js';

const HOME = join(tmpdir(), 'tsglang-e2e-home');
const ENV = { ...process.env, HOME, TSGLANG_CACHE_DIR: join(HOME, '.cache', 'tsglang') };
const MODEL = join(FIXTURES_DIR, 'tiny-deepseek-v32');
const golden = SHARED_MISSING !== null ? { prompts: [] } : (JSON.parse(readFileSync(join(MODEL, 'golden.json'), 'utf8')) as { prompts: { tokens: number[]; greedy: { tokens: number[] } }[] });
const post = (base: string, body: unknown) => fetch(`${base}/generate`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
const LONG = { input_ids: [1, 2, 3], sampling_params: { max_new_tokens: 4000, ignore_eos: true } };

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

test('--pp-size 2: concurrent greedy /generate equals the goldens; SIGTERM with a request decoding answers it (abort) and exits 0', NEEDS_SHARED, async () => {
  mkdirSync(HOME, { recursive: true });
  const s = await startServe(['--model-path', MODEL, '--skip-tokenizer-init', '--pp-size', '2', '--pp-max-micro-batch-size', '2', '--chunked-prefill-size', '32'], 300_000, ENV);
  try {
    const rs = await Promise.all(golden.prompts.map((p) => post(s.base, { input_ids: p.tokens, sampling_params: { temperature: 0, max_new_tokens: 16, ignore_eos: true } })));
    for (const [i, r] of rs.entries()) {
      assert.equal(r.status, 200);
      const body = (await r.json()) as { output_ids: number[] };
      assert.deepEqual(body.output_ids, golden.prompts[i].greedy.tokens, `prompt ${i}`);
    }
    const mark = s.stderr().length;
    const inFlight = post(s.base, LONG);
    // once its prefill ran, let it decode a little, then stop the server
    for (let t = 0; t < 400 && !s.stderr().slice(mark).includes('Prefill batch'); t++) await new Promise((r) => setTimeout(r, 50));
    await new Promise((r) => setTimeout(r, 300));
    s.child.kill('SIGTERM');
    const r = await inFlight;
    assert.equal(r.status, 200);
    const body = (await r.json()) as { meta_info: { finish_reason: { type: string }; completion_tokens: number } };
    assert.equal(body.meta_info.finish_reason.type, 'abort');
    assert.ok(body.meta_info.completion_tokens < 4000);
    assert.equal(await exitWithin(s, 30_000), 0);
  } finally {
    if (s.child.exitCode === null) s.child.kill('SIGKILL');
  }
});

test('--pp-size 2: a stage whose rank thread dies mid-request → that request gets a 500 naming the stage and rank, the server exits 1', NEEDS_SHARED, async () => {
  mkdirSync(HOME, { recursive: true });
  // global rank 1 (stage 1) exits abruptly at its 30th micro-batch (after the warm-up's, during the request below)
  const s = await startServe(['--model-path', MODEL, '--skip-tokenizer-init', '--pp-size', '2'], 300_000, { ...ENV, TSGLANG_TEST_RANK_EXIT: '1:30' });
  try {
    const r = await post(s.base, LONG);
    assert.equal(r.status, 500);
    const body = (await r.json()) as { error: { message: string } };
    assert.match(body.error.message, /pipeline-parallel step failed: PP stage 1 TP rank 0 \(rank 1\): thread exited \(code 70\)/);
    assert.doesNotMatch(body.error.message, /PP stage 0/, 'only the dead stage is blamed');
    assert.equal(await exitWithin(s, 30_000), 1);
    assert.match(s.stderr(), /shutting the server down/);
  } finally {
    if (s.child.exitCode === null) s.child.kill('SIGKILL');
  }
});
