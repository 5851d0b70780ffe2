// Multi-node start-up through the TCP store, two "nodes" in this process (the bootstrap is all async, on the main
// thread): both join and agree on the run and the Gloo specs; node 1 without node 0; a node that never joins; the same
// --node-rank twice (1 and 0); different flags; a node that goes away; the shutdown announcement.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { bootstrapNodes, parseDistInitAddr } from '../src/distributed/index.js';
import type { NodeBootstrap, NodeBootstrapOptions } from '../src/distributed/index.js';
import { freePort } from '../bench/serve_child.js';

function opts(port: number, nodeRank: number, more: Partial<NodeBootstrapOptions> = {}): NodeBootstrapOptions {
  return { nnodes: 2, nodeRank, distInitAddr: `127.0.0.1:${port}`, timeoutMs: 3000, ranksPerNode: 2, fingerprint: 'tp=4 ep=1', ...more };
}

test('parseDistInitAddr: host:port and [v6]:port; anything else is a clear error', () => {
  assert.deepEqual(parseDistInitAddr('10.0.0.1:5000'), { host: '10.0.0.1', port: 5000 });
  assert.deepEqual(parseDistInitAddr('[::1]:29500'), { host: '::1', port: 29500 });
  assert.throws(() => parseDistInitAddr('10.0.0.1'), /--dist-init-addr must be HOST:PORT \(e\.g\. 10\.0\.0\.1:5000\), got '10\.0\.0\.1'/);
  assert.throws(() => parseDistInitAddr('h:99999'), /HOST:PORT/);
});

test('two nodes join: same run id, same Gloo prefixes, ranks per node; shutdown reaches node 1, which then leaves quietly', async () => {
  const port = await freePort();
  const [n0, n1] = await Promise.all([bootstrapNodes(opts(port, 0)), bootstrapNodes(opts(port, 1))]);
  try {
    assert.equal(n0.runId, n1.runId);
    assert.equal(n1.firstRank, 2);
    const s0 = n0.groupSpec('world', 0, 4);
    const s3 = n1.groupSpec('world', 3, 4);
    assert.equal(s0.prefix, s3.prefix);
    assert.equal(s3.bindHost, '127.0.0.1');
    assert.match(s3.context!, /node 1 of 2, --dist-init-addr 127\.0\.0\.1:\d+/);
    const shut = n1.waitShutdown();
    await n0.announceShutdown();
    await shut;
    let fatal: Error | null = null;
    n0.onFatal((e) => (fatal = e));
    await n1.close();
    await new Promise((r) => setTimeout(r, 200));
    assert.equal(fatal, null);
  } finally {
    await n1.close();
    await n0.close();
  }
});

test('node 1 going away (no shutdown announced) is fatal on node 0, naming the node and its ranks', async () => {
  const port = await freePort();
  const [n0, n1] = await Promise.all([bootstrapNodes(opts(port, 0)), bootstrapNodes(opts(port, 1))]);
  try {
    const fatal = new Promise<Error>((resolve) => n0.onFatal(resolve));
    await n1.close();
    assert.match((await fatal).message, /node 1 \(ranks 2\.\.3\) is gone: its connection to the TCP store closed .*\(node 0 of 2, --dist-init-addr 127\.0\.0\.1:\d+\)/);
  } finally {
    await n1.close();
    await n0.close();
  }
});

test('node 0 going away is fatal on node 1, naming --dist-init-addr', async () => {
  const port = await freePort();
  const [n0, n1] = await Promise.all([bootstrapNodes(opts(port, 0)), bootstrapNodes(opts(port, 1))]);
  const fatal = new Promise<Error>((resolve) => n1.onFatal(resolve));
  await n0.close();
  assert.match((await fatal).message, new RegExp(`lost node 0: the TCP store at --dist-init-addr 127\\.0\\.0\\.1:${port} closed the connection`));
  await n1.close();
});

test('node 1 started without node 0: error within --dist-timeout naming --dist-init-addr', async () => {
  const port = await freePort();
  const t0 = Date.now();
  await assert.rejects(bootstrapNodes(opts(port, 1, { timeoutMs: 800 })), new RegExp(`could not reach the TCP store of node 0 at --dist-init-addr 127\\.0\\.0\\.1:${port} within 800 ms`));
  assert.ok(Date.now() - t0 < 5000);
});

test('a node that never joins: node 0 names it and its ranks after the timeout', async () => {
  const port = await freePort();
  await assert.rejects(bootstrapNodes(opts(port, 0, { timeoutMs: 600 })), /node 1 \(ranks 2\.\.3\) did not join within 0\.6 s \(--dist-timeout\) \(node 0 of 2, --dist-init-addr 127\.0\.0\.1:\d+\)/);
});

test('the same --node-rank twice: the second node 1 is refused; a second node 0 cannot serve the store', async () => {
  const port = await freePort();
  const p0 = bootstrapNodes(opts(port, 0, { nnodes: 3 }));
  const first = bootstrapNodes(opts(port, 1, { nnodes: 3 }));
  await new Promise((r) => setTimeout(r, 300));
  await assert.rejects(bootstrapNodes(opts(port, 1, { nnodes: 3 })), /another node already joined as --node-rank 1 \(node 1 of 3, .*every node needs its own --node-rank in \[0, 3\)/);
  await assert.rejects(bootstrapNodes(opts(port, 0, { nnodes: 3 })), /cannot serve the TCP store on 127\.0\.0\.1:\d+ \(--dist-init-addr\).*is another node already running with --node-rank 0\?/);
  const third = bootstrapNodes(opts(port, 2, { nnodes: 3 }));
  const nodes: NodeBootstrap[] = await Promise.all([p0, first, third]);
  for (const n of nodes.reverse()) await n.close();
});

test('nodes started with different flags: a clear error naming both settings', async () => {
  const port = await freePort();
  const r = await Promise.allSettled([bootstrapNodes(opts(port, 0)), bootstrapNodes(opts(port, 1, { fingerprint: 'tp=8 ep=1' }))]);
  for (const x of r) {
    assert.equal(x.status, 'rejected');
    assert.match(String((x as PromiseRejectedResult).reason), /was started with different settings than node \d: --nnodes 2 vs 2, tp=\d ep=1 vs tp=\d ep=1/);
  }
});
