// The DeepSeek-V3.2 page's "CP + PP + EP + DP" command (`--nccl-init ADDR --nnodes 2 --node-rank R --tp 8 --pp-size 2
// --dp 1 --enable-dp-attention --moe-a2a-backend deepep --ep-size 16 --page-size 128 --chunked-prefill-size 16384
// --attention-backend dsa --dsa-prefill-backend flashmla_sparse --dsa-decode-backend flashmla_sparse
// --enable-prefill-cp --cp-strategy interleave --cuda-graph-max-bs-decode 128 --max-running-requests 128 …
// --tool-call-parser deepseekv32 --reasoning-parser deepseek-v3 --served-model-name DeepSeek-V3.2-dsa-pp-cp-ep-dp`) as
// written — only --model-path (a make-tiny DeepSeek-V3.2) and the ports changed — as two processes over loopback: 16 ranks, a pipeline stage of 8 per node (stage 0 on node 0, stage 1 on
// node 1); inside each stage dp 1 with dp-attention is attn_tp = tp = 8, --enable-prefill-cp makes the 8 ranks one
// CP group (attn_tp 1 inside it), and DeepEP sets ep_size = tp_size = 8 (SGLang's notice). Greedy /generate tokens
// (prompts that split over the 8 CP ranks and one that falls back) equal a tp 1 engine's; a chat request goes through
// the reasoning and tool-call parsers; SIGTERM on node 0 stops both nodes with exit code 0. The same command with the
// two nodes in two network namespaces joined by a veth pair (skipped where not permitted): tp 1 tokens, clean SIGTERM.
// The GPU-only knobs are accepted with the start-up notice, as the other seed tests treat them.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../../bench/serve_child.js';
import { run as makeTiny } from '../../src/cli/make_tiny.js';
import { loadGlooAddon } from '../../src/distributed/index.js';
import { Engine } from '../../src/engine/index.js';
import { createNetnsPair } from '../helpers/netns.js';
import { exitsWithin, killNodes, startNodeProc } from '../helpers/node_proc.js';

const gloo = loadGlooAddon();
const WATCHDOG_MS = 400_000;
const dir = mkdtempSync(join(tmpdir(), 'tsglang-ppcp-'));
process.on('exit', () => rmSync(dir, { recursive: true, force: true }));

// The page's --chunked-prefill-size 16384 makes SGLang's automatic --mem-fraction-static reserve 512 + 1.5 · 16384 MiB
// (24.5 GiB) for activations: below about 26 GiB of available RAM the formula's fraction is negative, and tsglang
// uses its floor (0.1) with a warning, so the command starts as written (asserted below).

/** The page's command for node `rank`, --model-path and the ports changed. */
function seedArgs(rank: number, initAddr: string, port: number): string[] {
  return ['--model-path', dir,
    '--nccl-init', initAddr, '--nnodes', '2', '--node-rank', String(rank), '--tp', '8', '--pp-size', '2', '--dp', '1', '--enable-dp-attention',
    '--moe-a2a-backend', 'deepep', '--ep-size', '16',
    '--page-size', '128',
    '--chunked-prefill-size', '16384',
    '--attention-backend', 'dsa',
    '--dsa-prefill-backend', 'flashmla_sparse',
    '--dsa-decode-backend', 'flashmla_sparse',
    '--enable-prefill-cp',
    '--cp-strategy', 'interleave',
    '--cuda-graph-max-bs-decode', '128',
    '--max-running-requests', '128',
    '--trust-remote-code', '--host', '0.0.0.0', '--port', String(port),
    '--log-requests',
    '--context-length', '65536',
    '--allow-auto-truncate', '--enable-metrics',
    '--tool-call-parser', 'deepseekv32', '--reasoning-parser', 'deepseek-v3',
    '--served-model-name', 'DeepSeek-V3.2-dsa-pp-cp-ep-dp'];
}

// 16 and 24 tokens split over the 8 CP ranks of each stage; 13 does not (that prefill runs without CP)
const PROMPTS = [16, 24, 13].map((n, k) => Array.from({ length: n }, (_, i) => (1 + 37 * i + 101 * k) % 500));
const N_NEW = 10;

