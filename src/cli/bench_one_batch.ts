// `tsglang bench-one-batch`: time one static batch without a server (SGLang python/sglang/bench_one_batch.py):
// load the model, prefill `batch-size` random prompts of `input-len` tokens in one extend batch, then decode
// `output-len - 1` greedy steps. Prints SGLang's lines on stdout (a warmup run first, like SGLang):
//   Prefill. latency: 0.12345 s, throughput:   4147.50 token/s
//   Decode 0. Batch size: 1, latency: 0.01234 s, throughput:     81.04 token/s
//   Decode.  median latency: 0.01189 s, median throughput:     84.08 token/s
//   Total. latency:  0.500 s, throughput:   1056.00 token/s
// and appends one JSON line per (batch, input, output) to --result-filename.
import { appendFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { InvalidRequestError, Logger, Rng, TsglangError } from '../common/index.js';
import { loadModelConfig, readKernelEnv } from '../config/index.js';
import { installNativeSampling } from '../engine/index.js';
import { createOps, defaultThreads, parseOpsBackend } from '../kernels/index.js';
import type { OpsBackend } from '../kernels/index.js';
import { SimpleBatchContext } from '../layers/index.js';
import { KVPool } from '../mem_cache/index.js';
import { loadModel } from '../models/index.js';
import { defaultThreadsPerRank, launchTpRanks, type ForwardModel } from '../executor/index.js';
import { samplerKernels } from '../sampling/index.js';
import { argmax } from './logits.js';

const USAGE = `usage: tsglang bench-one-batch --model-path DIR [--batch-size B ...] [--input-len L ...] [--output-len N ...]
                               [--threads T] [--tp-size N] [--ep-size N] [--run-name NAME] [--result-filename FILE] [--log-decode-step K]

  --model-path DIR          local Hugging Face checkpoint directory
  --batch-size B ...        batch sizes to sweep (default 1)
  --input-len L ...         prompt lengths to sweep (default 1024)
  --output-len N ...        generated tokens per request, the first from prefill (default 16)
  --threads T               compute threads (per TP rank; default: available cores, divided by --tp-size)
  --tp-size N (--tp)        tensor-parallel ranks, worker threads in this process (default 1)
  --ep-size N (--ep)        expert-parallel size inside the TP group (default 1; must divide --tp-size)
  --backend auto|native|cpu kernels (default auto: native addon, else the TypeScript reference)
  --run-name NAME           run_name field of the result lines (default "default")
  --result-filename FILE    JSON lines appended here (default result.jsonl; "" to skip)
  --log-decode-step K       also print every K-th decode step (default 0: only the first 5)
  --json-model-override-args JSON   JSON object merged over config.json
  --seed S                  seed of the random prompt ids (default 0)
`;

/** Parsed flags of `tsglang bench-one-batch`. */
export interface BenchOneBatchArgs {
  readonly modelPath: string;
  readonly batchSize: number[];
  readonly inputLen: number[];
  readonly outputLen: number[];
  readonly threads: number;
  readonly tpSize: number;
  readonly epSize: number;
  readonly backend: OpsBackend;
  readonly runName: string;
  readonly resultFilename: string;
  readonly logDecodeStep: number;
  readonly overrideArgs: string | undefined;
  readonly seed: number;
}

/** One result line (SGLang's measurement_results keys). */
export interface BenchOneBatchResult {
  run_name: string;
  batch_size: number;
  input_len: number;
  output_len: number;
  prefill_latency: number;
  prefill_throughput: number;
  median_decode_latency?: number;
  median_decode_throughput?: number;
  total_latency: number;
  overall_throughput: number;
}

function positiveInts(list: readonly string[], flag: string): number[] {
  const out: number[] = [];
  for (const item of list) {
    for (const part of item.split(/[\s,]+/).filter((s) => s !== '')) {
      if (!/^\d+$/.test(part) || Number(part) < 1) throw new InvalidRequestError(`--${flag} takes positive integers, got '${part}'`, flag);
      out.push(Number(part));
    }
  }
  return out;
}

/** Collects the values after a multi-value flag (`--batch-size 1 8 32`) into one comma list, SGLang's nargs='+'. */
function joinMultiValues(argv: readonly string[], flags: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (flags.includes(a)) {
      const vals: string[] = [];
      while (i + 1 < argv.length && /^\d/.test(argv[i + 1])) vals.push(argv[++i]);
      out.push(a, vals.join(','));
    } else out.push(a);
  }
  return out;
}

