// `tsglang bench-serving`: sglang.bench_serving's run sequence and output (its flags: bench_serving_args.ts).
// Resolves the server and model, builds the dataset, sends a warm-up request, dispatches the requests (Poisson
// arrivals or all at once, under an optional concurrency cap), prints the result block and appends the JSONL record.
// Source: python/sglang/bench_serving.py (run_benchmark, benchmark, get_request); bench-spec.md §1.
import { appendFileSync } from 'node:fs';
import { InvalidRequestError } from '../common/index.js';
import { defaultOutputFile, namespaceRepr, parseExtraBody, serverRoot, type BenchServingArgs } from './bench_serving_args.js';
import type { BenchTokenizer } from './bench_tokenizer.js';
import { getDataset, type DatasetRow } from './datasets.js';
import { fetchJsonOrNull, httpRequest } from './http_client.js';
import { calculateMetrics, formatResultBlock, type BenchmarkMetrics } from './metrics.js';
import { NumpyRandomState, PythonRandom } from './py_random.js';
import { PyFloat, pyJsonDumps, type PyJson } from './py_format.js';
import {
  apiPathFor,
  requestFuncFor,
  type Clock,
  type RequestFuncInput,
  type RequestFuncOutput,
  type RequestSettings,
} from './request_funcs.js';

/** Where the tokenizer may come from, in SGLang's order of preference. */
export interface TokenizerSources {
  /** --tokenizer */
  tokenizer: string | null;
  /** the resolved model id (--model or the server's first model) */
  model: string;
  /** `tokenizer_path` / `model_path` from the server's /model_info, when it answered */
  serverTokenizerPath: string | null;
}

/** A progress bar (tqdm's role). */
export interface ProgressBar {
  increment(): void;
  stop(): void;
}

/** Everything bench-serving touches outside itself (injectable for tests). */
export interface BenchServingEnv {
  clock: Clock;
  /** Loads the tokenizer or throws a TsglangError saying which source to give. */
  loadTokenizer(sources: TokenizerSources): Promise<BenchTokenizer>;
  /** Console output (the result block etc.). */
  print(line: string): void;
  /** Warnings and logs (stderr). */
  warn(line: string): void;
  /** Starts a progress bar over `total` requests (a no-op bar when disabled). */
  progress(total: number): ProgressBar;
  /** Local path of the ShareGPT file, downloading it if possible; null offline. */
  fetchShareGpt(): Promise<string | null>;
  /** Why the last fetchShareGpt() returned null (DatasetIo.fetchFailure). */
  fetchFailure?(): string | null;
  /** HTTP headers every request carries (auth, --header). */
  headers: Record<string, string>;
  /** `SGLANG_IS_IN_CI` is true / 1 (flush the cache for sglang backends). */
  isInCi: boolean;
  /** Today's date for the default output file name (MMDD). */
  today: Date;
}

/** What a run returns: the record appended to the JSONL file plus the per-request details. */
export interface BenchServingResult {
  metrics: BenchmarkMetrics;
  durationS: number;
  outputs: RequestFuncOutput[];
  rows: DatasetRow[];
  /** The printed block, line by line. */
  block: string[];
  /** The JSONL line written (without '\n'). */
  jsonl: string;
  outputFile: string;
}

class Semaphore {
  private free: number;
  private readonly waiters: (() => void)[] = [];
  constructor(n: number) {
    this.free = n;
  }
  async acquire(): Promise<void> {
    if (this.free > 0) {
      this.free--;
      return;
    }
    await new Promise<void>((resolve) => this.waiters.push(resolve));
  }
  release(): void {
    const next = this.waiters.shift();
    if (next) next();
    else this.free++;
  }
}

async function getServerInfo(root: string, headers: Record<string, string>): Promise<Record<string, unknown> | null> {
  const info = (await fetchJsonOrNull(`${root}/get_server_info`, { headers })) ?? (await fetchJsonOrNull(`${root}/server_info`, { headers }));
  return info !== null && typeof info === 'object' ? (info as Record<string, unknown>) : null;
}

