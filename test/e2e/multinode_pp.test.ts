// End to end, pipeline parallelism across nodes (`--nnodes 2 --pp-size 2`, one tsglang process per node, a stage per
// node as SGLang places them: world = tp · pp ranks, node k holds global ranks k·tp … — stage k): stage 0 and the
// scheduler on node 0, stage 1 on node 1, the residual stream and the samples over two-rank Gloo links. Over loopback
// (--tp 2: each stage's TP group is a Gloo group too): concurrent greedy continuations of the DeepSeek fixture equal
// its goldens; node 1 killed mid-request → that request gets a 500 naming the lost stage rank and its node, node 0
// exits 1 well within --dist-timeout. In two network namespaces joined by a veth pair (skipped where not permitted;
// --tp 1): the goldens again, and SIGTERM on node 0 stops both nodes with exit code 0.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { freePort } from '../../bench/serve_child.js';
import { loadGlooAddon } from '../../src/distributed/index.js';
import { createNetnsPair } from '../helpers/netns.js';
import { exitsWithin, killNodes, startNodeProc } from '../helpers/node_proc.js';
import { FIXTURES_DIR, SHARED_MISSING } from '../helpers/paths.js';

const gloo = loadGlooAddon();
const skip = SHARED_MISSING ?? (gloo.addon ? false : `Gloo unavailable: ${gloo.reason}`);
const MODEL = join(FIXTURES_DIR, 'tiny-deepseek-v32');
const golden = SHARED_MISSING !== null ? { prompts: [] } : (JSON.parse(readFileSync(join(MODEL, 'golden.json'), 'utf8')) as { prompts: { tokens: number[]; greedy: { tokens: number[] } }[] });
const WATCHDOG_MS = 240_000;
const N_NEW = 12;
const bodies = (): unknown[] => golden.prompts.map((p) => ({ input_ids: p.tokens, sampling_params: { temperature: 0, max_new_tokens: N_NEW, ignore_eos: true } }));
const wants = (): number[][] => golden.prompts.map((p) => p.greedy.tokens.slice(0, N_NEW));

/** Both nodes' flags: the two-node PP layout, the fixture (no tokenizer), short timeouts. */
function nodeArgs(rank: number, initAddr: string, tp: number, extra: string[]): string[] {
  return ['--model-path', MODEL, '--skip-tokenizer-init', '--skip-server-warmup', '--tp', String(tp), '--pp-size', '2', '--pp-max-micro-batch-size', '2',
    '--nnodes', '2', '--node-rank', String(rank), '--dist-init-addr', initAddr, '--dist-timeout', '60', ...extra];
}

test('--nnodes 2 --pp-size 2 --tp 2 over loopback: a stage per node, goldens; node 1 killed mid-request → 500 naming stage 1 on node 1, node 0 exits 1', { skip, timeout: WATCHDOG_MS }, async () => {
  const [store, http] = [await freePort(), await freePort()];
  const addr = `127.0.0.1:${store}`;
  const n0 = startNodeProc(nodeArgs(0, addr, 2, ['--port', String(http)]), WATCHDOG_MS);
  const n1 = startNodeProc(nodeArgs(1, addr, 2, []), WATCHDOG_MS);
  try {
    await n0.waitFor(/ready to roll/);
    assert.match(n0.stderr(), /ranks 0\.\.1 on this node/);
    assert.match(n1.stderr(), /ranks 2\.\.3 on this node/);
    assert.match(n1.stderr(), /node 1: no HTTP server on this node \(node 0 serves\); running pipeline-stage ranks only/);
    assert.match(n0.stderr(), /\[PP0 TP1\] Load weight end\. layers \[0, \d+\)/);
    const base = `http://127.0.0.1:${http}`;
    const rs = await Promise.all(bodies().map((b) => fetch(`${base}/generate`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(b) })));
    const got = await Promise.all(rs.map(async (r) => {
      assert.equal(r.status, 200, await r.clone().text());
      return ((await r.json()) as { output_ids: number[] }).output_ids;
    }));
    assert.deepEqual(got, wants(), 'greedy over two nodes = the goldens (tp 1)');
    // a long request; node 1 (stage 1) dies under it
    const mark = n0.stderr().length;
    const pending = fetch(`${base}/generate`, {
      method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ input_ids: [1, 2, 3], sampling_params: { max_new_tokens: 100_000, temperature: 0, ignore_eos: true } }),
    }).then(async (r) => ({ status: r.status, body: await r.text() }));
    for (let t = 0; t < 400 && !n0.stderr().slice(mark).includes('Prefill batch'); t++) await new Promise((r) => setTimeout(r, 50));
    await new Promise((r) => setTimeout(r, 500));
    const killedAt = Date.now();
    n1.child.kill('SIGKILL');
    const res = await pending;
    assert.equal(res.status, 500, res.body);
    assert.match(res.body, /pipeline-parallel step failed: .*PP stage 1 TP rank [01] \(rank [23]\) on node 1/);
    const e0 = await exitsWithin(n0, 30_000);
    assert.equal(e0.code, 1, n0.stderr().slice(-3000));
    assert.ok(Date.now() - killedAt < 60_000, 'node 0 stopped within --dist-timeout');
  } finally {
    killNodes(n0, n1);
  }
});