/** Greedy continuations of PROMPTS from a tp 1 engine in this process (page size 128 as the command). */
async function tp1(): Promise<number[][]> {
  const e = await Engine.create({ modelPath: dir, skipTokenizerInit: true, useWorkerThread: false, numThreads: 1, pageSize: 128, maxTotalTokens: 4096, logLevel: 'error' });
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

let reference: number[][] | null = null;
/** Writes the checkpoint and the tp 1 tokens once (both tests use them). */
async function setUp(): Promise<number[][]> {
  if (reference) return reference;
  assert.equal(await makeTiny(['--arch', 'deepseek-v32', '--out', dir, '--num-shards', '1', '--eos-shaping', 'off']), 0);
  reference = await tp1();
  return reference;
}

test('seed CP + PP + EP + DP command (--nnodes 2 --tp 8 --pp-size 2 --dp 1 --enable-dp-attention --ep-size 16 --enable-prefill-cp) as two processes: tp 1 tokens and chat, SIGTERM stops both', { skip: gloo.addon ? false : `Gloo unavailable: ${gloo.reason}`, timeout: WATCHDOG_MS }, async () => {
  const want = await setUp();
  const [store, http] = [await freePort(), await freePort()];
  const n0 = startNodeProc(seedArgs(0, `127.0.0.1:${store}`, http), WATCHDOG_MS);
  const n1 = startNodeProc(seedArgs(1, `127.0.0.1:${store}`, http), WATCHDOG_MS);
  try {
    await n0.waitFor(/ready to roll/);
    // (a worker thread's log lines may reach stderr after the ready line)
    await n0.waitFor(/\[PP0 TP7\] Load weight end\. layers \[0, 1\), .*tp_size=8, pp_size=2, ep_size=8, attn_cp_size=8/);
    await n1.waitFor(/node ranks 8\.\.15 started \(threads per rank \d+, attn_cp_size 8\)/);
    assert.match(n0.stderr(), /DeepEP MoE is enabled\. The expert parallel size is adjusted to be the same as the tensor parallel size\[8\]\./);
    assert.match(n0.stderr(), /--enable-dp-attention with dp_size = 1 is switched off/);
    const base = `http://127.0.0.1:${http}`;
    const post = (path: string, body: unknown) => fetch(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const got = await Promise.all(PROMPTS.map(async (p) => {
      const r = await post('/generate', { input_ids: p, sampling_params: { max_new_tokens: N_NEW, temperature: 0, ignore_eos: true } });
      assert.equal(r.status, 200, await r.clone().text());
      return ((await r.json()) as { output_ids: number[] }).output_ids;
    }));
    assert.deepEqual(got, want, 'greedy = tp 1');
    // chat through the page's reasoning and tool-call parsers, under the served model name
    const chat = await post('/v1/chat/completions', { model: 'DeepSeek-V3.2-dsa-pp-cp-ep-dp', messages: [{ role: 'user', content: 'Hello there, how are you today?' }], max_tokens: 8, temperature: 0 });
    assert.equal(chat.status, 200, await chat.clone().text());
    const body = (await chat.json()) as { model: string; usage: { completion_tokens: number } };
    assert.deepEqual([body.model, body.usage.completion_tokens], ['DeepSeek-V3.2-dsa-pp-cp-ep-dp', 8]);
    n0.child.kill('SIGTERM');
    const [e0, e1] = [await exitsWithin(n0, 60_000), await exitsWithin(n1, 60_000)];
    assert.equal(e0.code, 0, n0.stderr().slice(-3000));
    assert.equal(e1.code, 0, n1.stderr().slice(-3000));
    assert.doesNotMatch(n0.stderr() + n1.stderr(), /ERROR|rank failed/);
  } finally {
    killNodes(n0, n1);
  }
});

test('seed CP + PP + EP + DP command with the two nodes in two network namespaces joined by a veth pair: tp 1 tokens, SIGTERM stops both', { skip: gloo.addon ? false : `Gloo unavailable: ${gloo.reason}`, timeout: WATCHDOG_MS }, async (t) => {
  const ns = createNetnsPair('ppcp');
  if ('skip' in ns) return t.skip(ns.skip);
  try {
    const want = await setUp();
    const addr = `${ns.addrs[0]}:29551`;
    const n0 = startNodeProc(seedArgs(0, addr, 30051), WATCHDOG_MS, ns.prefix(0));
    const n1 = startNodeProc(seedArgs(1, addr, 30051), WATCHDOG_MS, ns.prefix(1));
    try {
      await n0.waitFor(/ready to roll/);
      assert.match(n0.stderr(), new RegExp(`node 1: ${ns.addrs[1].replace(/\./g, '\\.')}`));
      // the HTTP server is reachable only inside namespace 0: ask from there
      const bodies = PROMPTS.map((p) => ({ input_ids: p, sampling_params: { max_new_tokens: N_NEW, temperature: 0, ignore_eos: true } }));
      const script = `Promise.all(${JSON.stringify(bodies)}.map(b=>fetch('http://${ns.addrs[0]}:30051/generate',{method:'POST',headers:{'content-type':'application/json'},body:JSON.stringify(b)})` +
        '.then(r=>r.json()).then(j=>j.output_ids))).then(o=>process.stdout.write(JSON.stringify(o)))';
      const r = spawnSync(ns.prefix(0)[0], [...ns.prefix(0).slice(1), process.execPath, '-e', script], { encoding: 'utf8', timeout: 120_000 });
      assert.deepEqual(JSON.parse(r.stdout || 'null'), want, r.stderr);
      n0.child.kill('SIGTERM');
      const [e0, e1] = [await exitsWithin(n0, 60_000), await exitsWithin(n1, 60_000)];
      assert.equal(e0.code, 0, n0.stderr().slice(-3000));
      assert.equal(e1.code, 0, n1.stderr().slice(-3000));
      assert.doesNotMatch(n0.stderr() + n1.stderr(), /ERROR|rank failed/);
    } finally {
      killNodes(n0, n1);
    }
  } finally {
    ns.remove();
  }
});