function acceptLengthOf(info: Record<string, unknown> | null): number | null {
  if (info === null) return null;
  let s: Record<string, unknown> = info;
  if (Array.isArray(s.decode) && s.decode.length > 0) s = s.decode[0] as Record<string, unknown>;
  const states = s.internal_states;
  if (!Array.isArray(states) || states.length === 0) return null;
  const v = (states[0] as Record<string, unknown>).avg_spec_accept_length;
  return typeof v === 'number' ? v : null;
}

/**
 * Runs one benchmark end to end (SGLang's `run_benchmark` + `benchmark`).
 * @throws InvalidRequestError when no model can be found, the warm-up fails, or every request failed
 */
export async function runBenchServing(args: BenchServingArgs, env: BenchServingEnv): Promise<BenchServingResult> {
  env.warn(`benchmark_args=${namespaceRepr(args)}`);
  const np = new NumpyRandomState(args.seed);
  const py = new PythonRandom(args.seed);
  const extraBody = parseExtraBody(args.extraRequestBody);
  const root = serverRoot(args);
  const apiUrl = root + apiPathFor(args.backend);
  const headers = env.headers;

  // 1. Model and tokenizer.
  let model = args.model;
  if (model === null) {
    const list = (await fetchJsonOrNull(`${root}/v1/models`, { headers })) as { data?: { id?: string }[] } | null;
    if (list === null) {
      env.warn(`Failed to fetch model from ${root}/v1/models.`);
      env.warn('Please specify the correct host and port using `--host` and `--port`.');
    }
    model = list?.data?.[0]?.id ?? null;
  }
  if (model === null) throw new InvalidRequestError('No model specified or found. Please provide a model using `--model`.', 'model');
  const modelInfo = (await fetchJsonOrNull(`${root}/model_info`, { headers, timeoutMs: 10_000 })) as Record<string, unknown> | null;
  const serverTokenizerPath =
    typeof modelInfo?.tokenizer_path === 'string' ? modelInfo.tokenizer_path : typeof modelInfo?.model_path === 'string' ? modelInfo.model_path : null;
  const tokenizer = await env.loadTokenizer({ tokenizer: args.tokenizer, model, serverTokenizerPath });
  if (!tokenizer.hasChatTemplate) {
    env.warn('WARNING It is recommended to use the `Chat` or `Instruct` model for benchmarking.');
    env.warn('Because when the tokenizer counts the output tokens, if there is gibberish, it might count incorrectly.');
  }
  const modelId = args.servedModelName ?? model;

  // 2. Dataset.
  const rows = await getDataset(args, tokenizer, { np, py }, { fetchShareGpt: env.fetchShareGpt, fetchFailure: env.fetchFailure, print: env.print, warn: env.warn });
  if (rows.length === 0) throw new InvalidRequestError('the dataset produced no prompts', 'dataset_name');

  const settings: RequestSettings = {
    disableStream: args.disableStream,
    disableIgnoreEos: args.disableIgnoreEos,
    returnLogprob: args.returnLogprob,
    headers,
    clock: env.clock,
    timeoutMs: 6 * 3600 * 1000,
  };
  const requestFunc = requestFuncFor(args.backend);
  const loraNames = args.loraName && args.loraName.length > 0 ? args.loraName : null;

  // 3. Warm-up: row 0 with at most 32 output tokens, outside the concurrency cap.
  env.print(`Starting warmup with ${args.warmupRequests} sequences...`);
  const warmInput: RequestFuncInput = {
    prompt: rows[0].prompt,
    apiUrl,
    promptLen: rows[0].promptLen,
    outputLen: Math.min(rows[0].outputLen, 32),
    model: modelId,
    loraName: loraNames ? loraNames[0] : null,
    extraRequestBody: extraBody,
  };
  const warm = await Promise.all(Array.from({ length: args.warmupRequests }, () => requestFunc(warmInput, settings)));
  if (args.warmupRequests > 0 && !warm.some((o) => o.success)) {
    throw new InvalidRequestError(`Warmup failed - Please make sure benchmark arguments are correctly specified. Error: ${warm[0].error}`, null);
  }
  env.print(`Warmup completed with ${args.warmupRequests} sequences. Starting main benchmark run...`);

  // 4. Flush, settle, profile.
  if (args.flushCache || (args.backend.includes('sglang') && env.isInCi)) {
    await httpRequest(`${root}/flush_cache`, { method: 'POST', headers }).then((r) => r.text()).catch(() => '');
  }
  await env.clock.sleep(1.0);
  if (args.profile) {
    env.print('Starting profiler...');
    const r = await httpRequest(`${root}/start_profile`, { json: {}, headers }).catch(() => null);
    if (r && r.status === 200) env.print('Profiler started');
    await r?.text();
  }

  // 5. Dispatch: all at once, or after exponential gaps; each request under the semaphore.
  const semaphore = args.maxConcurrency ? new Semaphore(args.maxConcurrency) : null;
  const bar = args.disableTqdm ? null : env.progress(rows.length);
  let loraIdx = 0;
  const loraProbs = loraNames ? loraNames.map((_, i) => args.loraZipfAlpha ** -i) : [];
  const loraTotal = loraProbs.reduce((a, b) => a + b, 0);
  const pickLora = (): string | null => {
    if (!loraNames) return null;
    if (args.loraRequestDistribution === 'uniform') return py.choice(loraNames);
    if (args.loraRequestDistribution === 'distinct') return loraNames[loraIdx++ % loraNames.length];
    // np.random.choice(p=...): inverse CDF on one uniform draw
    const u = np.random();
    let acc = 0;
    for (let i = 0; i < loraNames.length; i++) {
      acc += loraProbs[i] / loraTotal;
      if (u < acc) return loraNames[i];
    }
    return loraNames[loraNames.length - 1];
  };
  const benchmarkStart = env.clock.now();
  const tasks: Promise<RequestFuncOutput>[] = [];
  for (let i = 0; i < rows.length; i++) {
    const r = rows[i];
    const input: RequestFuncInput = {
      prompt: r.prompt,
      apiUrl,
      promptLen: r.promptLen,
      outputLen: r.outputLen,
      model: modelId,
      loraName: pickLora(),
      extraRequestBody: { ...extraBody, ...r.extraRequestBody },
    };
    tasks.push(
      (async () => {
        if (semaphore) await semaphore.acquire();
        try {
          return await requestFunc(input, settings);
        } finally {
          semaphore?.release();
          bar?.increment();
        }
      })(),
    );
    if (args.requestRate !== Infinity) await env.clock.sleep(np.exponential(1.0 / args.requestRate));
  }
  const outputs = await Promise.all(tasks);
  if (args.profile) {
    env.print('Stopping profiler...');
    const r = await httpRequest(`${root}/stop_profile`, { json: {}, headers }).catch(() => null);
    if (r && r.status === 200) env.print('Profiler stopped');
    await r?.text();
  }
  bar?.stop();
  const acceptLength = args.backend.includes('sglang') ? acceptLengthOf(await getServerInfo(root, headers)) : null;
  const durationS = env.clock.now() - benchmarkStart;

  // 6. Metrics, block, record.
  const completedAny = outputs.some((o) => o.success);
  if (!completedAny) {
    throw new InvalidRequestError(
      `All requests failed. This is likely due to a misconfiguration on the benchmark arguments. First error: ${outputs[0]?.error ?? ''}`,
      null,
    );
  }
  const metrics = calculateMetrics(rows, outputs, {
    durationS,
    backend: args.backend,
    acceptLength,
    countTokens: (text) => tokenizer.encode(text, false).length,
  });
  const block = formatResultBlock(metrics, {
    backend: args.backend,
    requestRate: args.requestRate,
    maxConcurrency: args.maxConcurrency,
    durationS,
    showVisionTokens: false,
    acceptLength,
  });
  for (const line of block) env.print(line);

  const serverInfo = await getServerInfo(root, headers);
  const record: Record<string, PyJson> = {
    tag: args.tag,
    backend: args.backend,
    dataset_name: args.datasetName,
    request_rate: new PyFloat(args.requestRate),
    max_concurrency: args.maxConcurrency,
    sharegpt_output_len: args.sharegptOutputLen,
    random_input_len: args.randomInputLen,
    random_output_len: args.randomOutputLen,
    random_range_ratio: new PyFloat(args.randomRangeRatio),
    server_info: serverInfo as PyJson,
    duration: new PyFloat(durationS),
    completed: metrics.completed,
    total_input_tokens: metrics.totalInput,
    total_input_text_tokens: metrics.totalInputText,
    total_input_vision_tokens: metrics.totalInputVision,
    total_output_tokens: metrics.totalOutput,
    total_output_tokens_retokenized: metrics.totalOutputRetokenized,
    request_throughput: new PyFloat(metrics.requestThroughput),
    input_throughput: new PyFloat(metrics.inputThroughput),
    output_throughput: new PyFloat(metrics.outputThroughput),
    total_throughput: new PyFloat(metrics.totalThroughput),
    mean_e2e_latency_ms: new PyFloat(metrics.meanE2eLatencyMs),
    median_e2e_latency_ms: new PyFloat(metrics.medianE2eLatencyMs),
    std_e2e_latency_ms: new PyFloat(metrics.stdE2eLatencyMs),
    p90_e2e_latency_ms: new PyFloat(metrics.p90E2eLatencyMs),
    p99_e2e_latency_ms: new PyFloat(metrics.p99E2eLatencyMs),
    mean_ttft_ms: new PyFloat(metrics.meanTtftMs),
    median_ttft_ms: new PyFloat(metrics.medianTtftMs),
    std_ttft_ms: new PyFloat(metrics.stdTtftMs),
    p99_ttft_ms: new PyFloat(metrics.p99TtftMs),
    mean_tpot_ms: new PyFloat(metrics.meanTpotMs),
    median_tpot_ms: new PyFloat(metrics.medianTpotMs),
    std_tpot_ms: new PyFloat(metrics.stdTpotMs),
    p99_tpot_ms: new PyFloat(metrics.p99TpotMs),
    mean_itl_ms: new PyFloat(metrics.meanItlMs),
    median_itl_ms: new PyFloat(metrics.medianItlMs),
    std_itl_ms: new PyFloat(metrics.stdItlMs),
    p95_itl_ms: new PyFloat(metrics.p95ItlMs),
    p99_itl_ms: new PyFloat(metrics.p99ItlMs),
    concurrency: new PyFloat(metrics.concurrency),
    accept_length: acceptLength === null ? null : new PyFloat(acceptLength),
    max_output_tokens_per_s: new PyFloat(metrics.maxOutputTokensPerS),
    max_concurrent_requests: metrics.maxConcurrentRequests,
  };
  if (args.outputDetails) {
    record.input_lens = outputs.map((o) => o.promptLen);
    record.output_lens = metrics.outputLens;
    record.ttfts = outputs.map((o) => new PyFloat(o.ttft));
    record.itls = outputs.map((o) => o.itl.map((x) => new PyFloat(x)));
    record.generated_texts = outputs.map((o) => o.generatedText);
    record.errors = outputs.map((o) => o.error);
  }
  const jsonl = pyJsonDumps(record);
  const outputFile = args.outputFile ?? defaultOutputFile(args, env.today);
  appendFileSync(outputFile, jsonl + '\n');
  return { metrics, durationS, outputs, rows, block, jsonl, outputFile };
}
