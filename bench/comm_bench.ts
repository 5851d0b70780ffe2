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
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { createLocalGroup, loadGlooAddon, loadShmAddon, TcpStoreServer } from '../src/distributed/index.js';
import { createNetnsPair } from '../test/helpers/netns.js';
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
/**
 * Gloo between RANKS processes; `where(rank)` gives each rank's spawn prefix and bind address (the store runs here,
 * on `storeHost`, reachable from every rank).
 */
async function glooRun(storeHost: string, where: (rank: number) => { prefix: string[]; bind: string }, storePort?: number): Promise<number[][]> {
  const store = storePort === undefined ? await TcpStoreServer.listen(storeHost, 0) : null;
  const port = store ? store.port : storePort!;
  const script = fileURLToPath(new URL('./comm_gloo_rank.js', import.meta.url));
  try {
    const outs = await Promise.all(
      Array.from({ length: RANKS }, (_, rank) => {
        const { prefix, bind } = where(rank);
        const spec = { name: 'bench', storeHost, storePort: port, prefix: 'bench/', rank, size: RANKS, bindHost: bind, timeoutMs: 60_000 };
        const argv = [...prefix, process.execPath, script, JSON.stringify({ spec, cases: GLOO_CASES })];
        return new Promise<string>((resolve, reject) => {
          const p = spawn(argv[0], argv.slice(1), { stdio: ['ignore', 'pipe', 'inherit'] });
          let out = '';
          p.stdout.on('data', (d) => (out += d));
          p.once('exit', (code) => (code === 0 ? resolve(out) : reject(new Error(`rank ${rank} exited with ${code}`))));
        });
      }),
    );
    return JSON.parse(outs[0]) as number[][];
  } finally {
    await store?.close();
  }
}

/** Gloo between two processes in two network namespaces joined by a veth pair; the store runs inside namespace 0. */
async function glooNetns(ns: { addrs: readonly string[]; prefix(i: 0 | 1): string[] }): Promise<number[][]> {
  const argv = [...ns.prefix(0), process.execPath, fileURLToPath(new URL('../test/helpers/store_proc.js', import.meta.url)), ns.addrs[0], '0'];
  const proc = spawn(argv[0], argv.slice(1), { stdio: ['ignore', 'pipe', 'inherit'] });
  try {
    const port = await new Promise<number>((resolve, reject) => {
      let out = '';
      proc.stdout.on('data', (d) => {
        out += d;
        const m = /listening (\d+)/.exec(out);
        if (m) resolve(Number(m[1]));
      });
      proc.once('exit', (code) => reject(new Error(`store process exited with ${code}`)));
    });
    return await glooRun(ns.addrs[0], (rank) => ({ prefix: ns.prefix(rank as 0 | 1), bind: ns.addrs[rank] }), port);
  } finally {
    proc.kill('SIGKILL');
  }
}

const gloo = loadGlooAddon();
if (!gloo.addon) {
  console.log(`gloo: skipped (${gloo.reason})`);
} else {
  report('gloo (loopback, procs)', GLOO_CASES, await glooRun('127.0.0.1', () => ({ prefix: [], bind: '127.0.0.1' })));
  if (RANKS !== 2) {
    console.log('gloo (veth pair): skipped (2 ranks only: one per namespace)');
  } else {
    const ns = createNetnsPair('bc');
    if ('skip' in ns) {
      console.log(`gloo (veth pair): skipped (${ns.skip})`);
    } else {
      try {
        // The namespaces have no route to this process: the store runs in a helper process inside namespace 0.
        report('gloo (veth pair, netns)', GLOO_CASES, await glooNetns(ns));
      } finally {
        ns.remove();
      }
    }
  }
}
