// The DeepSeek-V3.2 page's prefill context-parallel command (`--tp 8 --enable-prefill-cp --attn-cp-size 8
// --cp-strategy interleave --max-running-requests 32`, `--model` as the page spells it, pointing at a make-tiny
// DeepSeek-V3.2 checkpoint) as a server on this machine's cores: it starts with 8 CP ranks, answers (prompts whose
// length splits over 8 ranks and prompts that fall back), greedy equal to a tp 1 engine's, a chat request, and exits 0
// on SIGTERM; then the same command over two nodes (`--nnodes 2`, the CP group of 8 spanning them through Gloo):
// the same tokens and a clean SIGTERM of both nodes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, startServe } from '../../bench/serve_child.js';
import { run as makeTiny } from '../../src/cli/make_tiny.js';
import { loadGlooAddon } from '../../src/distributed/index.js';
import { Engine } from '../../src/engine/index.js';
import { exitsWithin, killNodes, startNodeProc } from '../helpers/node_proc.js';

const SEED_CP = ['--tp', '8', '--enable-prefill-cp', '--attn-cp-size', '8', '--cp-strategy', 'interleave', '--max-running-requests', '32'];
// 16 and 24 tokens split over the 8 CP ranks; 13 does not (that prefill runs without CP); decodes never split
const PROMPTS = [16, 24, 13].map((n, k) => Array.from({ length: n }, (_, i) => (1 + 37 * i + 101 * k) % 5000));
const N_NEW = 10;
const gloo = loadGlooAddon();

async function tp1(model: string): Promise<number[][]> {
  const e = await Engine.create({ modelPath: model, skipTokenizerInit: true, useWorkerThread: false, numThreads: 1, maxTotalTokens: 2048, logLevel: 'error' });
  try {
    const out: number[][] = [];
    for (const [i, p] of PROMPTS.entries()) {
      const ids: number[] = [];
      for await (const o of e.generate({ rid: `ref${i}`, inputIds: p, samplingParams: { temperature: 0, maxNewTokens: N_NEW, ignoreEos: true } })) ids.push(...o.outputIds);
      out.push(ids);
    }
    return out;
  } finally {
    await e.shutdown();
  }
}

async function greedy(base: string): Promise<number[][]> {
  return Promise.all(PROMPTS.map(async (p) => {
    const r = await fetch(`${base}/generate`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ input_ids: p, sampling_params: { max_new_tokens: N_NEW, temperature: 0, ignore_eos: true } }) });
    assert.equal(r.status, 200, await r.clone().text());
    return ((await r.json()) as { output_ids: number[] }).output_ids;
  }));
}

const dir = mkdtempSync(join(tmpdir(), 'tsglang-cp-'));
process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
let want: number[][] | null = null;
async function setUp(): Promise<number[][]> {
  if (want) return want;
  assert.equal(await makeTiny(['--arch', 'deepseek-v32', '--out', dir, '--num-shards', '1', '--eos-shaping', 'off']), 0);
  want = await tp1(dir);
  return want;
}

test('seed CP command (--tp 8 --enable-prefill-cp --attn-cp-size 8 --cp-strategy interleave): 8 CP ranks, tp 1 tokens, chat, clean SIGTERM', { timeout: 300_000 }, async () => {
  const ref = await setUp();
  const s = await startServe(['--model', dir, ...SEED_CP, '--max-total-tokens', '4096']);
  try {
    for (let r = 0; r < 8; r++) assert.match(s.stderr(), new RegExp(`\\[TP${r}\\] Load weight end\\. .*tp_size=8, ep_size=1, attn_cp_size=8 \\(attn_cp_rank ${r}\\)`));
    assert.deepEqual(await greedy(s.base), ref);
    const chat = await fetch(`${s.base}/v1/chat/completions`, {
      method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'x', messages: [{ role: 'user', content: 'Hello there, how are you today?' }], max_tokens: 8, temperature: 0 }),
    });
    assert.equal(chat.status, 200, await chat.clone().text());
    assert.equal(((await chat.json()) as { usage: { completion_tokens: number } }).usage.completion_tokens, 8);
  } finally {
    s.child.kill('SIGTERM');
  }
  assert.equal(await s.exited, 0, s.stderr().slice(-3000));
  assert.doesNotMatch(s.stderr(), /ERROR|rank failed/);
});

test('seed CP command over two nodes (--nnodes 2, the CP group of 8 across them): tp 1 tokens, SIGTERM stops both', { skip: gloo.addon ? false : `Gloo unavailable: ${gloo.reason}`, timeout: 300_000 }, async () => {
  const ref = await setUp();
  const [store, http] = [await freePort(), await freePort()];
  const node = (rank: number) => startNodeProc(['--model', dir, ...SEED_CP, '--nnodes', '2', '--node-rank', String(rank), '--dist-init-addr', `127.0.0.1:${store}`,
    '--port', String(http), '--max-total-tokens', '4096', '--skip-server-warmup'], 280_000);
  const [n0, n1] = [node(0), node(1)];
  try {
    await n0.waitFor(/ready to roll/);
    // (a worker thread's log lines may reach stderr after the ready line)
    await n0.waitFor(/\[TP3\] Load weight end\. .*attn_cp_size=8 \(attn_cp_rank 3\).*comm=gloo/);
    await n1.waitFor(/node ranks 4\.\.7 started \(threads per rank \d+, attn_cp_size 8\)/);
    assert.deepEqual(await greedy(`http://127.0.0.1:${http}`), ref);
    n0.child.kill('SIGTERM');
    const [e0, e1] = [await exitsWithin(n0, 60_000), await exitsWithin(n1, 60_000)];
    assert.equal(e0.code, 0, n0.stderr().slice(-3000));
    assert.equal(e1.code, 0, n1.stderr().slice(-3000));
  } finally {
    killNodes(n0, n1);
  }
});
