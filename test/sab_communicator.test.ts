// SabCommunicator: every collective against its definition (sums in rank order with f32 rounding, so every rank gets
// the same bits), across chunk boundaries (tiny staging slots), with ranks in worker threads; faults: a rank that
// never arrives gives a DistributedError naming it within the timeout, an aborting rank wakes its peers at once.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Worker } from 'node:worker_threads';
import { DistributedError } from '../src/common/index.js';
import { createSabGroup, SabCommunicator, type SabGroupHandle } from '../src/distributed/index.js';
import { rankInput } from './helpers/sab_comm_worker.js';

const WORKER = new URL('./helpers/sab_comm_worker.js', import.meta.url);

interface Reply { rank: number; out?: Record<string, number[]>; error?: string; name?: string }

function runRanks(handle: SabGroupHandle, n: number, mode: (r: number) => string, spins?: number): Promise<Reply[]> {
  return Promise.all(Array.from({ length: handle.size }, (_, rank) => new Promise<Reply>((resolve, reject) => {
    const w = new Worker(WORKER, { workerData: { handle, rank, n, mode: mode(rank), spins } });
    w.once('message', (m: Reply) => { resolve(m); void w.terminate(); });
    w.once('error', reject);
  })));
}

/** f32 sum in rank order of f(r), as the communicator defines it. */
function rankSum(size: number, f: (r: number) => number): number {
  let acc = Math.fround(f(0));
  for (let r = 1; r < size; r++) acc = Math.fround(acc + f(r));
  return acc;
}

for (const [size, n, slotBytes, spins] of [[3, 37, 64, undefined], [4, 5, 16, 0], [2, 1000, 1 << 16, undefined]] as const) {
  test(`SabCommunicator: ${size} ranks, ${n} elements, ${slotBytes}-byte slots${spins === 0 ? ', no spinning' : ''}: every collective as defined`, async () => {
    const replies = await runRanks(createSabGroup(size, { slotBytes, timeoutMs: 20_000 }), n, () => 'all', spins);
    for (const rep of replies) {
      assert.equal(rep.error, undefined, rep.error);
      const out = rep.out!;
      const r = rep.rank;
      assert.deepEqual(out.allReduce, Array.from({ length: n }, (_, i) => rankSum(size, (q) => rankInput(q, i))));
      assert.deepEqual(out.allGather, Array.from({ length: n * size }, (_, i) => Math.floor(i / n) * 100000 + (i % n)));
      assert.deepEqual(out.reduceScatter, Array.from({ length: n }, (_, i) => rankSum(size, (q) => rankInput(q, r * n + i))));
      assert.deepEqual(out.broadcast, Array.from({ length: n }, (_, i) => (i * 7 + 3) & 255));
      assert.deepEqual(out.allToAll, Array.from({ length: n * size }, (_, i) => Math.floor(i / n) * 1e6 + r * n + (i % n)));
    }
    // the same bits on every rank
    for (const rep of replies) assert.deepEqual(rep.out!.allReduce, replies[0].out!.allReduce);
  });
}

test('SabCommunicator: a rank that never arrives gives DistributedError naming it, within the timeout', async () => {
  const t0 = Date.now();
  const replies = await runRanks(createSabGroup(3, { timeoutMs: 300, name: 'tp' }), 8, (r) => (r === 2 ? 'skip' : 'all'));
  assert.ok(Date.now() - t0 < 10_000);
  for (const r of [0, 1]) {
    assert.equal(replies[r].name, 'DistributedError');
    assert.match(replies[r].error!, /group 'tp'/);
  }
  // at least the first to time out names the missing rank; the other may see the poisoned group
  assert.ok(replies.slice(0, 2).some((rep) => /timed out after 300 ms waiting for rank\(s\) 2 of 3/.test(rep.error!)), JSON.stringify(replies));
});

test('SabCommunicator: an aborting rank wakes its peers at once (no timeout wait)', async () => {
  const t0 = Date.now();
  const replies = await runRanks(createSabGroup(3, { timeoutMs: 60_000 }), 8, (r) => (r === 1 ? 'abort' : 'all'));
  assert.ok(Date.now() - t0 < 20_000);
  for (const rep of replies) {
    assert.equal(rep.name, 'DistributedError');
    assert.match(rep.error!, /rank 1 failed/);
  }
});

test('SabCommunicator: one rank is a no-op group; bad sizes and ranks are DistributedErrors; closed groups throw', () => {
  const c = new SabCommunicator(createSabGroup(1), 0);
  const b = new Float32Array([1.5, 2]);
  c.allReduceSum(b);
  assert.deepEqual(Array.from(b), [1.5, 2]);
  const d = new Float32Array(2);
  c.allGather(b, d);
  assert.deepEqual(Array.from(d), [1.5, 2]);
  c.close();
  assert.throws(() => c.barrier(), DistributedError);
  assert.throws(() => createSabGroup(0), DistributedError);
  assert.throws(() => new SabCommunicator(createSabGroup(2), 2), /rank must be in \[0, 2\)/);
  assert.throws(() => createSabGroup(2, { slotBytes: 12 }), /multiple of 8/);
});
