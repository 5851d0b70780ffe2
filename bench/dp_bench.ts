// `npm run bench:dp [-- --arch deepseek-v32] [--concurrency 32] [--output-len 32] [--quick]`: decode throughput of
// attention DP against plain TP on the bench-sized checkpoint (bench_presets.ts), through the engine (schedulers,
// KV pools, sampling): `--tp 2` vs `--tp 2 --dp 2 --enable-dp-attention`, 1 compute thread per rank, `concurrency`
// requests of a 64-token prompt each decoding `output-len` greedy tokens at once. Decode tok/s is the tokens after each
// request's first over the time from the last request's first token to the last request's end. Each layout runs
// in a fresh child process; the layouts alternate over `--repeats` rounds and every reading is printed. Then prefill
// CP: one `--prefill-len` (default 4096) token prompt prefilled by `--tp 2` and by `--tp 2 --attn-cp-size 2` (model
// level, the step fanned out to the ranks), prefill tok/s. Figures only.
import { spawnSync } from 'node:child_process';
import { availableParallelism, loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Engine, type EngineOptions } from '../src/engine/index.js';
import { launchTpRanks } from '../src/executor/index.js';
import { SimpleBatchContext } from '../src/layers/index.js';
import { KVPool } from '../src/mem_cache/index.js';
import { ensureBenchCheckpoint } from './bench_presets.js';
import { median } from './llamacpp_batch.js';

const { values } = parseArgs({ options: {
  arch: { type: 'string', default: 'deepseek-v32' }, concurrency: { type: 'string', default: '32' }, 'output-len': { type: 'string', default: '32' },
  repeats: { type: 'string', default: '2' }, quick: { type: 'boolean' }, child: { type: 'string' }, 'prefill-len': { type: 'string', default: '4096' },
} });

interface Reading { decodeTokPerS: number; firstTokenMs: number; totalMs: number }

async function child(spec: string): Promise<void> {
  const [tp, dp] = spec.split(',').map(Number);
  const dir = ensureBenchCheckpoint(values.arch!, () => {});
  const o: EngineOptions = { modelPath: dir, skipTokenizerInit: true, numThreads: 1, tpSize: tp, maxTotalTokens: 16384, contextLength: 1024, logLevel: 'error', ...(dp > 1 ? { dpSize: dp, enableDpAttention: true } : {}) };
  const e = await Engine.create(o);
  const n = Number(values.concurrency);
  const out = values.quick ? 8 : Number(values['output-len']);
  const t0 = performance.now();
  const firsts: number[] = [];
  const ends: number[] = [];
  await Promise.all(Array.from({ length: n }, async (_, i) => {
    const ids = Array.from({ length: 64 }, (_, j) => 100 + ((i * 131 + j * 7) % 20000));
    let first = true;
    for await (const _o of e.generate({ rid: `b${i}`, inputIds: ids, stream: true, samplingParams: { temperature: 0, maxNewTokens: out, ignoreEos: true } })) {
      if (first) { firsts.push(performance.now()); first = false; }
    }
    ends.push(performance.now());
  }));
  await e.shutdown();
  const lastFirst = Math.max(...firsts);
  const lastEnd = Math.max(...ends);
  const r: Reading = { decodeTokPerS: (n * (out - 1)) / ((lastEnd - lastFirst) / 1000), firstTokenMs: lastFirst - t0, totalMs: lastEnd - t0 };
  process.stdout.write(JSON.stringify(r) + '\n');
}

/** Prefill of one prompt under `tp,cp`: prints {prefillTokPerS}. */
function cpChild(spec: string): void {
  const [tp, cp] = spec.split(',').map(Number);
  const dir = ensureBenchCheckpoint(values.arch!, () => {});
  const m = launchTpRanks({ modelPath: dir, tpSize: tp, epSize: 1, threadsPerRank: 1, ...(cp > 1 ? { attnCpSize: cp } : {}) }).model;
  const len = values.quick ? 512 : Number(values['prefill-len']);
  const ids = Array.from({ length: len }, (_, j) => 100 + ((j * 7919) % 20000));
  const ctx = new SimpleBatchContext(new KVPool(m.kvPoolLayout(), len + 16), 1, len + 16);
  const t0 = performance.now();
  m.forward(ctx.makeBatch([{ req: ctx.addReq(), inputIds: ids }]));
  const s = (performance.now() - t0) / 1000;
  m.close?.();
  process.stdout.write(JSON.stringify({ prefillTokPerS: len / s, seconds: s }) + '\n');
}

