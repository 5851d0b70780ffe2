// Point-to-point links between pipeline stages (src/distributed/p2p_link.ts): in one process (MessagePort + futex) and
// across processes (a two-rank Gloo group; skipped with the reason when dist_gloo.node is absent): messages arrive
// whole and in order, a send returns before the receiver takes the message, a receive times out naming the link, and
// a peer that dies or closes its end makes the blocked receiver throw at once instead of waiting out the timeout.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Worker } from 'node:worker_threads';
import { createLocalLink, loadGlooAddon, openLink, TcpStoreServer, type LinkEnd } from '../src/distributed/index.js';
import { linkMessage, type LinkJob } from './helpers/link_worker.js';

const WORKER = new URL('./helpers/link_worker.js', import.meta.url);
const gloo = loadGlooAddon();
const skipGloo = gloo.addon && typeof gloo.addon.glooSendAsync === 'function' ? false : `Gloo point-to-point unavailable: ${gloo.reason ?? 'old dist_gloo.node'}`;

function start(job: LinkJob): { done: Promise<{ ok?: boolean; error?: string }>; worker: Worker } {
  const ports = [job.inEnd, job.outEnd].flatMap((e) => (e && e.backend === 'port' ? [e.port] : []));
  const worker = new Worker(WORKER, { workerData: job, transferList: ports });
  const done = new Promise<{ ok?: boolean; error?: string }>((resolve, reject) => {
    worker.once('message', resolve);
    worker.once('error', reject);
    worker.once('exit', (code) => resolve({ error: `exit ${code}` }));
  });
  return { done, worker };
}

/** Sends `count` messages to an echo thread and checks every echo (length and byte sum) in order. */
async function echoRound(toEcho: { send: LinkEnd; recv: LinkEnd }, back: { send: LinkEnd; recv: LinkEnd }, count: number): Promise<void> {
  const w = start({ scenario: 'echo', inEnd: toEcho.recv, outEnd: back.send, count });
  const out = openLink(toEcho.send);
  const inb = openLink(back.recv);
  const t0 = performance.now();
  for (let i = 0; i < count; i++) out.send(linkMessage(i)); // posted without waiting for the echo thread
  const posted = performance.now() - t0;
  for (let i = 0; i < count; i++) {
    const r = new Uint32Array(inb.recv(30_000).slice().buffer);
    const m = linkMessage(i);
    assert.deepEqual([r[0], r[1]], [m.length, m.reduce((a, b) => a + b, 0)], `message ${i}`);
  }
  assert.deepEqual(await w.done, { ok: true });
  out.close();
  inb.close();
  assert.ok(posted >= 0);
}

test('in-process link: messages arrive whole and in order, sends do not wait, a receive times out naming the link', async () => {
  await echoRound(createLocalLink('to_echo'), createLocalLink('back'), 40);
  const { send, recv } = createLocalLink('idle_link', 200);
  const r = openLink(recv);
  const t0 = Date.now();
  assert.throws(() => r.recv(), { name: 'DistributedError', message: /link 'idle_link': no message within 200 ms/ });
  assert.ok(Date.now() - t0 < 5000);
  const s = openLink(send);
  s.send(Uint8Array.of(1, 2, 3));
  s.close(); // a message sent before the close is still delivered, then the closed link throws
  assert.deepEqual([...r.recv()], [1, 2, 3]);
  assert.throws(() => r.recv(), /link 'idle_link' is closed \(the sender left\)/);
});

test('in-process link: a peer thread that dies wakes the receiver blocked on it at once (its exit hook breaks the link)', async () => {
  const l = createLocalLink('to_dead');
  const w = start({ scenario: 'die', outEnd: l.send, count: 0 });
  const r = openLink(l.recv);
  const t0 = Date.now();
  assert.throws(() => r.recv(60_000), /link 'to_dead' is broken \(the stage thread exited with code 70\)/);
  assert.ok(Date.now() - t0 < 10_000, `woke after ${Date.now() - t0} ms`);
  assert.equal((await w.done).error, 'exit 70');
});

test('Gloo link: messages arrive whole and in order between two contexts; a sender that leaves makes the receiver throw', { skip: skipGloo }, async () => {
  const store = await TcpStoreServer.listen('127.0.0.1', 0);
  try {
    const spec = { name: 'g_link', storeHost: '127.0.0.1', storePort: store.port, prefix: 'g_link/', size: 2, bindHost: '127.0.0.1', timeoutMs: 30_000, context: 'test' };
    const rx = start({ scenario: 'check', inEnd: { backend: 'gloo', name: 'g_link', side: 'recv', spec }, count: 30 });
    const tx = start({ scenario: 'sender', outEnd: { backend: 'gloo', name: 'g_link', side: 'send', spec }, count: 30 });
    assert.deepEqual(await tx.done, { ok: true });
    const r = (await rx.done) as { ok?: boolean; after?: string; afterMs?: number; error?: string };
    assert.equal(r.error, undefined);
    assert.match(r.after!, /DistributedError: link 'g_link': receive failed/);
    assert.ok(r.afterMs! < 10_000, `failed after ${r.afterMs} ms`);
  } finally {
    await store.close();
  }
});