test('--nnodes 2 --pp-size 2 in two network namespaces joined by a veth pair: goldens; SIGTERM on node 0 stops both (exit 0)', { skip, timeout: WATCHDOG_MS }, async (t) => {
  const ns = createNetnsPair('pp');
  if ('skip' in ns) return t.skip(ns.skip);
  try {
    const addr = `${ns.addrs[0]}:29541`;
    const n0 = startNodeProc(nodeArgs(0, addr, 1, ['--host', ns.addrs[0], '--port', '30041']), WATCHDOG_MS, ns.prefix(0));
    const n1 = startNodeProc(nodeArgs(1, addr, 1, []), WATCHDOG_MS, ns.prefix(1));
    try {
      await n0.waitFor(/ready to roll/);
      assert.match(n0.stderr(), new RegExp(`node 1: ${ns.addrs[1].replace(/\./g, '\\.')}`));
      // the HTTP server is reachable only inside namespace 0: ask from there
      const script = `Promise.all(${JSON.stringify(bodies())}.map(b=>fetch('http://${ns.addrs[0]}:30041/generate',{method:'POST',headers:{'content-type':'application/json'},body:JSON.stringify(b)})` +
        '.then(r=>r.json()).then(j=>j.output_ids))).then(o=>process.stdout.write(JSON.stringify(o)))';
      const r = spawnSync(ns.prefix(0)[0], [...ns.prefix(0).slice(1), process.execPath, '-e', script], { encoding: 'utf8', timeout: 120_000 });
      assert.deepEqual(JSON.parse(r.stdout || 'null'), wants(), r.stderr);
      n0.child.kill('SIGTERM');
      const [e0, e1] = [await exitsWithin(n0, 30_000), await exitsWithin(n1, 30_000)];
      assert.equal(e0.code, 0, n0.stderr().slice(-3000));
      assert.equal(e1.code, 0, n1.stderr().slice(-3000));
      assert.match(n1.stderr(), /node 1: node 0 shut down; exiting/);
      assert.doesNotMatch(n0.stderr() + n1.stderr(), /ERROR|rank failed/);
    } finally {
      killNodes(n0, n1);
    }
  } finally {
    ns.remove();
  }
});

// Opt-in (TSGLANG_TEST_PP_NODE_FAULTS=1; two more processes): a stage rank thread of node 1 dies mid-request (global
// rank 3 = stage 1 TP rank 1 exits abruptly at its 40th micro-batch): the request gets a 500 naming stage 1 on node 1,
// node 1 exits 1 naming the rank that died, node 0 exits 1.
test('--nnodes 2 --pp-size 2 --tp 2: a stage rank thread on node 1 that dies mid-request → 500 naming stage 1, both nodes exit 1', {
  skip: skip || (process.env.TSGLANG_TEST_PP_NODE_FAULTS === '1' ? false : 'opt-in: TSGLANG_TEST_PP_NODE_FAULTS=1'), timeout: WATCHDOG_MS,
}, async () => {
  const [store, http] = [await freePort(), await freePort()];
  const addr = `127.0.0.1:${store}`;
  const n0 = startNodeProc(nodeArgs(0, addr, 2, ['--port', String(http)]), WATCHDOG_MS);
  const n1 = startNodeProc(nodeArgs(1, addr, 2, []), WATCHDOG_MS, [], { TSGLANG_TEST_RANK_EXIT: '3:40' });
  try {
    await n0.waitFor(/ready to roll/);
    const r = await fetch(`http://127.0.0.1:${http}/generate`, {
      method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ input_ids: [1, 2, 3], sampling_params: { max_new_tokens: 100_000, temperature: 0, ignore_eos: true } }),
    });
    const body = await r.text();
    assert.equal(r.status, 500, body);
    assert.match(body, /pipeline-parallel step failed: .*PP stage 1 TP rank [01] \(rank [23]\) on node 1/);
    const [e0, e1] = [await exitsWithin(n0, 30_000), await exitsWithin(n1, 30_000)];
    assert.equal(e1.code, 1, n1.stderr().slice(-3000));
    assert.match(n1.stderr(), /PP stage 1 TP rank 1 \(rank 3\): thread exited \(code 70\)/);
    assert.equal(e0.code, 1, n0.stderr().slice(-3000));
  } finally {
    killNodes(n0, n1);
  }
});
