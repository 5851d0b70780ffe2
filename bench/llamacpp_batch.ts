// The batched-decode half of `npm run bench:llamacpp` (issue 21): decode throughput at batch B for tsglang and
// llama.cpp (bench/llamacpp_batch_peer.mjs: B sequences of one node-llama-cpp context, one llama_decode per step) on
// the same checkpoint, the bytes each decode step reads (weights + KV) and the GB/s that makes, and a CPU hog (one
// `yes` per core) that the benchmark starts and stops itself to measure both sides on contended cores.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, readdirSync, readFileSync, readSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import type { Ops } from '../src/kernels/index.js';
import { SimpleBatchContext } from '../src/layers/index.js';
import { KVPool, kvBytesPerToken } from '../src/mem_cache/index.js';
import type { CausalLM } from '../src/models/index.js';

/** Stored bytes of a checkpoint's tensors by role, from the safetensors headers. */
export interface WeightBytes {
  /** Routed-expert tensors (names with `.experts.`), all layers. */
  readonly experts: number;
  /** The token embedding (a step reads B rows of it). */
  readonly embedding: number;
  /** Everything else (attention, norms, router, shared experts, lm_head): read whole every step. */
  readonly dense: number;
}

/** Sums the stored bytes of every tensor of the checkpoint's *.safetensors by role. */
export function weightBytes(dir: string): WeightBytes {
  let experts = 0;
  let embedding = 0;
  let dense = 0;
  for (const f of readdirSync(dir).filter((n) => n.endsWith('.safetensors'))) {
    const fd = openSync(join(dir, f), 'r');
    try {
      const lenBuf = Buffer.alloc(8);
      readSync(fd, lenBuf, 0, 8, 0);
      const head = Buffer.alloc(Number(lenBuf.readBigUInt64LE(0)));
      readSync(fd, head, 0, head.length, 8);
      for (const [name, t] of Object.entries(JSON.parse(head.toString('utf8')) as Record<string, { data_offsets?: [number, number] }>)) {
        if (!t.data_offsets) continue;
        const b = t.data_offsets[1] - t.data_offsets[0];
        if (name.includes('.experts.') && !name.includes('shared')) experts += b;
        else if (name.includes('embed_tokens')) embedding += b;
        else dense += b;
      }
    } finally {
      closeSync(fd);
    }
  }
  return { experts, embedding, dense };
}

/**
 * Bytes one decode step of `batch` rows reads: dense weights once, `batch` embedding rows, each MoE layer's distinct
 * experts (expected under uniform routing: E · (1 − (1 − k/E)^B)), and every row's KV over `ctxLen` tokens.
 * @param cfg config.json (n_routed_experts | num_local_experts, num_experts_per_tok, vocab_size)
 */
export function stepBytes(w: WeightBytes, cfg: Record<string, unknown>, batch: number, ctxLen: number, kvPerToken: number): { weights: number; kv: number } {
  const E = Number(cfg['n_routed_experts'] ?? cfg['num_local_experts'] ?? 0);
  const k = Number(cfg['num_experts_per_tok'] ?? 0);
  const share = E > 0 && k > 0 ? 1 - (1 - k / E) ** batch : 1;
  const vocab = Number(cfg['vocab_size'] ?? 1);
  return { weights: w.dense + w.experts * share + (w.embedding / vocab) * batch, kv: batch * ctxLen * kvPerToken };
}

/** Throughput of one side at one batch size: wall-clock tok/s and tok per CPU-second (median and every run). */
export interface DecodeRate {
  readonly tokS: number;
  readonly runs: number[];
  /** Tokens per second of CPU time of the whole process (user + system, all threads) over the decode phase. */
  readonly tokCpuS: number;
  readonly cpuRuns: number[];
}

/**
 * tsglang's batched decode: `batch` sequences each prefilled with `prompt` (untimed, one extend batch), then
 * `steps` greedy decode steps of all rows; the median over `runs` after a warmup run. Every run uses the same KV pool,
 * touched once before the first.
 * @returns the rates (wall and CPU time) and the KV bytes per token of the pool
 */
