// The Gloo communicator (optional: skipped with the reason when dist_gloo.node is absent) and the TCP store:
// every collective on 2 and 3 ranks (rank threads, each with its own Gloo context, meeting through a TcpStoreServer)
// with the same bits as the rank-order f32 sum; a rank process killed mid-collective makes its peer fail with a
// DistributedError naming the group and the context within seconds (no hang); a peer that never joins → timeout.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { Worker } from 'node:worker_threads';
import { fileURLToPath } from 'node:url';
import { loadGlooAddon, TcpStoreClient, TcpStoreServer } from '../src/distributed/index.js';
import type { GlooGroupSpec } from '../src/distributed/index.js';
import { inputValue } from './helpers/comm_inputs.js';

const gloo = loadGlooAddon();
const skipGloo = gloo.addon ? false : `Gloo unavailable: ${gloo.reason}`;
const WORKER = new URL('./helpers/comm_rank_worker.js', import.meta.url);
const PROC = fileURLToPath(new URL('./helpers/gloo_rank_proc.js', import.meta.url));

function spec(store: TcpStoreServer, prefix: string, rank: number, size: number, timeoutMs = 20_000): GlooGroupSpec {
  return { name: 'world', storeHost: '127.0.0.1', storePort: store.port, prefix, rank, size, bindHost: '127.0.0.1', timeoutMs, context: 'test node' };
}

test('TCP store: set/get/wait/add/check, a get that waits for a later set, a timed-out wait names the keys', async () => {
  const store = await TcpStoreServer.listen('127.0.0.1', 0);
  const a = await TcpStoreClient.connect('127.0.0.1', store.port, 2000);
  const b = await TcpStoreClient.connect('127.0.0.1', store.port, 2000);
  try {
    const later = b.get('k', 5000);
    await a.set('k', 'v1');
    assert.equal((await later).toString(), 'v1');
    assert.equal(await a.add('n', 2), 2);
    assert.equal(await b.add('n', 3), 5);
    assert.equal(await a.check(['k', 'n']), true);
    assert.equal(await a.check(['k', 'zz']), false);
    await assert.rejects(a.wait(['k', 'missing1', 'missing2'], 150), /timed out waiting for missing1,missing2 in the TCP store/);
    await a.delete('k');
    assert.equal(await a.check(['k']), false);
  } finally {
    a.close();
    b.close();
    await store.close();
  }
});

test('TCP store: connecting to an address nobody serves fails within the timeout, naming --dist-init-addr', async () => {
  const store = await TcpStoreServer.listen('127.0.0.1', 0);
  const port = store.port;
  await store.close();
  const t0 = Date.now();
  await assert.rejects(TcpStoreClient.connect('127.0.0.1', port, 500), new RegExp(`could not reach the TCP store of node 0 at --dist-init-addr 127.0.0.1:${port} within 500 ms`));
  assert.ok(Date.now() - t0 < 5000);
});

async function collectivesOverGloo(P: number, sizes: number[]): Promise<void> {
  const store = await TcpStoreServer.listen('127.0.0.1', 0);
  try {
    const replies = await Promise.all(
      Array.from({ length: P }, (_, rank) =>
        new Promise<{ rank: number; results?: Record<string, ArrayBufferView>; error?: string }>((resolve, reject) => {
          const w = new Worker(WORKER, { workerData: { handle: null, gloo: spec(store, `t${P}/`, rank, P), rank, scenario: 'collectives', sizes } });
          w.once('message', (m) => {
            resolve(m);
            void w.terminate();
          });
          w.once('error', reject);
        }),
      ),
    );
    for (const r of replies) assert.equal(r.error, undefined, `rank ${r.rank}: ${r.error}`);
    for (const n of sizes) {
      for (let r = 0; r < P; r++) {
        const res = replies[r].results!;
        const ar = res[`allReduce/${n}`] as Float32Array;
        for (let i = 0; i < n; i++) {
          let want = inputValue(0, i, 1);
          for (let q = 1; q < P; q++) want = Math.fround(want + inputValue(q, i, 1));
          if (!Object.is(ar[i], want)) assert.fail(`rank ${r} allReduce/${n}[${i}] = ${ar[i]}, want ${want}`);
        }
        const rs = res[`reduceScatter/${n}`] as Float32Array;
        for (let i = 0; i < n; i++) {
          let want = inputValue(0, r * n + i, 3);
          for (let q = 1; q < P; q++) want = Math.fround(want + inputValue(q, r * n + i, 3));
          if (!Object.is(rs[i], want)) assert.fail(`rank ${r} reduceScatter/${n}[${i}]`);
        }
        const g = res[`allGatherI32/${n}`] as Int32Array;
        for (let q = 0; q < P; q++) for (let i = 0; i < n; i++) if (g[q * n + i] !== q * 100000 + i) assert.fail(`allGather rank ${r}`);
        for (let root = 0; root < P; root++) {
          const b = res[`broadcast${root}/${n}`] as Float32Array;
          for (let i = 0; i < n; i++) if (b[i] !== inputValue(root, i, 4)) assert.fail(`broadcast${root}/${n} rank ${r}[${i}]`);
        }
        const a2a = res[`allToAll/${n}`] as Int32Array;
        for (let j = 0; j < P; j++) for (let i = 0; i < n; i++) if (a2a[j * n + i] !== j * 1_000_000 + r * n + i) assert.fail(`allToAll/${n} rank ${r}`);
      }
    }
  } finally {
    await store.close();
  }
}

