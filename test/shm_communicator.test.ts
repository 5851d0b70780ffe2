// The in-process communicators with real rank threads: every collective on 1..4 ranks (and 8 ranks on this 2-core
// machine), odd sizes and sizes that cross the slot (chunking), element types, every rank gets the same bits and the
// rank-order f32 sum; a rank that never arrives (timeout names it), a thread that dies (the owner aborts the group),
// ranks that call different collectives.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Worker } from 'node:worker_threads';
import { abortLocalGroup, createLocalGroup, loadShmAddon } from '../src/distributed/index.js';
import type { LocalGroupHandle, LocalGroupOptions } from '../src/distributed/index.js';
import { inputValue } from './helpers/comm_inputs.js';
import type { RankJob } from './helpers/comm_rank_worker.js';

const WORKER = new URL('./helpers/comm_rank_worker.js', import.meta.url);
const native = loadShmAddon();
const skipNative = native.addon ? false : `native shm collectives unavailable: ${native.reason}`;

type Reply = { rank: number; results?: Record<string, ArrayBufferView>; error?: string; errorName?: string; ms?: number; ok?: boolean; check?: number };

/** Runs one job per rank on its own thread; `onExit(rank, code)` is called when a thread exits before replying. */
function runRanks(handle: LocalGroupHandle, job: Omit<RankJob, 'handle' | 'rank'>, onExit?: (rank: number, code: number) => void): Promise<Reply[]> {
  return Promise.all(
    Array.from({ length: handle.size }, (_, rank) =>
      new Promise<Reply>((resolve, reject) => {
        const w = new Worker(WORKER, { workerData: { ...job, handle, rank } });
        let replied = false;
        w.on('message', (m: Reply) => {
          replied = true;
          resolve(m);
          void w.terminate();
        });
        w.on('error', reject);
        w.on('exit', (code) => {
          if (replied) return;
          onExit?.(rank, code);
          resolve({ rank, error: `exited with code ${code}` });
        });
      }),
    ),
  );
}

/** Σ_r value(r, i) in rank order with f32 rounding after each add. */
function rankOrderSum(P: number, i: number, salt: number): number {
  let acc = inputValue(0, i, salt);
  for (let r = 1; r < P; r++) acc = Math.fround(acc + inputValue(r, i, salt));
  return acc;
}

function bits(a: ArrayBufferView): Buffer {
  return Buffer.from(a.buffer, a.byteOffset, a.byteLength);
}

async function checkCollectives(P: number, sizes: number[], options: LocalGroupOptions): Promise<void> {
  const handle = createLocalGroup(P, options);
  const replies = await runRanks(handle, { scenario: 'collectives', sizes });
  for (const r of replies) assert.equal(r.error, undefined, `rank ${r.rank}: ${r.error}`);
  const res = replies.map((r) => r.results!);
  for (const n of sizes) {
    // Every rank holds the same bits of every result that should be replicated.
    for (const key of [`allReduce/${n}`, `allGatherF32/${n}`, `allGatherI32/${n}`, `allGatherU8/${n}`, `allToAll/${n}`, `broadcastU8/${n + 3}`]) {
      if (key.startsWith('allToAll')) continue;
      for (let r = 1; r < P; r++) assert.ok(bits(res[r][key]).equals(bits(res[0][key])), `${key}: rank ${r} differs from rank 0`);
    }
    const ar = res[0][`allReduce/${n}`] as Float32Array;
    for (let i = 0; i < n; i++) if (!Object.is(ar[i], rankOrderSum(P, i, 1))) assert.fail(`allReduce/${n}[${i}] = ${ar[i]}, want ${rankOrderSum(P, i, 1)}`);
    const g = res[0][`allGatherF32/${n}`] as Float32Array;
    const gi = res[0][`allGatherI32/${n}`] as Int32Array;
    const gu = res[0][`allGatherU8/${n}`] as Uint8Array;
    for (let r = 0; r < P; r++) {
      for (let i = 0; i < n; i++) {
        if (g[r * n + i] !== inputValue(r, i, 2)) assert.fail(`allGatherF32/${n}[${r}·n+${i}]`);
        if (gi[r * n + i] !== r * 100000 + i) assert.fail(`allGatherI32/${n}[${r}·n+${i}]`);
        if (gu[r * n + i] !== ((r * 31 + i) & 255)) assert.fail(`allGatherU8/${n}[${r}·n+${i}]`);
      }
    }
    for (let r = 0; r < P; r++) {
      const rs = res[r][`reduceScatter/${n}`] as Float32Array;
      for (let i = 0; i < n; i++) if (!Object.is(rs[i], rankOrderSum(P, r * n + i, 3))) assert.fail(`reduceScatter/${n} rank ${r}[${i}]`);
      for (let root = 0; root < P; root++) {
        const b = res[r][`broadcast${root}/${n}`] as Float32Array;
        for (let i = 0; i < n; i++) if (b[i] !== inputValue(root, i, 4)) assert.fail(`broadcast${root}/${n} rank ${r}[${i}]`);
      }
      const bu = res[r][`broadcastU8/${n + 3}`] as Uint8Array;
      for (let i = 0; i < n + 3; i++) if (bu[i] !== ((i * 7) & 255)) assert.fail(`broadcastU8 rank ${r}[${i}]`);
      const a2a = res[r][`allToAll/${n}`] as Int32Array;
      for (let j = 0; j < P; j++) for (let i = 0; i < n; i++) if (a2a[j * n + i] !== j * 1_000_000 + r * n + i) assert.fail(`allToAll/${n} rank ${r} block ${j}[${i}]`);
    }
  }
}