if (values.child?.startsWith('cp,')) {
  cpChild(values.child.slice(3));
} else if (values.child) {
  await child(values.child);
} else {
  const self = fileURLToPath(import.meta.url);
  const layouts: [string, string][] = [['tp 2', '2,1'], ['tp 2 + dp-attention 2', '2,2']];
  process.stdout.write(`tsglang bench:dp — ${values.arch} bench checkpoint, ${availableParallelism()} cores, load average ${loadavg().map((x) => x.toFixed(2)).join(' ')}; concurrency ${values.concurrency}, 64-token prompts, ${values.quick ? 8 : values['output-len']} output tokens\n`);
  const got = new Map<string, Reading[]>();
  for (let r = 0; r < Number(values.repeats); r++) {
    for (const [name, spec] of layouts) {
      const c = spawnSync(process.execPath, [self, ...process.argv.slice(2), '--child', spec], { encoding: 'utf8', maxBuffer: 1 << 24 });
      const line = c.stdout.trim().split('\n').pop() ?? '';
      if (c.status !== 0 || !line.startsWith('{')) { process.stdout.write(`${name}: failed (${c.status}) ${c.stderr.slice(-500)}\n`); continue; }
      const x = JSON.parse(line) as Reading;
      got.set(name, [...(got.get(name) ?? []), x]);
      process.stdout.write(`round ${r + 1} ${name.padEnd(24)} decode ${x.decodeTokPerS.toFixed(1)} tok/s, last first token ${x.firstTokenMs.toFixed(0)} ms, total ${x.totalMs.toFixed(0)} ms\n`);
    }
  }
  const med = median; // of an even count: the mean of the middle two (was the higher one)
  const a = got.get(layouts[0][0])?.map((x) => x.decodeTokPerS) ?? [];
  const b = got.get(layouts[1][0])?.map((x) => x.decodeTokPerS) ?? [];
  if (a.length && b.length) process.stdout.write(`median decode tok/s: ${layouts[0][0]} ${med(a).toFixed(1)}, ${layouts[1][0]} ${med(b).toFixed(1)} (ratio ${(med(b) / med(a)).toFixed(2)})\n`);
  const cps: [string, string][] = [['tp 2', 'cp,2,1'], ['tp 2 + prefill cp 2', 'cp,2,2']];
  const pre = new Map<string, number[]>();
  for (let r = 0; r < Number(values.repeats); r++) {
    for (const [name, spec] of cps) {
      const c = spawnSync(process.execPath, [self, ...process.argv.slice(2), '--child', spec], { encoding: 'utf8', maxBuffer: 1 << 24 });
      const line = c.stdout.trim().split('\n').pop() ?? '';
      if (c.status !== 0 || !line.startsWith('{')) { process.stdout.write(`${name}: failed (${c.status}) ${c.stderr.slice(-500)}\n`); continue; }
      const x = JSON.parse(line) as { prefillTokPerS: number; seconds: number };
      pre.set(name, [...(pre.get(name) ?? []), x.prefillTokPerS]);
      process.stdout.write(`round ${r + 1} ${name.padEnd(24)} prefill ${x.prefillTokPerS.toFixed(1)} tok/s (${x.seconds.toFixed(2)} s for ${values.quick ? 512 : values['prefill-len']} tokens)\n`);
    }
  }
  const p0 = pre.get(cps[0][0]) ?? [];
  const p1 = pre.get(cps[1][0]) ?? [];
  if (p0.length && p1.length) process.stdout.write(`median prefill tok/s: ${cps[0][0]} ${med(p0).toFixed(1)}, ${cps[1][0]} ${med(p1).toFixed(1)} (ratio ${(med(p1) / med(p0)).toFixed(2)})\n`);
}
