// `node dist/bench/decode_profile.js [--archs minimax-m2,deepseek-v32] [--batch 32] [--threads 1] [--steps 16]
// [--prompt-len 16] [--no-sample]`: where one batched decode step's time goes, per op, on the bench-sized checkpoints
// (bench_presets.ts). Every Ops call of the model is timed (matmuls by weight shape, so q/k/v/o, router, experts and
// lm_head are told apart); the rest of the step (JS: batch building, scratch, marshalling) is the step's wall time
// minus the ops'. Times are CPU time of the process (getrusage: user + system), so other processes on the machine
// only disturb them through shared caches and memory bandwidth, not through waiting for a core; the wall time of the
// steps is printed beside. Run it with --threads 1 for per-op figures (with more threads the pool's CPU time adds up).
import { availableParallelism, loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { createOps, loadNativeAddon } from '../src/kernels/index.js';
import type { Ops } from '../src/kernels/index.js';
import { SimpleBatchContext } from '../src/layers/index.js';
import { KVPool } from '../src/mem_cache/index.js';
import { loadModel } from '../src/models/index.js';
import { ensureBenchCheckpoint } from './bench_presets.js';

const { values } = parseArgs({ options: { archs: { type: 'string' }, batch: { type: 'string' }, threads: { type: 'string' }, steps: { type: 'string' },
  'prompt-len': { type: 'string' } } });
const archs = (values.archs ?? 'minimax-m2,deepseek-v32').split(',');
const B = Number(values.batch ?? 32);
const threads = Number(values.threads ?? 1);
const steps = Number(values.steps ?? 16);
const promptLen = Number(values['prompt-len'] ?? 16);

/** Accumulated time (ms) and calls per op key. */
class OpTimes {
  readonly ms = new Map<string, number>();
  readonly calls = new Map<string, number>();
  enabled = false;
  add(key: string, ms: number): void {
    if (!this.enabled) return;
    this.ms.set(key, (this.ms.get(key) ?? 0) + ms);
    this.calls.set(key, (this.calls.get(key) ?? 0) + 1);
  }
  total(): number {
    let s = 0;
    for (const v of this.ms.values()) s += v;
    return s;
  }
}

/** Wraps every function member of `ops` with a timer; matmuls keyed by weight shape. */
function timedOps(ops: Ops, times: OpTimes): Ops {
  return new Proxy(ops, {
    get(target, prop, recv) {
      const v = Reflect.get(target, prop, recv) as unknown;
      if (typeof v !== 'function' || prop === 'prepareWeight' || prop === 'allocateWeightBytes' || prop === 'allocateKvBuffer') return v;
      const fn = v as (...a: unknown[]) => unknown;
      return (...args: unknown[]) => {
        let key = String(prop);
        if (prop === 'matmul') key += ` [${(args[2] as { shape: number[] }).shape.join('x')}] M=${String(args[1])}`;
        if (prop === 'groupedMatmul') key += ` [${(args[3] as { shape: number[] }).shape.join('x')}]/${String(args[2])}`;
        const c0 = process.cpuUsage();
        const r = fn.apply(target, args);
        times.add(key, cpuMsSince(c0));
        return r;
      };
    },
  });
}

process.stdout.write(`decode_profile: batch ${B}, ${threads} thread(s) of ${availableParallelism()} cores, ${steps} steps after a ${promptLen}-token prompt, load ${loadavg().map((x) => x.toFixed(2)).join(' ')}\n`);
for (const arch of archs) {
  const dir = ensureBenchCheckpoint(arch);
  const base = createOps({ backend: 'native', threads });
  const times = new OpTimes();
  const ops = timedOps(base, times);
  const { model } = loadModel(dir, { ops });
  const V = model.config.vocabSize;
  const layout = model.kvPoolLayout();
  const run = (n: number, timed: boolean): { cpu: number; wall: number } => {
    const pool = new KVPool(layout, B * (promptLen + n + 2) + 2, undefined, (b) => base.allocateKvBuffer(b));
    const ctx = new SimpleBatchContext(pool, B, promptLen + n + 1);
    const reqs = Array.from({ length: B }, () => ctx.addReq());
    const prompt = Array.from({ length: promptLen }, (_, i) => 2 + ((i * 7919) % (V - 2)));
    const pre = model.forward(ctx.makeBatch(reqs.map((req) => ({ req, inputIds: prompt })), { logits: 'last' })).logits;
    const next = reqs.map((_, j) => argmaxOf(pre, j * V, V));
    times.enabled = timed;
    const t0 = performance.now();
    const c0 = process.cpuUsage();
    for (let i = 0; i < n; i++) {
      const lg = model.forward(ctx.makeBatch(reqs.map((req, j) => ({ req, inputIds: [next[j]] })), { logits: 'last' })).logits;
      const ca = process.cpuUsage();
      for (let j = 0; j < B; j++) next[j] = argmaxOf(lg, j * V, V);
      times.add('(greedy argmax)', cpuMsSince(ca));
    }
    times.enabled = false;
    return { cpu: cpuMsSince(c0), wall: performance.now() - t0 };
  };
  run(2, false);
  const { cpu, wall } = run(steps, true);
  const opsMs = times.total();
  process.stdout.write(`\n${arch}: CPU ${(cpu / steps).toFixed(2)} ms/step (${((B * steps * 1000) / cpu).toFixed(1)} tok per CPU-s), wall ${(wall / steps).toFixed(2)} ms/step (${((B * steps * 1000) / wall).toFixed(1)} tok/s); ops ${(opsMs / steps).toFixed(2)} CPU-ms/step, rest (JS) ${((cpu - opsMs) / steps).toFixed(2)} = ${((100 * (cpu - opsMs)) / cpu).toFixed(1)} %\n`);
  const rows = [...times.ms.entries()].sort((a, b) => b[1] - a[1]);
  for (const [k, ms] of rows) {
    process.stdout.write(`  ${k.padEnd(44)} ${(ms / steps).toFixed(3).padStart(8)} CPU-ms/step ${((100 * ms) / cpu).toFixed(1).padStart(5)} %  ${String((times.calls.get(k) ?? 0) / steps).padStart(4)} calls/step\n`);
  }
}
process.stdout.write(`load at the end ${loadavg().map((x) => x.toFixed(2)).join(' ')}\n`);

/** CPU milliseconds (user + system) of this process since `c0`. */
function cpuMsSince(c0: NodeJS.CpuUsage): number {
  const d = process.cpuUsage(c0);
  return (d.user + d.system) / 1000;
}

/** First index of the largest of x[off..off+n) (the addon's greedy kernel, as bench:llamacpp). */
function argmaxOf(x: Float32Array, off: number, n: number): number {
  const native = loadNativeAddon().addon?.argmaxF32;
  if (native) return native(x.subarray(off, off + n), n);
  let b = 0;
  for (let i = 1; i < n; i++) if (x[off + i] > x[off + b]) b = i;
  return b;
}
