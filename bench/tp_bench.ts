// `npm run bench:tp [-- --archs minimax-m2,deepseek-v32] [--quick]`: decode throughput of tensor parallelism on rank
// threads against one rank, on the bench-sized checkpoints (bench_presets.ts): tp 1 with 2 compute threads vs tp 2 with
// 1 thread per rank, decode at batch 1 (after a 128-token prompt) and 32 (after 64-token prompts), plus the weight
// bytes each rank loaded and the process's resident memory (the ranks are threads of one process, so resident memory
// is per process: the per-rank figure is its weight shard). Each layout runs in a fresh child process. Figures
// only; nothing is asserted.
import { spawnSync } from 'node:child_process';
import { availableParallelism, loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { latencyTestRunOnce, syntheticPrompts } from '../src/cli/bench_one_batch.js';
import { loadModelConfig } from '../src/config/index.js';
import { launchTpRanks, type ForwardModel } from '../src/executor/index.js';
import { createOps } from '../src/kernels/index.js';
import { loadModel } from '../src/models/index.js';
import { ensureBenchCheckpoint } from './bench_presets.js';

const { values } = parseArgs({ options: { archs: { type: 'string' }, quick: { type: 'boolean' }, child: { type: 'string' } } });
const quick = values.quick === true;

interface ChildResult { weightBytes: number[]; rssAfterLoadMiB: number; maxRssMiB: number; decode: { batch: number; tokPerS: number; medianStepMs: number }[] }

/** Runs one layout in this process: `arch,tp,threads`. */
function child(spec: string): void {
  const [arch, tpS, thS] = spec.split(',');
  const tp = Number(tpS);
  const threads = Number(thS);
  const dir = ensureBenchCheckpoint(arch, () => {});
  let model: ForwardModel;
  let weightBytes: number[];
  if (tp > 1) {
    const l = launchTpRanks({ modelPath: dir, tpSize: tp, epSize: 1, threadsPerRank: threads });
    model = l.model;
    weightBytes = [...l.weightBytes];
  } else {
    const loaded = loadModel(dir, { ops: createOps({ threads }) });
    model = loaded.model;
    weightBytes = [loaded.weightBytes];
  }
  const rssAfterLoadMiB = process.memoryUsage().rss / 2 ** 20;
  const vocab = loadModelConfig(dir).vocabSize;
  const decode: ChildResult['decode'] = [];
  const silent = (): void => {};
  for (const [batch, inputLen] of [[1, 128], [32, 64]] as const) {
    const r = latencyTestRunOnce(model, syntheticPrompts(batch, inputLen, vocab, 0), quick ? 6 : 16, 'tp', 0, silent);
    decode.push({ batch, tokPerS: r.median_decode_throughput ?? 0, medianStepMs: (r.median_decode_latency ?? 0) * 1000 });
  }
  model.close?.();
  const out: ChildResult = { weightBytes, rssAfterLoadMiB, maxRssMiB: process.resourceUsage().maxRSS / 1024, decode };
  process.stdout.write(JSON.stringify(out) + '\n');
}

if (values.child) {
  child(values.child);
} else {
  const archs = (values.archs ?? 'minimax-m2,deepseek-v32').split(',');
  const layouts: [number, number][] = [[1, 2], [2, 1]];
  const self = fileURLToPath(import.meta.url);
  process.stdout.write(`tsglang bench:tp — ${availableParallelism()} cores, load average ${loadavg().map((x) => x.toFixed(2)).join(' ')}\n`);
  const rows: string[] = [];
  for (const arch of archs) {
    ensureBenchCheckpoint(arch);
    const base: Record<number, number> = {};
    for (const [tp, threads] of layouts) {
      const r = spawnSync(process.execPath, [self, '--child', `${arch},${tp},${threads}`, ...(quick ? ['--quick'] : [])], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
      if (r.status !== 0) throw new Error(`${arch} tp ${tp}: child exited with ${r.status}`);
      const res = JSON.parse(r.stdout.trim().split('\n').pop()!) as ChildResult;
      const mib = res.weightBytes.map((b) => (b / 2 ** 20).toFixed(1)).join(' / ');
      for (const d of res.decode) {
        if (tp === 1) base[d.batch] = d.tokPerS;
        const ratio = tp === 1 ? '' : ` (${(d.tokPerS / base[d.batch]).toFixed(2)}× tp 1)`;
        rows.push(`${arch.padEnd(13)} tp ${tp} × ${threads} thr  batch ${String(d.batch).padStart(2)}  decode ${d.tokPerS.toFixed(1).padStart(8)} tok/s  step ${d.medianStepMs.toFixed(2).padStart(7)} ms${ratio}`);
      }
      rows.push(`${arch.padEnd(13)} tp ${tp} × ${threads} thr  weight MiB per rank ${mib}; process RSS after load ${res.rssAfterLoadMiB.toFixed(0)} MiB, peak ${res.maxRssMiB.toFixed(0)} MiB`);
    }
  }
  process.stdout.write(rows.join('\n') + '\n');
  process.stdout.write(`load average at the end: ${loadavg().map((x) => x.toFixed(2)).join(' ')}\n`);
}
