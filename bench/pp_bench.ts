// `npm run bench:pp [-- --arch deepseek-v32] [--concurrency 8,32] [--output-len 32] [--repeats 2] [--quick]`: pipeline
// parallelism on the bench-sized checkpoint (bench_presets.ts) through the engine (scheduler, micro-batches, KV
// pools, sampling on the last stage): `--pp-size 1` (one rank, 2 compute threads) against `--pp-size 2` (two stage
// ranks, 1 compute thread each: the same cores), `concurrency` requests of a 64-token prompt decoding `output-len`
// greedy tokens at once; pp 2 runs with --pp-max-micro-batch-size = concurrency / 2, so the requests fill both
// micro-batches. Decode tok/s is the tokens after each request's first over the time from the last request's first
// token to the last request's end. The pipeline bubble share of each stage over that window is 1 − (its forward time
// / wall time), the forward time read from the stage ranks' counters (in-process engine). Each layout runs in a fresh
// child process; layouts alternate over `--repeats` rounds and every reading is printed with the load average.
import { spawnSync } from 'node:child_process';
import { availableParallelism, loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Engine, type EngineOptions } from '../src/engine/index.js';
import type { PpForwardModel } from '../src/executor/index.js';
import { ensureBenchCheckpoint } from './bench_presets.js';
import { median } from './llamacpp_batch.js';

const { values } = parseArgs({ options: {
  arch: { type: 'string', default: 'deepseek-v32' }, concurrency: { type: 'string', default: '8,32' }, 'output-len': { type: 'string', default: '32' },
  repeats: { type: 'string', default: '2' }, quick: { type: 'boolean' }, child: { type: 'string' },
} });

/** One run's figures: decode tok/s, wall time of the whole run (ms), bubble share per stage (pp > 1), load average. */
interface Reading { decodeTokPerS: number; totalMs: number; bubble: number[] | null; load: number }

/** One layout's run in this (child) process: `spec` = "pp,concurrency"; prints its Reading as one JSON line. */
async function child(spec: string): Promise<void> {
  const [pp, n] = spec.split(',').map(Number);
  const dir = ensureBenchCheckpoint(values.arch!, () => {});
  const o: EngineOptions = {
    modelPath: dir, skipTokenizerInit: true, useWorkerThread: false, numThreads: pp === 1 ? 2 : 1, maxTotalTokens: 16384, contextLength: 1024, logLevel: 'error',
    ...(pp > 1 ? { ppSize: pp, ppMaxMicroBatchSize: Math.max(1, Math.ceil(n / pp)) } : {}),
  };
  const e = await Engine.create(o);
  const model = pp > 1 ? (e.inProcessCore!.scheduler.runner.model as PpForwardModel) : null;
  const out = values.quick ? 8 : Number(values['output-len']);
  const t0 = performance.now();
  let firsts = 0;
  let lastFirst = 0;
  let busy0: number[] = [];
  const ends: number[] = [];
  await Promise.all(Array.from({ length: n }, async (_, i) => {
    const ids = Array.from({ length: 64 }, (_, j) => 100 + ((i * 131 + j * 7) % 20000));
    let first = true;
    for await (const _o of e.generate({ rid: `b${i}`, inputIds: ids, stream: true, samplingParams: { temperature: 0, maxNewTokens: out, ignoreEos: true } })) {
      if (first) {
        first = false;
        if (++firsts === n) { lastFirst = performance.now(); busy0 = model?.stageBusyMs() ?? []; }
      }
    }
    ends.push(performance.now());
  }));
  const lastEnd = Math.max(...ends);
  const busy1 = model?.stageBusyMs() ?? [];
  await e.shutdown();
  const wall = lastEnd - lastFirst;
  const r: Reading = {
    decodeTokPerS: (n * (out - 1)) / (wall / 1000), totalMs: lastEnd - t0, load: loadavg()[0],
    bubble: model ? busy1.map((b, s) => 1 - (b - busy0[s]) / wall) : null,
  };
  process.stdout.write(JSON.stringify(r) + '\n');
}

if (values.child) {
  await child(values.child);
} else {
  const self = fileURLToPath(import.meta.url);
  const concurrencies = values.concurrency!.split(',').map(Number);
  process.stdout.write(`tsglang bench:pp — ${values.arch} bench checkpoint, ${availableParallelism()} cores, load average ${loadavg().map((x) => x.toFixed(2)).join(' ')}; 64-token prompts, ${values.quick ? 8 : values['output-len']} output tokens; pp 1: 1 rank × 2 threads, pp 2: 2 stage ranks × 1 thread, --pp-max-micro-batch-size = concurrency / 2\n`);
  for (const n of concurrencies) {
    const got = new Map<number, Reading[]>();
    for (let r = 0; r < Number(values.repeats); r++) {
      for (const pp of [1, 2]) {
        const c = spawnSync(process.execPath, [self, ...process.argv.slice(2), '--child', `${pp},${n}`], { encoding: 'utf8', maxBuffer: 1 << 24 });
        const line = c.stdout.trim().split('\n').pop() ?? '';
        if (c.status !== 0 || !line.startsWith('{')) { process.stdout.write(`concurrency ${n} pp ${pp}: failed (${c.status}) ${c.stderr.slice(-500)}\n`); continue; }
        const x = JSON.parse(line) as Reading;
        got.set(pp, [...(got.get(pp) ?? []), x]);
        const bubble = x.bubble ? `, bubble share ${x.bubble.map((b, s) => `stage ${s} ${(100 * b).toFixed(1)}%`).join(', ')}` : '';
        process.stdout.write(`concurrency ${String(n).padStart(2)} round ${r + 1} pp ${pp}: decode ${x.decodeTokPerS.toFixed(1)} tok/s, total ${x.totalMs.toFixed(0)} ms${bubble} (load ${x.load.toFixed(2)})\n`);
      }
    }
    const a = got.get(1)?.map((x) => x.decodeTokPerS) ?? [];
    const b = got.get(2)?.map((x) => x.decodeTokPerS) ?? [];
    const stages = [0, 1].map((s) => got.get(2)?.map((x) => x.bubble?.[s] ?? NaN) ?? []);
    if (a.length && b.length) {
      process.stdout.write(`concurrency ${n}: median decode tok/s pp 1 ${median(a).toFixed(1)}, pp 2 ${median(b).toFixed(1)} (ratio ${(median(b) / median(a)).toFixed(2)}); ` +
        `median bubble share pp 2: ${stages.map((v, s) => `stage ${s} ${(100 * median(v)).toFixed(1)}%`).join(', ')}\n`);
    }
  }
}
