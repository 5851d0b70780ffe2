// `npm run bench:one-batch [-- --threads 1,2] [--archs minimax-m2,deepseek-v32] [--quick]`: `tsglang
// bench-one-batch` on the bench-sized checkpoint of each architecture (bench_presets.ts): prefill of one 512-token
// prompt, decode at batch 1 (after the 512-token prompt), 8 and 32 (after 64-token prompts). Prints SGLang's lines
// of every run and a summary table. Figures only; nothing is asserted.
import { spawnSync } from 'node:child_process';
import { availableParallelism, loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { ensureBenchCheckpoint } from './bench_presets.js';

const { values } = parseArgs({ options: { threads: { type: 'string' }, archs: { type: 'string' }, quick: { type: 'boolean' } } });
const threadList = (values.threads ?? `1,${availableParallelism()}`).split(',').map(Number).filter((n, i, a) => n >= 1 && a.indexOf(n) === i);
const archs = (values.archs ?? 'minimax-m2,deepseek-v32').split(',');
const quick = values.quick === true;
const bin = fileURLToPath(new URL('../../bin/tsglang.js', import.meta.url));

interface Row { arch: string; threads: number; batch: number; inputLen: number; prefill: number; decode: number }
const rows: Row[] = [];

function runBench(dir: string, threads: number, batch: string[], inputLen: number, outputLen: number): string {
  const args = [bin, 'bench-one-batch', '--model-path', dir, '--batch-size', ...batch, '--input-len', String(inputLen), '--output-len', String(outputLen), '--threads', String(threads), '--result-filename', ''];
  const r = spawnSync(process.execPath, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
  if (r.status !== 0) throw new Error(`bench-one-batch failed (exit ${r.status})`);
  return r.stdout;
}

/** Pulls (batch, prefill tok/s, median decode tok/s) per run out of the Benchmark part of the output. */
function parseRuns(out: string, batches: number[]): { batch: number; prefill: number; decode: number }[] {
  const bench = out.slice(out.indexOf('Benchmark ...'));
  const prefill = [...bench.matchAll(/Prefill\. latency: *[\d.]+ s, throughput: *([\d.]+) token\/s/g)].map((m) => Number(m[1]));
  const decode = [...bench.matchAll(/Decode\. {2}median latency: *[\d.]+ s, median throughput: *([\d.]+) token\/s/g)].map((m) => Number(m[1]));
  return batches.map((b, i) => ({ batch: b, prefill: prefill[i], decode: decode[i] }));
}

process.stdout.write(`tsglang bench:one-batch — ${availableParallelism()} cores, load average ${loadavg().map((x) => x.toFixed(2)).join(' ')}\n`);
for (const arch of archs) {
  const dir = ensureBenchCheckpoint(arch);
  for (const threads of threadList) {
    process.stdout.write(`\n=== ${arch}, threads ${threads}: batch 1, input 512 ===\n`);
    const a = runBench(dir, threads, ['1'], 512, quick ? 8 : 32);
    process.stdout.write(a);
    for (const r of parseRuns(a, [1])) rows.push({ arch, threads, inputLen: 512, ...r });
    const batches = quick ? [8] : [8, 32];
    process.stdout.write(`\n=== ${arch}, threads ${threads}: batch ${batches.join(', ')}, input 64 ===\n`);
    const b = runBench(dir, threads, batches.map(String), 64, quick ? 8 : 16);
    process.stdout.write(b);
    for (const r of parseRuns(b, batches)) rows.push({ arch, threads, inputLen: 64, ...r });
  }
}
process.stdout.write('\nsummary (token/s; prefill = batch × input tokens / prefill latency, decode = batch / median step latency)\n');
process.stdout.write(`${'arch'.padEnd(14)} ${'threads'.padStart(7)} ${'batch'.padStart(5)} ${'input'.padStart(5)} ${'prefill'.padStart(9)} ${'decode'.padStart(9)}\n`);
for (const r of rows) {
  process.stdout.write(`${r.arch.padEnd(14)} ${String(r.threads).padStart(7)} ${String(r.batch).padStart(5)} ${String(r.inputLen).padStart(5)} ${r.prefill.toFixed(1).padStart(9)} ${r.decode.toFixed(1).padStart(9)}\n`);
}
process.stdout.write(`load average at the end: ${loadavg().map((x) => x.toFixed(2)).join(' ')}\n`);