export function oursBatchDecode(model: CausalLM, ops: Ops, prompt: readonly number[], batch: number, steps: number, runs: number, argmax: (x: Float32Array, off: number, n: number) => number): DecodeRate & { kvPerToken: number } {
  const V = model.config.vocabSize;
  const layout = model.kvPoolLayout();
  // one pool for every run, its memory touched before the first (a server's pool is long-lived; llama.cpp's KV
  // cache is allocated and cleared when its context is made): first-touch page faults of fresh KV rows inside the
  // timed steps cost ~2 CPU-ms per MiniMax batch-32 step, which is setup, not decode
  const maxLocs = batch * (prompt.length + steps + 2) + 2;
  const pool = new KVPool(layout, maxLocs, maxLocs, (b) => ops.allocateKvBuffer(b));
  for (let l = 0; l < layout.numLayers; l++) for (const b of layout.buffers) pool.store(l, b.name).raw.fill(0);
  const once = (n: number): { wall: number; cpu: number } => {
    const ctx = new SimpleBatchContext(pool, batch, prompt.length + n + 1); // locs from 1 again: rows are rewritten
    const reqs = Array.from({ length: batch }, () => ctx.addReq());
    const pre = model.forward(ctx.makeBatch(reqs.map((req) => ({ req, inputIds: prompt })), { logits: 'last' })).logits;
    const next = reqs.map((_, j) => argmax(pre, j * V, V));
    const t0 = performance.now();
    const c0 = process.cpuUsage();
    for (let i = 0; i < n; i++) {
      const lg = model.forward(ctx.makeBatch(reqs.map((req, j) => ({ req, inputIds: [next[j]] })), { logits: 'last' })).logits;
      for (let j = 0; j < batch; j++) next[j] = argmax(lg, j * V, V);
    }
    const c = process.cpuUsage(c0);
    return { wall: (batch * n) / ((performance.now() - t0) / 1000), cpu: (batch * n) / ((c.user + c.system) / 1e6) };
  };
  once(2);
  const res = Array.from({ length: runs }, () => once(steps));
  const wall = res.map((r) => r.wall);
  const cpu = res.map((r) => r.cpu);
  return { tokS: median(wall), runs: wall, tokCpuS: median(cpu), cpuRuns: cpu, kvPerToken: kvBytesPerToken(layout) };
}

/** llama.cpp's batched decode through bench/llamacpp_batch_peer.mjs (a child process, cwd = node-llama-cpp's folder). */
export function peerBatchDecode(peerScript: string, llcppModules: string, gguf: string, batch: number, threads: number, promptLen: number, steps: number, runs: number): DecodeRate {
  const r = spawnSync(process.execPath, [peerScript, gguf, '--batch', String(batch), '--threads', String(threads), '--prompt-len', String(promptLen), '--decode-len', String(steps), '--runs', String(runs)],
    { encoding: 'utf8', cwd: join(llcppModules, '..'), env: { ...process.env, NODE_PATH: llcppModules }, stdio: ['ignore', 'pipe', 'inherit'] });
  if (r.status !== 0) throw new Error(`llamacpp_batch_peer.mjs failed (exit ${r.status})`);
  const j = JSON.parse(r.stdout.trim().split('\n').pop()!) as { decode_tok_s: number; runs: number[]; decode_tok_cpu_s: number; cpu_runs: number[] };
  return { tokS: j.decode_tok_s, runs: j.runs, tokCpuS: j.decode_tok_cpu_s, cpuRuns: j.cpu_runs };
}

/** A fixed CPU hog: one `yes` per core writing to /dev/null, started and stopped (by PID) by the benchmark. */
export class CpuHog {
  private procs: ChildProcess[] = [];
  private readonly onExit = () => this.stop();

  /** Starts `n` hog processes (default: one per core). */
  start(n = availableParallelism()): void {
    for (let i = 0; i < n; i++) this.procs.push(spawn('yes', [], { stdio: ['ignore', 'ignore', 'ignore'] }));
    process.on('exit', this.onExit);
  }

  /** Stops the hog processes this object started. */
  stop(): void {
    for (const p of this.procs) if (p.exitCode === null && p.signalCode === null) p.kill('SIGKILL');
    this.procs = [];
    process.off('exit', this.onExit);
  }
}

/** Median of a non-empty list. */
export function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[s.length >> 1] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

/** config.json of a checkpoint folder. */
export function readConfig(dir: string): Record<string, unknown> {
  return JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8')) as Record<string, unknown>;
}
