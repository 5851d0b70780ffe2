// A rank thread for the in-process communicator tests (src/distributed/*.test.ts): opens its end of the group in
// workerData, runs one scenario and posts the results back. Inputs are a fixed function of (rank, index, salt), so
// the test thread can compute the expected values itself.
import { parentPort, workerData } from 'node:worker_threads';
import { GlooCommunicator, openLocalCommunicator } from '../../src/distributed/index.js';
import type { Communicator, GlooGroupSpec, LocalGroupHandle } from '../../src/distributed/index.js';
import { inputValue } from './comm_inputs.js';

/** What the test thread sends. */
export interface RankJob {
  readonly handle: LocalGroupHandle | null;
  /** When set, the rank joins this Gloo group instead of the in-process one. */
  readonly gloo?: GlooGroupSpec;
  readonly rank: number;
  readonly scenario: 'collectives' | 'timeout' | 'die' | 'mismatch' | 'wait-abort' | 'loop';
  readonly sizes: readonly number[];
  readonly iterations?: number;
}

function fill(rank: number, n: number, salt: number): Float32Array {
  const a = new Float32Array(n);
  for (let i = 0; i < n; i++) a[i] = inputValue(rank, i, salt);
  return a;
}

function runCollectives(comm: Communicator, sizes: readonly number[]): Record<string, ArrayBufferView> {
  const out: Record<string, ArrayBufferView> = {};
  const r = comm.rank;
  const P = comm.size;
  for (const n of sizes) {
    const ar = fill(r, n, 1);
    comm.allReduceSum(ar);
    out[`allReduce/${n}`] = ar;
    const g = new Float32Array(n * P);
    comm.allGather(fill(r, n, 2), g);
    out[`allGatherF32/${n}`] = g;
    const gi = new Int32Array(n * P);
    comm.allGather(Int32Array.from({ length: n }, (_, i) => r * 100000 + i), gi);
    out[`allGatherI32/${n}`] = gi;
    const gu = new Uint8Array(n * P);
    comm.allGather(Uint8Array.from({ length: n }, (_, i) => (r * 31 + i) & 255), gu);
    out[`allGatherU8/${n}`] = gu;
    const rs = new Float32Array(n);
    comm.reduceScatterSum(fill(r, n * P, 3), rs);
    out[`reduceScatter/${n}`] = rs;
    for (let root = 0; root < P; root++) {
      const b = r === root ? fill(root, n, 4) : new Float32Array(n).fill(-1);
      comm.broadcast(b, root);
      out[`broadcast${root}/${n}`] = b;
    }
    const bu = r === P - 1 ? Uint8Array.from({ length: n + 3 }, (_, i) => (i * 7) & 255) : new Uint8Array(n + 3);
    comm.broadcast(bu, P - 1);
    out[`broadcastU8/${n + 3}`] = bu;
    const a2a = new Int32Array(n * P);
    comm.allToAll(Int32Array.from({ length: n * P }, (_, i) => r * 1_000_000 + i), a2a);
    out[`allToAll/${n}`] = a2a;
    comm.barrier();
  }
  return out;
}

const job = workerData as RankJob;
const t0 = Date.now();
try {
  const comm = job.gloo ? new GlooCommunicator(job.gloo) : openLocalCommunicator(job.handle!, job.rank);
  if (job.scenario === 'collectives') {
    const results = runCollectives(comm, job.sizes);
    parentPort!.postMessage({ rank: job.rank, results });
  } else if (job.scenario === 'loop') {
    // Many small all-reduces back to back (exercises the two buffer parities and wake-ups under oversubscription).
    const buf = new Float32Array(job.sizes[0]);
    let check = 0;
    for (let it = 0; it < (job.iterations ?? 100); it++) {
      buf.fill(job.rank + it);
      comm.allReduceSum(buf);
      check += buf[0];
    }
    parentPort!.postMessage({ rank: job.rank, check });
  } else if (job.scenario === 'timeout' || job.scenario === 'wait-abort') {
    // Rank 0 waits in an all-reduce; the others never call it ('timeout') or the test aborts the group ('wait-abort').
    if (job.rank === 0) comm.allReduceSum(new Float32Array(16));
    else if (job.scenario === 'timeout') await new Promise((res) => setTimeout(res, 1500));
    parentPort!.postMessage({ rank: job.rank, ok: true });
  } else if (job.scenario === 'die') {
    // The last rank dies before the first collective; the others must fail, not hang.
    if (job.rank === comm.size - 1) process.exit(7);
    comm.allReduceSum(new Float32Array(16));
    parentPort!.postMessage({ rank: job.rank, ok: true });
  } else if (job.scenario === 'mismatch') {
    if (job.rank === 0) comm.allReduceSum(new Float32Array(8));
    else comm.barrier();
    parentPort!.postMessage({ rank: job.rank, ok: true });
  }
} catch (err) {
  parentPort!.postMessage({ rank: job.rank, error: (err as Error).message, errorName: (err as Error).name, ms: Date.now() - t0 });
}
