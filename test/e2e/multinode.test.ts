// End to end, multi-node (`--nnodes 2 --node-rank 0|1 --dist-init-addr HOST:PORT --tp 4`, one tsglang process per
// node): the two nodes give the same greedy output as one process; killing node 1 mid-request answers the request with
// an error and node 0 exits (no hang, nothing left running); the same in two network namespaces joined by a veth pair
// (skipped where `ip netns` is not permitted), with a clean SIGTERM shutdown of both nodes; node 1 without node 0;
// wrong --node-rank; Gloo missing. Multi-process tests are slow on 2 cores: few requests, tiny model, short timeouts.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadGlooAddon } from '../../src/distributed/index.js';
import { createNetnsPair } from '../helpers/netns.js';
import { exitsWithin, killNodes, startNodeProc, type NodeProc } from '../helpers/node_proc.js';
import { TSGLANG_BIN } from '../helpers/paths.js';
import { freePort } from '../../bench/serve_child.js';

const gloo = loadGlooAddon();
const skipGloo = gloo.addon ? false : `Gloo unavailable: ${gloo.reason}`;
const MODEL = mkdtempSync(join(tmpdir(), 'tsg-mn-'));
const made = spawnSync(process.execPath, [TSGLANG_BIN, 'make-tiny', '--arch', 'minimax-m2', '--out', MODEL, '--eos-shaping', 'off'], { encoding: 'utf8' });
if (made.status !== 0) throw new Error(`make-tiny failed: ${made.stderr}`);
process.on('exit', () => rmSync(MODEL, { recursive: true, force: true }));
const WATCHDOG_MS = 120_000;
const GEN = { input_ids: [11, 22, 33, 44, 55], sampling_params: { max_new_tokens: 12, temperature: 0 } };

type Node = NodeProc;

/** Starts `tsglang serve` (inside namespace `prefix` when given). A watchdog kills it after WATCHDOG_MS. */
function startNode(args: string[], prefix: string[] = [], env: NodeJS.ProcessEnv = {}): Node {
  return startNodeProc(['--model-path', MODEL, '--skip-server-warmup', ...args], WATCHDOG_MS, prefix, env);
}

function kill(...nodes: Node[]): void {
  killNodes(...nodes);
}

async function generate(url: string, body: unknown = GEN): Promise<{ output_ids: number[] }> {
  const r = await fetch(`${url}/generate`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  assert.equal(r.status, 200, await r.clone().text());
  return (await r.json()) as { output_ids: number[] };
}

/** Whether namespaces can be made here (probed once). */
let netnsProbe: boolean | null = null;
function netnsAvailable(): boolean {
  if (netnsProbe === null) {
    const ns = createNetnsPair('pr');
    netnsProbe = !('skip' in ns);
    if (!('skip' in ns)) ns.remove();
  }
  return netnsProbe;
}

let reference: number[] | null = null;
/** Greedy output ids of one process with --tp 4 (the reference both multi-node runs must match). */
async function referenceIds(): Promise<number[]> {
  if (reference) return reference;
  const port = await freePort();
  const one = startNode(['--tp', '4', '--port', String(port)]);
  try {
    await one.waitFor(/ready to roll/);
    reference = (await generate(`http://127.0.0.1:${port}`)).output_ids;
    return reference;
  } finally {
    kill(one);
  }
}

test('two nodes over loopback (--tp 4, node 1 spelled --nccl-init): killing node 1 mid-request errors the request and node 0 exits', { skip: skipGloo, timeout: WATCHDOG_MS * 2 }, async () => {
  const [store, http] = [await freePort(), await freePort()];
  const n0 = startNode(['--tp', '4', '--nnodes', '2', '--node-rank', '0', '--dist-init-addr', `127.0.0.1:${store}`, '--port', String(http), '--dist-timeout', '60']);
  const n1 = startNode(['--tp', '4', '--nnodes', '2', '--node-rank', '1', '--nccl-init', `127.0.0.1:${store}`, '--dist-timeout', '60']);
  try {
    await n0.waitFor(/ready to roll/);
    // Without namespaces the equality with one process is checked here (else in the veth test).
    if (!netnsAvailable()) assert.deepEqual((await generate(`http://127.0.0.1:${http}`)).output_ids, await referenceIds());
    assert.match(n1.stderr(), /node 1: no HTTP server on this node/);
    // A long request, then node 1 dies under it.
    const pending = fetch(`http://127.0.0.1:${http}/generate`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ input_ids: [1, 2, 3], sampling_params: { max_new_tokens: 100_000, temperature: 0, ignore_eos: true } }),
    }).then(async (r) => ({ status: r.status, body: await r.text() }));
    await new Promise((r) => setTimeout(r, 1000));
    n1.child.kill('SIGKILL');
    const res = await pending;
    assert.notEqual(res.status, 200, res.body);
    // The first rank of node 0 to see the reset connection names itself (rank 0 directly, rank 1 via the board).
    assert.match(res.body, /failed to run this request: .*group '(tp|world)' rank [01] of 4: .*failed.*\(node 0 of 2, --dist-init-addr 127\.0\.0\.1:\d+\)/);
    const e0 = await exitsWithin(n0, 20_000);
    assert.equal(e0.code, 1, n0.stderr());
    assert.match(n0.stderr(), /node 1 \(ranks 2\.\.3\) is gone/);
  } finally {
    kill(n0, n1);
  }
});

