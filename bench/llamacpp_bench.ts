// `npm run bench:llamacpp [-- --threads 1,2] [--archs minimax-m2] [--runs 3] [--decode-len 128] [--batches 1,8,32]
// [--hog off|on|both] [--batch-only] [--rounds 1]`: tsglang and
// llama.cpp side by side on the same weights. The bench checkpoint (FP8, bench_presets.ts) is converted to GGUF q8_0
// by ../shared/tools/llamacpp-peer/hf_to_gguf.py (q8_0 at 8.5 bits is the fair match for FP8); llama.cpp runs through
// node-llama-cpp (installed OUTSIDE this package: `mkdir -p /tmp/llcpp && cd /tmp/llcpp && npm init -y &&
// npm i -E node-llama-cpp@3.21.1`, or set LLCPP_NODE_MODULES). Both sides: one 512-token prompt prefilled in one
// batch (last-position logits + greedy pick), then greedy decode at batch 1; tok/s = tokens / phase wall time, median
// of --runs after one warmup run; same prompt ids (llama.cpp's --dump-tokens), same thread count.
// Then batched decode (bench/llamacpp_batch.ts): B sequences of 16 prompt ids, 16 greedy steps of all B rows, both
// sides (llama.cpp: B sequences in one context, one llama_decode per step), at every --batches B, quiet and beside a
// CPU hog (one `yes` per core, started and stopped here) — with the bytes of weights and KV each step reads, the
// resulting GB/s and its share of the machine's measured read bandwidth (all threads, 512 MiB buffer). Each batch
// size runs --rounds rounds of (tsglang, llama.cpp), the side that goes first alternating, and the medians pool every
// run of every round; beside wall-clock tok/s each side reports tokens per CPU-second of its process (user + system
// time, all threads), a figure a loaded machine disturbs far less than the wall clock.
import { spawnSync } from 'node:child_process';
import { closeSync, existsSync, openSync, readdirSync, readFileSync, readSync, statSync } from 'node:fs';
import { availableParallelism, loadavg } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { createOps, loadNativeAddon } from '../src/kernels/index.js';
import type { Ops } from '../src/kernels/index.js';
import { SimpleBatchContext } from '../src/layers/index.js';
import { KVPool } from '../src/mem_cache/index.js';
import { loadModel } from '../src/models/index.js';
import type { CausalLM } from '../src/models/index.js';
import { ensureBenchCheckpoint } from './bench_presets.js';
import { CpuHog, median, oursBatchDecode, peerBatchDecode, readConfig, stepBytes, weightBytes } from './llamacpp_batch.js';
import type { DecodeRate } from './llamacpp_batch.js';

const { values } = parseArgs({ options: { threads: { type: 'string' }, archs: { type: 'string' }, runs: { type: 'string' }, 'decode-len': { type: 'string' }, 'prompt-len': { type: 'string' },
  batches: { type: 'string' }, hog: { type: 'string' }, 'batch-only': { type: 'boolean' }, rounds: { type: 'string' } } });
const threadList = (values.threads ?? `1,${availableParallelism()}`).split(',').map(Number).filter((n, i, a) => n >= 1 && a.indexOf(n) === i);
const archs = (values.archs ?? 'minimax-m2,deepseek-v32').split(',');
const runs = Number(values.runs ?? 3);
const decodeLen = Number(values['decode-len'] ?? 128);
const promptLen = Number(values['prompt-len'] ?? 512);
const repo = fileURLToPath(new URL('../..', import.meta.url));
const peerDir = process.env.LLAMACPP_PEER_DIR ?? resolve(repo, '..', 'shared', 'tools', 'llamacpp-peer');
const llcppModules = process.env.LLCPP_NODE_MODULES ?? '/tmp/llcpp/node_modules';
const batches = (values.batches ?? '1,8,32').split(',').map(Number).filter((n) => n >= 1);
const hogModes = ({ off: [false], on: [true], both: [false, true] } as Record<string, boolean[]>)[values.hog ?? 'both'] ?? [false, true];
const batchOnly = values['batch-only'] === true;
const rounds = Math.max(1, Number(values.rounds ?? 1));
const BATCH_PROMPT = 16;
const BATCH_STEPS = 16;
const peerBatchScript = fileURLToPath(new URL('../../bench/llamacpp_batch_peer.mjs', import.meta.url));

if (!existsSync(join(llcppModules, 'node-llama-cpp'))) {
  process.stderr.write(`bench:llamacpp: node-llama-cpp not found in ${llcppModules}.\nInstall it outside this package: mkdir -p /tmp/llcpp && cd /tmp/llcpp && npm init -y && npm i -E node-llama-cpp@3.21.1\n`);
  process.exit(1);
}

