// Multi-node DP-attention layout pieces: where each attention-DP group's communicators live as one node sees it
// (in-process inside a node, Gloo when a group spans nodes, absent when a group lives on another node), which node
// leads which group (attn_dp_rank = tp_rank // attn_tp_size, tp_size / nnodes ranks per node in order), and the
// FramedLink that carries engine-core messages between nodes (typed arrays intact, orderly close vs a lost peer).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { FramedLink, listenFramed, type GlooGroupRef } from '../src/distributed/index.js';
import { dpAttnCoreOptions, dpAttnProcessPlan } from '../src/engine/index.js';
import { dpAttnGroupRefs } from '../src/executor/index.js';

const tpRef = (bindHost: string): GlooGroupRef => ({
  backend: 'gloo',
  spec: { name: 'tp', storeHost: '10.0.0.1', storePort: 5000, prefix: 'run42/tp/', size: 16, bindHost, timeoutMs: 60_000, context: 'x' },
});

test('DP-attention groups over nodes: in-process inside a node, Gloo across nodes (the same on every node), absent elsewhere', () => {
  // --tp 16 --dp 2 --nnodes 2: group 0 = ranks 0..7 on node 0, group 1 = ranks 8..15 on node 1
  const n0 = dpAttnGroupRefs(16, 2, 60_000, { tp: tpRef('10.0.0.1'), nodeRank: 0, ranksPerNode: 8 });
  const n1 = dpAttnGroupRefs(16, 2, 60_000, { tp: tpRef('10.0.0.2'), nodeRank: 1, ranksPerNode: 8 });
  assert.equal(n0.tp.backend, 'gloo');
  assert.notEqual(n0.attn[0]?.backend ?? 'gloo', 'gloo');
  assert.notEqual(n0.step[0]?.backend ?? 'gloo', 'gloo');
  assert.deepEqual([n0.attn[1], n0.step[1], n1.attn[0], n1.step[0]], [null, null, null, null]);
  assert.notEqual(n1.attn[1]?.backend ?? 'gloo', 'gloo');
  // --tp 4 --dp 2 --nnodes 4: every group spans two nodes: Gloo groups both nodes derive alike (their own bind address)
  const a = dpAttnGroupRefs(4, 2, 60_000, { tp: tpRef('10.0.0.1'), nodeRank: 0, ranksPerNode: 1 });
  const b = dpAttnGroupRefs(4, 2, 60_000, { tp: tpRef('10.0.0.2'), nodeRank: 1, ranksPerNode: 1 });
  const spec = (r: unknown) => (r as GlooGroupRef).spec;
  assert.deepEqual([spec(a.attn[1]).name, spec(a.attn[1]).prefix, spec(a.attn[1]).size], ['attn_tp1', 'run42/attn_tp1/', 2]);
  assert.deepEqual([spec(a.step[0]).name, spec(a.step[0]).prefix], ['dp0_step', 'run42/dp0_step/']);
  assert.deepEqual({ ...spec(b.attn[1]), bindHost: '' }, { ...spec(a.attn[1]), bindHost: '' });
  assert.equal(spec(b.attn[1]).bindHost, '10.0.0.2');
  // attn_tp 1: no attn/step groups at all
  const one = dpAttnGroupRefs(2, 2, 60_000, { tp: tpRef('10.0.0.1'), nodeRank: 0, ranksPerNode: 1 });
  assert.deepEqual([...one.attn, ...one.step], [null, null, null, null]);
});

test('which node leads which group: the rank order of SGLang; each core gets its group, the node\'s ranks and threads', () => {
  const options = { modelPath: '/m', tpSize: 16, dpSize: 4, enableDpAttention: true, distTimeout: 60 };
  const plans = [0, 1].map((k) => dpAttnProcessPlan(options, { tp: tpRef('h'), nodeRank: k, ranksPerNode: 8 }));
  assert.deepEqual(plans.map((p) => p.ledHere), [[0, 1], [2, 3]]);
  assert.deepEqual(plans[1].localRanks, { first: 8, count: 8 });
  const o = dpAttnCoreOptions({ ...options, dpNodes: { tp: tpRef('h'), nodeRank: 1, ranksPerNode: 8, remoteCores: [] } }, plans[1], 3);
  assert.equal(o.dpAttention?.dpRank, 3);
  assert.deepEqual(o.dpAttention?.localRanks, { first: 8, count: 8 });
  assert.equal(o.dpNodes, undefined, 'the node-0 plan stays with the controller');
  assert.ok((o.numThreads ?? 0) >= 1);
  assert.throws(() => dpAttnProcessPlan({ ...options, dpSize: 3 }, null), /tp_size % dp_size == 0, got 16 % 3/);
});

test('FramedLink: structured messages both ways in order (typed arrays kept), close() ends quietly, a lost peer is an error', async () => {
  const got: unknown[] = [];
  const accepted: FramedLink[] = [];
  const { server, port } = await listenFramed('127.0.0.1', (l) => {
    accepted.push(l);
    l.onMessage((m) => {
      got.push(m);
      l.send({ echo: m });
    });
  });
  try {
    const c = await FramedLink.connect('127.0.0.1', port, 5000);
    const back: unknown[] = [];
    c.onMessage((m) => back.push(m));
    const msgs = [{ type: 'generate', ids: Int32Array.of(1, 2, 3), lp: [[-0.5, 7, null]] }, { type: 'kick', seq: 9 }, { big: 'x'.repeat(300_000) }];
    for (const m of msgs) c.send(m);
    for (let i = 0; i < 200 && back.length < msgs.length; i++) await new Promise((r) => setTimeout(r, 10));
    assert.deepEqual(got, msgs);
    assert.deepEqual(back, msgs.map((m) => ({ echo: m })));
    assert.ok((got[0] as { ids: unknown }).ids instanceof Int32Array);
    const quiet = new Promise<Error | null>((r) => c.onClose(r));
    c.close();
    assert.equal(await quiet, null);
    // a peer that goes away without closing: the other end reports it
    const d = await FramedLink.connect('127.0.0.1', port, 5000);
    const lost = new Promise<Error | null>((r) => d.onClose(r));
    for (let i = 0; i < 200 && accepted.length < 2; i++) await new Promise((r) => setTimeout(r, 10));
    (accepted[1] as unknown as { socket: { destroy(): void } }).socket.destroy();
    const err = await lost;
    assert.match(String(err?.message), /link to 127\.0\.0\.1:\d+: the connection closed/);
  } finally {
    server.close();
  }
  await assert.rejects(FramedLink.connect('127.0.0.1', 1, 300), /could not connect to 127\.0\.0\.1:1 within 300 ms/);
});