test('Gloo: every collective on 2 ranks, bits = rank-order f32 sum', { skip: skipGloo }, () => collectivesOverGloo(2, [0, 1, 7, 1000, 7168]));
test('Gloo: every collective on 3 ranks (the all-to-all all-reduce path at 70 000 floats)', { skip: skipGloo }, () => collectivesOverGloo(3, [5, 70_000]));

test('Gloo: a rank that never joins → DistributedError after the timeout', { skip: skipGloo }, async () => {
  const store = await TcpStoreServer.listen('127.0.0.1', 0);
  try {
    // On a rank thread, as in the server (the store answers from this thread's event loop meanwhile).
    const reply = await new Promise<{ error?: string; ms?: number }>((resolve, reject) => {
      const w = new Worker(WORKER, { workerData: { handle: null, gloo: spec(store, 'lonely/', 0, 2, 800), rank: 0, scenario: 'collectives', sizes: [1] } });
      w.once('message', resolve);
      w.once('error', reject);
    });
    assert.match(reply.error!, /group 'world' rank 0 of 2: could not join through the TCP store at 127\.0\.0\.1:\d+: timed out after 800 ms waiting for keys .*\(test node\)/);
    assert.ok(reply.ms! >= 790 && reply.ms! < 5000, `${reply.ms} ms`);
  } finally {
    await store.close();
  }
});

test('Gloo: killing a rank process mid-collective makes its peer fail (connection reset, at worst the collective timeout), no hang', { skip: skipGloo }, async () => {
  const store = await TcpStoreServer.listen('127.0.0.1', 0);
  // The collective timeout bounds the worst case (a peer that dies at an unlucky moment of Gloo's protocol may only be
  // noticed by the timeout; usually the reset connection fails the call within milliseconds).
  const procs = [0, 1].map((rank) => spawn(process.execPath, [PROC, JSON.stringify(spec(store, 'kill/', rank, 2, 5000))], { stdio: ['ignore', 'pipe', 'pipe'] }));
  try {
    const out = procs.map(() => ({ text: '' }));
    procs.forEach((p, i) => p.stdout!.on('data', (d) => (out[i].text += d)));
    const exited = procs.map((p) => new Promise<number | null>((res) => p.once('exit', (code) => res(code))));
    const deadline = Date.now() + 20_000;
    while (!out.every((o) => o.text.includes('joined')) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    assert.ok(out.every((o) => o.text.includes('joined')), 'ranks did not join');
    await new Promise((r) => setTimeout(r, 200));
    const t0 = Date.now();
    procs[1].kill('SIGKILL');
    const code = await Promise.race([exited[0], new Promise<'hang'>((res) => setTimeout(() => res('hang'), 25_000))]);
    assert.equal(code, 3, `rank 0 exit: ${code}; output ${out[0].text}`);
    assert.match(out[0].text, /ERROR group 'world' rank 0 of 2: all-reduce failed: .*(Connection reset|Connection closed|Timed out).* \(test node\)/);
    assert.ok(Date.now() - t0 < 25_000);
  } finally {
    for (const p of procs) if (p.exitCode === null && p.signalCode === null) p.kill('SIGKILL');
    await store.close();
  }
});