/** Parameter count (scale tensors excluded) and stored bytes of a safetensors checkpoint, from the headers. */
function checkpointStats(dir: string): { params: number; bytes: number } {
  let params = 0;
  let bytes = 0;
  for (const f of readdirSync(dir).filter((n) => n.endsWith('.safetensors'))) {
    const fd = openSync(join(dir, f), 'r');
    try {
      const lenBuf = Buffer.alloc(8);
      readSync(fd, lenBuf, 0, 8, 0);
      const len = Number(lenBuf.readBigUInt64LE(0));
      const head = Buffer.alloc(len);
      readSync(fd, head, 0, len, 8);
      const header = JSON.parse(head.toString('utf8')) as Record<string, { shape?: number[]; data_offsets?: [number, number] }>;
      for (const [name, t] of Object.entries(header)) {
        if (name === '__metadata__' || !t.data_offsets || !t.shape) continue;
        bytes += t.data_offsets[1] - t.data_offsets[0];
        if (!name.endsWith('_scale_inv')) params += t.shape.reduce((a, b) => a * b, 1);
      }
    } finally {
      closeSync(fd);
    }
  }
  return { params, bytes };
}

/** The addon's greedy argmax (what the engine's sampler uses for greedy rows; llama.cpp's side picks natively too). */
const nativeArgmax = loadNativeAddon().addon?.argmaxF32 ?? null;

/** Index of the first largest of x[off..off+n) (`b = 0; for i ≥ 1: if (x[i] > x[b]) b = i`), natively when it can. */
function argmax(x: Float32Array, off: number, n: number): number {
  if (nativeArgmax) return nativeArgmax(x.subarray(off, off + n), n);
  let b = 0;
  for (let i = 1; i < n; i++) if (x[off + i] > x[off + b]) b = i;
  return b;
}

/**
 * Our side of one run: prefill the prompt in one batch, then `decodeLen` greedy steps.
 * @param ops the model's backend (its KV-cache storage, as the engine allocates it)
 * @returns tok/s of each phase
 */
function runOnce(model: CausalLM, ops: Ops, prompt: number[]): { prefill: number; decode: number } {
  const V = model.config.vocabSize;
  const ctx = new SimpleBatchContext(new KVPool(model.kvPoolLayout(), prompt.length + decodeLen + 2, undefined, (n) => ops.allocateKvBuffer(n)), 1, prompt.length + decodeLen + 1);
  const req = ctx.addReq();
  let t0 = performance.now();
  const out = model.forward(ctx.makeBatch([{ req, inputIds: prompt }], { logits: 'last' }));
  let next = argmax(out.logits, 0, V);
  const prefillS = (performance.now() - t0) / 1000;
  t0 = performance.now();
  for (let i = 0; i < decodeLen; i++) next = argmax(model.forward(ctx.makeBatch([{ req, inputIds: [next] }], { logits: 'last' })).logits, 0, V);
  const decodeS = (performance.now() - t0) / 1000;
  return { prefill: prompt.length / prefillS, decode: decodeLen / decodeS };
}

/** True when `gguf` exists and is newer than every safetensors shard of `dir` (a regenerated checkpoint needs a new GGUF). */
function ggufIsCurrent(dir: string, gguf: string): boolean {
  if (!existsSync(gguf)) return false;
  const built = statSync(gguf).mtimeMs;
  return readdirSync(dir).filter((n) => n.endsWith('.safetensors')).every((n) => statSync(join(dir, n)).mtimeMs <= built);
}

interface Line { arch: string; threads: number; ours: { prefill: number; decode: number }; llama: { prefill: number; decode: number }; oursBpw: number; llamaBpw: number }
const lines: Line[] = [];
interface BatchLine { arch: string; threads: number; hog: boolean; batch: number; ours: DecodeRate; llama: DecodeRate; mbStep: number; oursGBs: number; llamaGBs: number; ceiling: number; load: number }

