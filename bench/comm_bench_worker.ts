// One rank of `npm run bench:comm` (bench/comm_bench.ts): times all-reduces on its communicator and posts the
// per-iteration times (µs) of rank 0 back. Used as a worker thread (shm) and as a child process (Gloo).
import { parentPort, workerData } from 'node:worker_threads';
import type { Communicator } from '../src/distributed/index.js';

/** One measurement: `iters` timed all-reduces of `floats` floats after `warmup` untimed ones. */
export interface CommCase {
  readonly floats: number;
  readonly warmup: number;
  readonly iters: number;
}

/** Runs the cases on `comm`; returns per-case sorted per-iteration µs (every rank runs the same cases). */
export function timeAllReduce(comm: Communicator, cases: readonly CommCase[]): number[][] {
  const out: number[][] = [];
  for (const c of cases) {
    const buf = new Float32Array(c.floats).fill(1);
    for (let i = 0; i < c.warmup; i++) comm.allReduceSum(buf);
    comm.barrier();
    const t: number[] = [];
    for (let i = 0; i < c.iters; i++) {
      const t0 = process.hrtime.bigint();
      comm.allReduceSum(buf);
      t.push(Number(process.hrtime.bigint() - t0) / 1000);
      buf.fill(1);
    }
    out.push(t.sort((a, b) => a - b));
  }
  return out;
}

if (parentPort && workerData && (workerData as { kind?: string }).kind === 'shm') {
  const { openLocalCommunicator } = await import('../src/distributed/index.js');
  const wd = workerData as { handle: Parameters<typeof openLocalCommunicator>[0]; rank: number; cases: CommCase[] };
  const comm = openLocalCommunicator(wd.handle, wd.rank);
  const times = timeAllReduce(comm, wd.cases);
  parentPort.postMessage({ rank: wd.rank, times });
}
