// Worker-thread rank for sab_communicator.test.ts: attaches to the group in workerData, runs the scripted sequence of
// collectives on deterministic inputs (rankInput) and posts every result (or the error message) back.
import { parentPort, workerData } from 'node:worker_threads';
import { SabCommunicator, type SabGroupHandle } from '../../src/distributed/sab_communicator.js';

/** Deterministic, non-trivially-rounding input of rank r, element i (shared with the test's expectation). */
export function rankInput(r: number, i: number): number {
  return Math.fround(Math.sin(r * 1000 + i) * 10 ** ((i % 7) - 3));
}

interface Job {
  readonly handle: SabGroupHandle;
  readonly rank: number;
  readonly n: number;
  /** 'all' | 'skip' (rank does nothing, to test timeouts) | 'abort' (aborts before the first collective) */
  readonly mode: string;
  readonly spins?: number;
}

const job = workerData as Job;
if (parentPort) {
  const out: Record<string, unknown> = {};
  try {
    const c = new SabCommunicator(job.handle, job.rank, job.spins);
    if (job.mode === 'skip') {
      parentPort.postMessage({ rank: job.rank, out });
    } else {
      if (job.mode === 'abort') c.abort();
      const { n } = job;
      const size = c.size;
      const ar = new Float32Array(n).map((_, i) => rankInput(c.rank, i));
      c.allReduceSum(ar);
      out.allReduce = Array.from(ar);
      const src = new Int32Array(n).map((_, i) => c.rank * 100000 + i);
      const dst = new Int32Array(n * size);
      c.allGather(src, dst);
      out.allGather = Array.from(dst);
      const rs = new Float32Array(n * size).map((_, i) => rankInput(c.rank, i));
      const rsOut = new Float32Array(n);
      c.reduceScatterSum(rs, rsOut);
      out.reduceScatter = Array.from(rsOut);
      const bc = new Uint8Array(n).map((_, i) => (c.rank === size - 1 ? (i * 7 + 3) & 255 : 0));
      c.broadcast(bc, size - 1);
      out.broadcast = Array.from(bc);
      const a2a = new Float32Array(n * size).map((_, i) => c.rank * 1e6 + i);
      const a2aOut = new Float32Array(n * size);
      c.allToAll(a2a, a2aOut);
      out.allToAll = Array.from(a2aOut);
      c.barrier();
      c.close();
      parentPort.postMessage({ rank: job.rank, out });
    }
  } catch (e) {
    parentPort.postMessage({ rank: job.rank, error: (e as Error).message, name: (e as Error).name });
  }
}