/**
 * Parses argv of `tsglang bench-one-batch`.
 * @throws InvalidRequestError naming the flag for a missing or malformed value
 */
export function parseBenchOneBatchArgs(argv: readonly string[]): BenchOneBatchArgs {
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({
      args: joinMultiValues(argv, ['--batch-size', '--input-len', '--output-len']),
      options: {
        'model-path': { type: 'string' },
        'batch-size': { type: 'string', default: '1' },
        'input-len': { type: 'string', default: '1024' },
        'output-len': { type: 'string', default: '16' },
        threads: { type: 'string' },
        'tp-size': { type: 'string' },
        tp: { type: 'string' },
        'ep-size': { type: 'string' },
        ep: { type: 'string' },
        backend: { type: 'string', default: 'auto' },
        'run-name': { type: 'string', default: 'default' },
        'result-filename': { type: 'string', default: 'result.jsonl' },
        'log-decode-step': { type: 'string', default: '0' },
        'json-model-override-args': { type: 'string' },
        seed: { type: 'string', default: '0' },
        help: { type: 'boolean' },
      },
      strict: true,
      allowPositionals: false,
    }));
  } catch (err) {
    throw new InvalidRequestError((err as Error).message);
  }
  if (values.help) throw new InvalidRequestError('help');
  const modelPath = values['model-path'];
  if (typeof modelPath !== 'string' || modelPath === '') throw new InvalidRequestError('--model-path is required', 'model-path');
  const one = (flag: string): number => {
    const v = String(values[flag]);
    if (!/^\d+$/.test(v)) throw new InvalidRequestError(`--${flag} must be a non-negative integer, got '${v}'`, flag);
    return Number(v);
  };
  const sizeFlag = (long: string, short: string): number => {
    const v = values[long] ?? values[short];
    if (v === undefined) return 1;
    if (!/^\d+$/.test(String(v)) || Number(v) < 1) throw new InvalidRequestError(`--${long} must be a positive integer, got '${String(v)}'`, long);
    return Number(v);
  };
  const tpSize = sizeFlag('tp-size', 'tp');
  const epSize = sizeFlag('ep-size', 'ep');
  if (tpSize % epSize !== 0) throw new InvalidRequestError(`--ep-size (${epSize}) must divide --tp-size (${tpSize})`, 'ep-size');
  const threads = values.threads === undefined ? (tpSize > 1 ? defaultThreadsPerRank(tpSize) : defaultThreads(readKernelEnv())) : one('threads');
  if (threads < 1) throw new InvalidRequestError('--threads must be ≥ 1', 'threads');
  return {
    modelPath,
    batchSize: positiveInts([String(values['batch-size'])], 'batch-size'),
    inputLen: positiveInts([String(values['input-len'])], 'input-len'),
    outputLen: positiveInts([String(values['output-len'])], 'output-len'),
    threads,
    tpSize,
    epSize,
    backend: parseOpsBackend(String(values.backend), 'backend'),
    runName: String(values['run-name']),
    resultFilename: String(values['result-filename']),
    logDecodeStep: one('log-decode-step'),
    overrideArgs: values['json-model-override-args'] as string | undefined,
    seed: one('seed'),
  };
}

/**
 * Refuses a sweep whose longest sequence does not fit the model's context: prefill positions 0..L-1 plus N-1 decode
 * positions must stay below the context length (SGLang's total-token rule, input + output ≤ context_len), else the
 * rotary tables and attention run past what the model was built for and the figures mean nothing.
 * @param inputLen the sweep's --input-len values, tokens (the largest is checked)
 * @param outputLen the sweep's --output-len values, tokens (the largest is checked)
 * @param contextLength the model's context length (config.json max_position_embeddings, as `serve` derives it)
 * @throws InvalidRequestError naming --input-len / --output-len, the total and the context length
 */