const SIZES = [0, 1, 7, 8, 17, 1000, 7168];

for (const P of [1, 2, 3, 4]) {
  test(`native shm: every collective on ${P} rank(s), default slot`, { skip: skipNative }, () => checkCollectives(P, SIZES, { backend: 'shm' }));
}

test('native shm: collectives larger than the slot run in chunks (slot 256 B, odd sizes)', { skip: skipNative }, () =>
  checkCollectives(3, [63, 64, 65, 1001], { backend: 'shm', slotBytes: 256 }));

test('native shm: large all-reduces take the two-step path (one segment per rank), across chunks too', { skip: skipNative }, async () => {
  await checkCollectives(3, [70_001], { backend: 'shm', slotBytes: 128 << 10 });
  await checkCollectives(2, [40_000], { backend: 'shm' });
});

test('native shm: 8 ranks on this machine (ranks may outnumber cores: spinning yields to futex waits)', { skip: skipNative }, async () => {
  await checkCollectives(8, [1, 100], { backend: 'shm', slotBytes: 1024 });
  const handle = createLocalGroup(8, { backend: 'shm' });
  const replies = await runRanks(handle, { scenario: 'loop', sizes: [64], iterations: 300 });
  // Σ_it Σ_r (r + it) = 300·28 + 8·Σ it
  for (const r of replies) assert.equal(r.check, 300 * 28 + 8 * ((299 * 300) / 2), `rank ${r.rank}: ${r.error ?? ''}`);
});

test('native shm: a rank that never arrives → DistributedError naming it, after the timeout', { skip: skipNative }, async () => {
  const handle = createLocalGroup(3, { backend: 'shm', timeoutMs: 300, name: 'tp' });
  const replies = await runRanks(handle, { scenario: 'timeout', sizes: [] });
  assert.equal(replies[0].errorName, 'DistributedError');
  assert.match(replies[0].error!, /group 'tp' rank 0: all-reduce timed out after 300 ms waiting for rank\(s\) 1, 2 of 3/);
  assert.ok(replies[0].ms! >= 290, `returned after ${replies[0].ms} ms`);
});

test('native shm: a rank thread that dies → the owner aborts the group and the others fail at once', { skip: skipNative }, async () => {
  const handle = createLocalGroup(3, { backend: 'shm', timeoutMs: 60_000 });
  const replies = await runRanks(handle, { scenario: 'die', sizes: [] }, (rank, code) => abortLocalGroup(handle, rank, `thread exited with code ${code}`));
  for (const r of replies.slice(0, 2)) {
    assert.equal(r.errorName, 'DistributedError');
    assert.match(r.error!, /all-reduce: the group is broken \(rank 2 died: thread exited with code 7\)/);
    assert.ok(r.ms! < 30_000);
  }
  assert.equal(replies[2].error, 'exited with code 7');
});

test('native shm: a shutdown by the owner wakes a rank waiting with no timeout', { skip: skipNative }, async () => {
  const handle = createLocalGroup(2, { backend: 'shm', timeoutMs: Infinity });
  const pending = runRanks(handle, { scenario: 'wait-abort', sizes: [] });
  await new Promise((res) => setTimeout(res, 300));
  abortLocalGroup(handle, null, 'server shutting down');
  const replies = await Promise.race([pending, new Promise<null>((res) => setTimeout(() => res(null), 5000))]);
  assert.ok(replies, 'rank 0 still waiting 5 s after the abort');
  assert.equal(replies[1].ok, true);
  assert.match(replies[0].error!, /all-reduce: the group is broken \(the group was shut down: server shutting down\)/);
});

test('native shm: ranks calling different collectives → DistributedError, not corrupt data', { skip: skipNative }, async () => {
  const handle = createLocalGroup(2, { backend: 'shm', timeoutMs: 5000 });
  const replies = await runRanks(handle, { scenario: 'mismatch', sizes: [] });
  for (const r of replies) assert.match(r.error!, /the ranks called different collectives/);
});

test('createLocalGroup: size and slot validation', { skip: skipNative }, () => {
  assert.throws(() => createLocalGroup(0, { backend: 'shm' }), /size must be in \[1, 1024\], got 0/);
  assert.throws(() => createLocalGroup(2, { backend: 'shm', slotBytes: 100 }), /slotBytes must be a positive multiple of 64/);
});

test('factory with backend sab (the plain-TypeScript fallback): same collectives, same bits as the rank-order sum', () =>
  checkCollectives(3, [0, 1, 17, 7168], { backend: 'sab' }));

test('factory with backend sab: a dying rank thread, aborted by the owner, fails the others at once', async () => {
  const handle = createLocalGroup(3, { backend: 'sab', timeoutMs: 60_000 });
  const replies = await runRanks(handle, { scenario: 'die', sizes: [] }, (rank, code) => abortLocalGroup(handle, rank, `thread exited with code ${code}`));
  for (const r of replies.slice(0, 2)) assert.match(r.error!, /the group is broken \(rank 2 failed\)/);
});
