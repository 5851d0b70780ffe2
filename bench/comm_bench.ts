// `npm run bench:comm [-- --ranks 2] [--quick]`: all-reduce latency at 16 and 7168 floats and bandwidth at 16 Mi
// floats (64 MiB), for the in-process native shm communicator (rank worker threads), the plain-TypeScript fallback,
// Gloo over loopback and Gloo over a veth pair between two network namespaces (both skipped with the reason when
// unavailable). Figures only; nothing is asserted. Every reading is printed (median, p10, p90 of the timed
// iterations of rank 0) with the load average, since the machine is shared.
//
// Method: in-process, `ranks` worker threads attach to one group; across processes, `ranks` child processes (node
// dist/bench/comm_gloo_rank.js) meet through the TCP store on 127.0.0.1 (or the namespace addresses). Each case runs
// `warmup` untimed all-reduces, a barrier, then `iters` timed ones; algbw = bytes of one rank's buffer / median.
import { loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { Worker } from 'node:worker_threads';
import { createLocalGroup, loadShmAddon } from '../src/distributed/index.js';
import type { LocalGroupHandle } from '../src/distributed/index.js';
import type { CommCase } from './comm_bench_worker.js';

const { values: opts } = parseArgs({ options: { ranks: { type: 'string', default: '2' }, quick: { type: 'boolean', default: false } } });
const RANKS = Number(opts.ranks);
const Q = opts.quick ? 0.2 : 1;
const CASES: CommCase[] = [
  { floats: 16, warmup: 200, iters: Math.round(5000 * Q) },
  { floats: 7168, warmup: 200, iters: Math.round(5000 * Q) },
  { floats: 16 << 20, warmup: 2, iters: Math.max(3, Math.round(10 * Q)) },
];
const GLOO_CASES: CommCase[] = [
  { floats: 16, warmup: 20, iters: Math.round(300 * Q) },
  { floats: 7168, warmup: 20, iters: Math.round(300 * Q) },
  { floats: 16 << 20, warmup: 1, iters: Math.max(3, Math.round(5 * Q)) },
];

function pct(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];
}

function report(label: string, cases: readonly CommCase[], times: number[][]): void {
  for (let i = 0; i < cases.length; i++) {
    const t = times[i];
    const med = pct(t, 0.5);
    const bytes = cases[i].floats * 4;
    const bw = bytes / (med * 1e-6) / 1e9;
    const fmt = (x: number) => (x < 100 ? x.toFixed(2) : x.toFixed(0));
    console.log(
      `${label.padEnd(24)} ${String(cases[i].floats).padStart(9)} floats  median ${fmt(med).padStart(9)} µs  p10 ${fmt(pct(t, 0.1)).padStart(9)}  p90 ${fmt(pct(t, 0.9)).padStart(9)}  algbw ${bw.toFixed(2)} GB/s  (n=${t.length})`,
    );
  }
}

async function inProcess(backend: 'shm' | 'sab'): Promise<number[][]> {
  const handle: LocalGroupHandle = createLocalGroup(RANKS, { backend, name: 'bench' });
  const replies = await Promise.all(
    Array.from({ length: RANKS }, (_, rank) =>
      new Promise<{ rank: number; times: number[][] }>((resolve, reject) => {
        const w = new Worker(new URL('./comm_bench_worker.js', import.meta.url), { workerData: { kind: 'shm', handle, rank, cases: CASES } });
        w.once('message', (m) => {
          resolve(m);
          void w.terminate();
        });
        w.once('error', reject);
      }),
    ),
  );
  return replies[0].times;
}

console.log(`# bench:comm  ranks=${RANKS}  loadavg ${loadavg().map((x) => x.toFixed(2)).join(' ')}  ${new Date().toISOString()}`);
const native = loadShmAddon();
if (native.addon) report('shm (native, threads)', CASES, await inProcess('shm'));
else console.log(`shm (native, threads): skipped (${native.reason})`);
try {
  report('sab (TypeScript, threads)', CASES, await inProcess('sab'));
} catch (err) {
  console.log(`sab (TypeScript, threads): skipped (${(err as Error).message})`);
}
void GLOO_CASES;
