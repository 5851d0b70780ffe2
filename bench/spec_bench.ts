// `npm run bench:spec [-- --batches 1,8 --new 48 --threads 1 --quick]`: decode throughput of speculative decoding on the
// bench-sized DeepSeek-V3.2 checkpoint (bench_presets.ts) against plain decoding, in one run, side by side:
//   plain — no speculation;
//   STANDALONE self-draft (3,1,4) — the target as its own draft: every greedy verify accepts all 3 drafts, so this is
//     the cost of drafting 3 tokens with the full model plus verifying 4 tokens in one forward, against 4 plain
//     decode steps (the ceiling of what speculation can buy on this memory-bound CPU);
//   EAGLE (3,1,4) — the checkpoint's MTP layer as the draft (random weights here: accept length ≈ 1, the overhead).
// Greedy requests with ignore_eos after 128-token prompts; decode tok/s = (completion − 1) tokens per request over the
// time from the first to the last output. Figures only; nothing is asserted. Each reading is printed.
import { availableParallelism, loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { Engine, type EngineOptions } from '../src/engine/index.js';
import { ensureBenchCheckpoint } from './bench_presets.js';

const { values } = parseArgs({ options: { batches: { type: 'string' }, new: { type: 'string' }, threads: { type: 'string' }, quick: { type: 'boolean' } } });
const batches = (values.batches ?? '1,8').split(',').map(Number);
const newTokens = Number(values.new ?? (values.quick ? 16 : 48));
const threads = Number(values.threads ?? 1);
const PROMPT_LEN = 128;

interface Reading { tokPerS: number; acceptLen: number | null; wallS: number }

async function run(dir: string, batch: number, spec: Partial<EngineOptions>): Promise<Reading> {
  const e = await Engine.create({ modelPath: dir, skipTokenizerInit: true, useWorkerThread: false, numThreads: threads, maxTotalTokens: 16384, contextLength: 1024, ...spec });
  try {
    const t0 = performance.now();
    const outs = await Promise.all(Array.from({ length: batch }, async (_, b) => {
      const inputIds = Array.from({ length: PROMPT_LEN }, (_, i) => 1 + ((i * 7919 + b * 104729) % 1000));
      let first = 0;
      let last = 0;
      let n = 0;
      for await (const o of e.generate({ rid: `b${b}`, inputIds, stream: true, samplingParams: { temperature: 0, maxNewTokens: newTokens, ignoreEos: true } })) {
        if (first === 0) first = performance.now();
        last = performance.now();
        n = o.completionTokens;
      }
      return { first, last, n };
    }));
    const decodeStart = Math.max(...outs.map((o) => o.first));
    const decodeEnd = Math.max(...outs.map((o) => o.last));
    const tokens = outs.reduce((s, o) => s + o.n - 1, 0);
    const load = await e.getLoad();
    return { tokPerS: tokens / ((decodeEnd - decodeStart) / 1000), acceptLen: load.avgSpecAcceptLength ?? null, wallS: (performance.now() - t0) / 1000 };
  } finally {
    await e.shutdown();
  }
}

const dir = ensureBenchCheckpoint('deepseek-v32');
process.stdout.write(`tsglang bench:spec — bench DeepSeek-V3.2 checkpoint, ${threads} compute thread(s), ${availableParallelism()} cores, load average ${loadavg().map((x) => x.toFixed(2)).join(' ')}\n`);
process.stdout.write(`prompts ${PROMPT_LEN} tokens, ${newTokens} new tokens per request, greedy\n\n`);
const layouts: [string, Partial<EngineOptions>][] = [
  ['plain', {}],
  ['STANDALONE self-draft (3,1,4)', { speculativeAlgorithm: 'STANDALONE', speculativeDraftModelPath: dir, speculativeNumSteps: 3, speculativeEagleTopk: 1, speculativeNumDraftTokens: 4 }],
  ['EAGLE MTP (3,1,4)', { speculativeAlgorithm: 'EAGLE', speculativeNumSteps: 3, speculativeEagleTopk: 1, speculativeNumDraftTokens: 4 }],
];
process.stdout.write(`${'layout'.padEnd(32)} ${'batch'.padStart(5)} ${'decode tok/s'.padStart(13)} ${'vs plain'.padStart(9)} ${'accept len'.padStart(11)} ${'wall s'.padStart(8)}\n`);
for (const batch of batches) {
  let plainTps = 0;
  for (const [name, spec] of layouts) {
    const r = await run(dir, batch, spec);
    if (name === 'plain') plainTps = r.tokPerS;
    process.stdout.write(
      `${name.padEnd(32)} ${String(batch).padStart(5)} ${r.tokPerS.toFixed(2).padStart(13)} ${(r.tokPerS / plainTps).toFixed(2).padStart(8)}x ${(r.acceptLen === null ? '-' : r.acceptLen.toFixed(2)).padStart(11)} ${r.wallS.toFixed(1).padStart(8)}\n`,
    );
  }
}