/** The runs of several rounds pooled into one rate (medians over every run). */
function pooled(rates: DecodeRate[]): DecodeRate {
  const runs = rates.flatMap((r) => r.runs);
  const cpuRuns = rates.flatMap((r) => r.cpuRuns);
  return { tokS: median(runs), runs, tokCpuS: median(cpuRuns), cpuRuns };
}
const fmtRuns = (xs: number[]): string => xs.map((x) => x.toFixed(1)).join(' ');
const batchLines: BatchLine[] = [];
const hog = new CpuHog();
process.stdout.write(`tsglang bench:llamacpp — ${availableParallelism()} cores, load average ${loadavg().map((x) => x.toFixed(2)).join(' ')}\n`);
for (const arch of archs) {
  const dir = ensureBenchCheckpoint(arch);
  const gguf = join(dir, 'model-q8_0.gguf');
  if (!ggufIsCurrent(dir, gguf)) {
    process.stderr.write(`converting ${dir} → ${gguf} (q8_0) ...\n`);
    const c = spawnSync('python3', [join(peerDir, 'hf_to_gguf.py'), dir, gguf, '--outtype', 'q8_0'], { stdio: ['ignore', 'inherit', 'inherit'] });
    if (c.status !== 0) throw new Error(`hf_to_gguf.py failed (exit ${c.status})`);
  }
  const stats = checkpointStats(dir);
  const ggufBytes = statSync(gguf).size;
  for (const threads of threadList) {
    const tokFile = join(dir, `tokens-${promptLen}.json`);
    const ops = createOps({ backend: 'native', threads });
    const { model } = loadModel(dir, { ops });
    if (!batchOnly) {
      const r = spawnSync(process.execPath, [join(peerDir, 'bench_llamacpp.mjs'), gguf, '--threads', String(threads), '--prompt-len', String(promptLen),
        '--decode-len', String(decodeLen), '--runs', String(runs), '--dump-tokens', tokFile], { encoding: 'utf8', env: { ...process.env, NODE_PATH: llcppModules }, stdio: ['ignore', 'pipe', 'inherit'] });
      if (r.status !== 0) throw new Error(`bench_llamacpp.mjs failed (exit ${r.status})`);
      const llama = JSON.parse(r.stdout.trim().split('\n').pop()!) as { prefill_tok_s: number; decode_tok_s: number };
      const prompt = (JSON.parse(readFileSync(tokFile, 'utf8')) as { prompt: number[] }).prompt;
      runOnce(model, ops, prompt); // warmup
      const res = Array.from({ length: runs }, () => runOnce(model, ops, prompt));
      const ours = { prefill: median(res.map((x) => x.prefill)), decode: median(res.map((x) => x.decode)) };
      const line: Line = { arch, threads, ours, llama: { prefill: llama.prefill_tok_s, decode: llama.decode_tok_s }, oursBpw: stats.bytes / stats.params, llamaBpw: ggufBytes / stats.params };
      lines.push(line);
      process.stdout.write(`${arch} threads ${threads}: tsglang prefill ${ours.prefill.toFixed(1)} tok/s decode ${ours.decode.toFixed(1)} tok/s | llama.cpp q8_0 prefill ${line.llama.prefill.toFixed(1)} decode ${line.llama.decode.toFixed(1)} | ratio prefill ${(ours.prefill / line.llama.prefill).toFixed(2)}x decode ${(ours.decode / line.llama.decode).toFixed(2)}x\n`);
    }
    // batched decode, quiet and beside the hog
    const cfg = readConfig(dir);
    const wb = weightBytes(dir);
    const ceiling = (ops as unknown as { measureReadBandwidth?(bytes: number, reps: number): number }).measureReadBandwidth?.(512 << 20, 3) ?? NaN;
    const V = model.config.vocabSize;
    const bprompt = Array.from({ length: BATCH_PROMPT }, (_, i) => 2 + ((i * 7919) % (V - 2)));
    for (const withHog of hogModes) {
      if (withHog) hog.start();
      try {
        for (const B of batches) {
          const os: DecodeRate[] = [];
          const ls: DecodeRate[] = [];
          let kvPerToken = 0;
          for (let r = 0; r < rounds; r++) {
            const runOurs = (): void => {
              const o = oursBatchDecode(model, ops, bprompt, B, BATCH_STEPS, runs, argmax);
              kvPerToken = o.kvPerToken;
              os.push(o);
            };
            const runPeer = (): void => void ls.push(peerBatchDecode(peerBatchScript, llcppModules, gguf, B, threads, BATCH_PROMPT, BATCH_STEPS, runs));
            if (r % 2 === 0) { runOurs(); runPeer(); } else { runPeer(); runOurs(); }
          }
          const o = pooled(os);
          const l = pooled(ls);
          const sb = stepBytes(wb, cfg, B, BATCH_PROMPT + BATCH_STEPS / 2, kvPerToken);
          const stepB = sb.weights + sb.kv;
          const peerStepB = sb.weights * (ggufBytes / stats.bytes) + sb.kv; // q8_0 weights; KV counted as ours
          const bl: BatchLine = { arch, threads, hog: withHog, batch: B, ours: o, llama: l, mbStep: stepB / 1e6,
            oursGBs: (stepB * o.tokS) / B / 1e9, llamaGBs: (peerStepB * l.tokS) / B / 1e9, ceiling, load: loadavg()[0] };
          batchLines.push(bl);
          process.stdout.write(`${arch} threads ${threads}${withHog ? ' +hog' : ''} batch ${B}: tsglang ${o.tokS.toFixed(1)} tok/s [${fmtRuns(o.runs)}] | llama.cpp ${l.tokS.toFixed(1)} [${fmtRuns(l.runs)}] | ${(o.tokS / l.tokS).toFixed(2)}x` +
            ` | per CPU-s ${o.tokCpuS.toFixed(1)} [${fmtRuns(o.cpuRuns)}] vs ${l.tokCpuS.toFixed(1)} [${fmtRuns(l.cpuRuns)}] ${(o.tokCpuS / l.tokCpuS).toFixed(2)}x` +
            ` | ${bl.mbStep.toFixed(0)} MB/step → ${bl.oursGBs.toFixed(2)} vs ${bl.llamaGBs.toFixed(2)} GB/s of ${ceiling.toFixed(1)} | load ${bl.load.toFixed(2)}\n`);
        }
      } finally {
        if (withHog) hog.stop();
      }
    }
  }
}
if (lines.length > 0) process.stdout.write(`\n${'arch'.padEnd(14)} thr  ${'ours pf'.padStart(8)} ${'llama pf'.padStart(8)} ${'ratio'.padStart(6)}  ${'ours dec'.padStart(8)} ${'llama dec'.padStart(9)} ${'ratio'.padStart(6)}  bytes/weight ours | llama.cpp\n`);
for (const l of lines) {
  process.stdout.write(`${l.arch.padEnd(14)} ${String(l.threads).padStart(3)}  ${l.ours.prefill.toFixed(1).padStart(8)} ${l.llama.prefill.toFixed(1).padStart(8)} ${(l.ours.prefill / l.llama.prefill).toFixed(2).padStart(5)}x  ${l.ours.decode.toFixed(1).padStart(8)} ${l.llama.decode.toFixed(1).padStart(9)} ${(l.ours.decode / l.llama.decode).toFixed(2).padStart(5)}x  ${l.oursBpw.toFixed(3)} | ${l.llamaBpw.toFixed(3)}\n`);
}
if (lines.length > 0) process.stdout.write(`prompt ${promptLen} ids (llama.cpp's seed), decode ${decodeLen} greedy steps at batch 1, median of ${runs} runs after 1 warmup; load average at the end ${loadavg().map((x) => x.toFixed(2)).join(' ')}\n`);
process.stdout.write(`\nbatched decode (${BATCH_PROMPT} prompt ids per sequence, ${BATCH_STEPS} greedy steps, median of ${runs} runs × ${rounds} round(s) after 1 warmup each; tok/s = wall clock, tok/CPU-s = per second of the process's CPU time; MB/step = weights read once per step (experts: expected distinct under uniform routing) + KV of every row; GB/s = MB/step × steps/s, llama.cpp's weights at its q8_0 size; load = 1-min load average after the line)\n`);
process.stdout.write(`${'arch'.padEnd(12)} thr hog  batch ${'tsglang'.padStart(9)} ${'llama.cpp'.padStart(9)}  ratio  ${'tok/CPU-s'.padStart(9)} ${'llama'.padStart(7)}  ratio  MB/step  ${'GB/s ours'.padStart(9)} ${'llama'.padStart(6)}  ceiling  share ours | llama   load\n`);
for (const b of batchLines) {
  process.stdout.write(`${b.arch.padEnd(12)} ${String(b.threads).padStart(3)} ${b.hog ? 'yes' : ' no'}  ${String(b.batch).padStart(5)} ${b.ours.tokS.toFixed(1).padStart(9)} ${b.llama.tokS.toFixed(1).padStart(9)} ${(b.ours.tokS / b.llama.tokS).toFixed(2).padStart(5)}x  ${b.ours.tokCpuS.toFixed(1).padStart(9)} ${b.llama.tokCpuS.toFixed(1).padStart(7)} ${(b.ours.tokCpuS / b.llama.tokCpuS).toFixed(2).padStart(5)}x ${b.mbStep.toFixed(0).padStart(8)}  ${b.oursGBs.toFixed(2).padStart(9)} ${b.llamaGBs.toFixed(2).padStart(6)}  ${b.ceiling.toFixed(1).padStart(7)}  ${((100 * b.oursGBs) / b.ceiling).toFixed(0).padStart(4)}% | ${((100 * b.llamaGBs) / b.ceiling).toFixed(0).padStart(3)}%  ${b.load.toFixed(2).padStart(6)}\n`);
}
process.stdout.write(`load average at the end ${loadavg().map((x) => x.toFixed(2)).join(' ')}\n`);