test('two nodes in two network namespaces joined by a veth pair: same greedy output; SIGTERM on node 0 stops both cleanly', { skip: skipGloo, timeout: WATCHDOG_MS * 2 }, async (t) => {
  const ns = createNetnsPair('mn');
  if ('skip' in ns) return t.skip(ns.skip);
  try {
    const want = await referenceIds();
    const addr = `${ns.addrs[0]}:29511`;
    const n0 = startNode(['--tp', '4', '--nnodes', '2', '--node-rank', '0', '--dist-init-addr', addr, '--host', ns.addrs[0], '--port', '30011', '--dist-timeout', '60'], ns.prefix(0));
    const n1 = startNode(['--tp', '4', '--nnodes', '2', '--node-rank', '1', '--dist-init-addr', addr, '--dist-timeout', '60'], ns.prefix(1));
    try {
      await n0.waitFor(/ready to roll/);
      // The HTTP server is reachable only inside namespace 0: ask from there.
      const script = `fetch('http://${ns.addrs[0]}:30011/generate',{method:'POST',headers:{'content-type':'application/json'},body:${JSON.stringify(JSON.stringify(GEN))}}).then(r=>r.text()).then(t=>process.stdout.write(t))`;
      const r = spawnSync(ns.prefix(0)[0], [...ns.prefix(0).slice(1), process.execPath, '-e', script], { encoding: 'utf8', timeout: 60_000 });
      assert.deepEqual((JSON.parse(r.stdout) as { output_ids: number[] }).output_ids, want, r.stderr);
      assert.match(n0.stderr(), new RegExp(`node 1: ${ns.addrs[1].replace(/\./g, '\\.')}`));
      n0.child.kill('SIGTERM');
      const [e0, e1] = [await exitsWithin(n0, 20_000), await exitsWithin(n1, 20_000)];
      assert.equal(e0.code, 0, n0.stderr());
      assert.equal(e1.code, 0, n1.stderr());
      assert.match(n1.stderr(), /node 1: node 0 shut down; exiting/);
    } finally {
      kill(n0, n1);
    }
  } finally {
    ns.remove();
  }
});

test('node 1 started without node 0 exits within --dist-timeout naming --dist-init-addr', { skip: skipGloo, timeout: 60_000 }, async () => {
  const store = await freePort();
  const n1 = startNode(['--tp', '2', '--nnodes', '2', '--node-rank', '1', '--dist-init-addr', `127.0.0.1:${store}`, '--dist-timeout', '2']);
  try {
    const e = await exitsWithin(n1, 30_000);
    assert.equal(e.code, 1, n1.stderr());
    assert.match(n1.stderr(), new RegExp(`could not reach the TCP store of node 0 at --dist-init-addr 127\\.0\\.0\\.1:${store} within 2000 ms`));
  } finally {
    kill(n1);
  }
});

test('wrong --node-rank: out of range is a flag error; a second node with the same rank is refused while the first keeps its place', { skip: skipGloo, timeout: 60_000 }, async () => {
  const bad = startNode(['--tp', '2', '--nnodes', '2', '--node-rank', '2', '--dist-init-addr', '127.0.0.1:1']);
  assert.equal((await exitsWithin(bad, 30_000)).code, 2, bad.stderr());
  assert.match(bad.stderr(), /--node-rank.*must be in \[0, nnodes=2\), got 2/);
  const store = await freePort();
  const addr = `127.0.0.1:${store}`;
  const n0 = startNode(['--tp', '3', '--nnodes', '3', '--node-rank', '0', '--dist-init-addr', addr, '--port', String(await freePort()), '--dist-timeout', '30']);
  const n1 = startNode(['--tp', '3', '--nnodes', '3', '--node-rank', '1', '--dist-init-addr', addr, '--dist-timeout', '30']);
  try {
    await n1.waitFor(/joining through the TCP store/);
    await new Promise((r) => setTimeout(r, 1500));
    const dup = startNode(['--tp', '3', '--nnodes', '3', '--node-rank', '1', '--dist-init-addr', addr, '--dist-timeout', '30']);
    const e = await exitsWithin(dup, 30_000);
    assert.equal(e.code, 1, dup.stderr());
    assert.match(dup.stderr(), /another node already joined as --node-rank 1 \(node 1 of 3, --dist-init-addr 127\.0\.0\.1:\d+\)/);
    assert.equal(n0.child.exitCode, null);
  } finally {
    kill(n0, n1);
  }
});

test('--nnodes 2 without the Gloo addon stops at start-up naming libgloo-dev', { timeout: 60_000 }, async () => {
  const n = startNode(['--tp', '2', '--nnodes', '2', '--node-rank', '0', '--dist-init-addr', '127.0.0.1:1', '--port', String(await freePort())], [], { TSGLANG_GLOO_ADDON: '/nonexistent/dist_gloo.node' });
  const e = await exitsWithin(n, 30_000);
  assert.equal(e.code, 2, n.stderr());
  assert.match(n.stderr(), /multi-node serving \(--nnodes 2\) needs Gloo: the Gloo addon is not built .*install libgloo-dev/);
});