export function checkSweepFitsContext(inputLen: readonly number[], outputLen: readonly number[], contextLength: number): void {
  const il = Math.max(...inputLen);
  const ol = Math.max(...outputLen);
  if (il + ol > contextLength) {
    throw new InvalidRequestError(
      `--input-len ${il} + --output-len ${ol} = ${il + ol} tokens exceeds the model's context length (${contextLength} tokens, max_position_embeddings in config.json); use a smaller --input-len or --output-len`,
      'input-len',
    );
  }
}

/**
 * Greedy pick per row: the first largest logit, with the engine's greedy kernel (the native argmax once
 * installNativeSampling has run, else logits.ts `argmax`; identical results).
 * @param logits [rows, vocab] f32
 */
function argmaxRows(logits: Float32Array, rows: number, vocab: number): number[] {
  const native = samplerKernels();
  const out: number[] = [];
  for (let r = 0; r < rows; r++) {
    const row = logits.subarray(r * vocab, (r + 1) * vocab);
    out.push(native ? native.argmax(row, vocab) : argmax(row));
  }
  return out;
}

/** Backend pieces a latency run borrows, as the engine uses them (optional: plain arrays). */
export interface LatencyRunBackend {
  /** KV-cache buffer storage (`Ops.allocateKvBuffer`): a zeroed f32 buffer of n elements. */
  readonly kvAlloc?: (n: number) => Float32Array;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/** Python's `{x:W.Pf}`: fixed point, right-aligned in W characters. */
function fmt(x: number, width: number, digits: number): string {
  return x.toFixed(digits).padStart(width);
}

/**
 * One latency run (SGLang latency_test_run_once): prefill all prompts as one extend batch, then `outputLen - 1`
 * batch decode steps with greedy picks. Prints SGLang's lines through `print`.
 * @param prompts [batchSize][inputLen] token ids
 * @param backend KV-cache storage (default plain arrays; `run` passes the backend's `Ops.allocateKvBuffer`, as the
 *   engine uses it)
 */
export function latencyTestRunOnce(model: ForwardModel, prompts: number[][], outputLen: number, runName: string, logDecodeStep: number, print: (line: string) => void, backend: LatencyRunBackend = {}): BenchOneBatchResult {
  const batchSize = prompts.length;
  const inputLen = prompts[0].length;
  const maxSeqLen = inputLen + outputLen;
  const ctx = new SimpleBatchContext(new KVPool(model.kvPoolLayout(), batchSize * maxSeqLen + 1, undefined, backend.kvAlloc), batchSize, maxSeqLen);
  const reqs = prompts.map(() => ctx.addReq());
  let tot = 0;
  let t0 = performance.now();
  const prefill = model.forward(ctx.makeBatch(reqs.map((req, i) => ({ req, inputIds: prompts[i] })), { logits: 'last' }));
  const vocab = prefill.logits.length / batchSize; // [batch, vocab] logits of the last rows
  let next = argmaxRows(prefill.logits, batchSize, vocab);
  const prefillLatency = (performance.now() - t0) / 1000;
  tot += prefillLatency;
  const prefillThroughput = (inputLen * batchSize) / prefillLatency;
  print(`Prefill. latency: ${fmt(prefillLatency, 6, 5)} s, throughput: ${fmt(prefillThroughput, 9, 2)} token/s`);
  const decodeLatencies: number[] = [];
  for (let i = 0; i < outputLen - 1; i++) {
    t0 = performance.now();
    const out = model.forward(ctx.makeBatch(reqs.map((req, r) => ({ req, inputIds: [next[r]] })), { logits: 'last' }));
    next = argmaxRows(out.logits, batchSize, vocab);
    const latency = (performance.now() - t0) / 1000;
    tot += latency;
    decodeLatencies.push(latency);
    if (i < 5 || (logDecodeStep > 0 && i % logDecodeStep === 0)) {
      print(`Decode ${i}. Batch size: ${batchSize}, latency: ${fmt(latency, 6, 5)} s, throughput: ${fmt(batchSize / latency, 9, 2)} token/s`);
    }
  }
  const result: BenchOneBatchResult = {
    run_name: runName, batch_size: batchSize, input_len: inputLen, output_len: outputLen,
    prefill_latency: prefillLatency, prefill_throughput: prefillThroughput,
  } as BenchOneBatchResult;
  if (outputLen > 1) {
    const med = median(decodeLatencies);
    result.median_decode_latency = med;
    result.median_decode_throughput = batchSize / med;
    print(`Decode.  median latency: ${fmt(med, 6, 5)} s, median throughput: ${fmt(batchSize / med, 9, 2)} token/s`);
  }
  const overall = ((inputLen + outputLen) * batchSize) / tot;
  print(`Total. latency: ${fmt(tot, 6, 3)} s, throughput: ${fmt(overall, 9, 2)} token/s`);
  result.total_latency = tot;
  result.overall_throughput = overall;
  return result;
}

/** Random prompts like SGLang's `np.random.randint(0, 10000, (bs, input_len))`, ids kept below the vocab size. */
export function syntheticPrompts(batchSize: number, inputLen: number, vocabSize: number, seed: number): number[][] {
  const rng = new Rng(seed);
  const hi = Math.min(10000, vocabSize);
  return Array.from({ length: batchSize }, () => Array.from({ length: inputLen }, () => Math.floor(rng.nextFloat() * hi)));
}

/** CLI entry. @returns exit code */
export async function run(argv: string[]): Promise<number> {
  let args: BenchOneBatchArgs;
  try {
    args = parseBenchOneBatchArgs(argv);
  } catch (err) {
    if (err instanceof InvalidRequestError && err.message === 'help') {
      process.stdout.write(USAGE);
      return 0;
    }
    process.stderr.write(`tsglang bench-one-batch: ${(err as Error).message}\n${USAGE}`);
    return 2;
  }
  const logger = new Logger('info');
  const print = (line: string): void => void process.stdout.write(line + '\n');
  try {
    checkSweepFitsContext(args.inputLen, args.outputLen, loadModelConfig(args.modelPath, args.overrideArgs ?? {}).maxPositionEmbeddings);
  } catch (err) {
    if (!(err instanceof TsglangError)) throw err;
    process.stderr.write(`tsglang bench-one-batch: ${err.message}\n`);
    return err instanceof InvalidRequestError ? 2 : 1;
  }
  try {
    const kernelEnv = readKernelEnv();
    const ops = createOps({ backend: args.backend, threads: args.threads, env: kernelEnv });
    if (ops.name === 'native') installNativeSampling(kernelEnv); // the engine's greedy kernel, as serving uses it
    logger.info(`bench-one-batch: backend ${ops.name}, threads ${args.threads}${args.tpSize > 1 ? ` per rank, tp_size ${args.tpSize}, ep_size ${args.epSize}` : ''}`);
    const tp = args.tpSize > 1
      ? launchTpRanks({ modelPath: args.modelPath, overrides: args.overrideArgs ?? {}, tpSize: args.tpSize, epSize: args.epSize, threadsPerRank: args.threads, kernelEnv, logger })
      : null;
    const model: ForwardModel = tp ? tp.model : loadModel(args.modelPath, { ops, overrides: args.overrideArgs ?? {}, logger }).model;
    const vocab = loadModelConfig(args.modelPath, args.overrideArgs ?? {}).vocabSize;
    const maxTokens = Math.max(...args.batchSize) * (Math.max(...args.inputLen) + Math.max(...args.outputLen));
    print(`max_total_num_tokens=${maxTokens}`);
    print('Warmup ...');
    const backend: LatencyRunBackend = { kvAlloc: (n) => ops.allocateKvBuffer(n) };
    latencyTestRunOnce(model, syntheticPrompts(args.batchSize[0], args.inputLen[0], vocab, args.seed), Math.min(32, args.outputLen[0]), args.runName, 0, print, backend);
    print('Benchmark ...');
    const results: BenchOneBatchResult[] = [];
    for (const bs of args.batchSize) {
      for (const il of args.inputLen) {
        for (const ol of args.outputLen) {
          results.push(latencyTestRunOnce(model, syntheticPrompts(bs, il, vocab, args.seed), ol, args.runName, args.logDecodeStep, print, backend));
        }
      }
    }
    if (args.resultFilename) appendFileSync(args.resultFilename, results.map((r) => JSON.stringify(r) + '\n').join(''));
    model.close?.();
    return 0;
  } catch (err) {
    if (err instanceof TsglangError) {
      process.stderr.write(`tsglang bench-one-batch: ${err.message}\n`);
      return 1;
    }
    throw err;
  }
}
