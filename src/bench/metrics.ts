// Benchmark metrics and the printed result block of sglang.bench_serving, with numpy's statistics
// (pairwise sums, population std, linear-interpolated percentiles). Pure functions over measured requests.
// Source: python/sglang/bench_serving.py (`calculate_metrics`, the result printing in `benchmark`).
import { pyCenter, pyFixed, pyFloatRepr, pyRow } from './py_format.js';
import type { DatasetRow } from './datasets.js';
import type { RequestFuncOutput } from './request_funcs.js';

/**
 * numpy's pairwise summation of a float64 array (`pairwise_sum_DOUBLE`: 8 running partial sums per block of
 * ≤128 values, halving recursion above), added to the 0.0 identity as `np.add.reduce` does.
 * @param xs [n] values
 */
export function npSum(xs: readonly number[]): number {
  return 0 + pairwiseSum(xs, 0, xs.length);
}

function pairwiseSum(a: readonly number[], start: number, n: number): number {
  if (n < 8) {
    let res = 0;
    for (let i = 0; i < n; i++) res += a[start + i];
    return res;
  }
  if (n <= 128) {
    const r = [a[start], a[start + 1], a[start + 2], a[start + 3], a[start + 4], a[start + 5], a[start + 6], a[start + 7]];
    let i = 8;
    for (; i < n - (n % 8); i += 8) {
      for (let j = 0; j < 8; j++) r[j] += a[start + i + j];
    }
    let res = (r[0] + r[1] + (r[2] + r[3])) + (r[4] + r[5] + (r[6] + r[7]));
    for (; i < n; i++) res += a[start + i];
    return res;
  }
  let n2 = Math.floor(n / 2);
  n2 -= n2 % 8;
  return pairwiseSum(a, start, n2) + pairwiseSum(a, start + n2, n - n2);
}

/** `np.mean(xs)`; NaN for an empty list. */
export function npMean(xs: readonly number[]): number {
  return npSum(xs) / xs.length;
}

/** `np.std(xs)` (population, ddof = 0). */
export function npStd(xs: readonly number[]): number {
  const mean = npMean(xs);
  return Math.sqrt(npSum(xs.map((x) => (x - mean) * (x - mean))) / xs.length);
}

/** `np.median(xs)`: the middle value, or the mean of the two middle values. */
export function npMedian(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const n = s.length;
  if (n === 0) return NaN;
  if (n % 2 === 1) return s[(n - 1) / 2];
  return (s[n / 2 - 1] + s[n / 2]) / 2;
}

/**
 * `np.percentile(xs, p)` with the default 'linear' method: virtual index h = (p/100)·(n−1), numpy's `_lerp`
 * between the neighbours.
 * @param p percentile in [0, 100]
 */
export function npPercentile(xs: readonly number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  const n = s.length;
  if (n === 0) return NaN;
  const h = (p / 100) * (n - 1);
  const lo = Math.floor(h);
  const hi = Math.min(lo + 1, n - 1);
  const t = h - lo;
  const a = s[lo];
  const b = s[hi];
  const diff = b - a;
  return t >= 0.5 ? b - diff * (1 - t) : a + diff * t;
}

/** `np.max(xs)`. */
export function npMax(xs: readonly number[]): number {
  let m = -Infinity;
  for (const x of xs) if (x > m) m = x;
  return xs.length === 0 ? NaN : m;
}

/** Everything the result block and the JSONL record report (SGLang's `BenchmarkMetrics`); times in ms. */
export interface BenchmarkMetrics {
  completed: number;
  totalInput: number;
  totalInputText: number;
  totalInputVision: number;
  totalOutput: number;
  totalOutputRetokenized: number;
  requestThroughput: number;
  inputThroughput: number;
  outputThroughput: number;
  totalThroughput: number;
  meanTtftMs: number;
  medianTtftMs: number;
  stdTtftMs: number;
  p99TtftMs: number;
  meanTpotMs: number;
  medianTpotMs: number;
  stdTpotMs: number;
  p99TpotMs: number;
  meanItlMs: number;
  medianItlMs: number;
  stdItlMs: number;
  p95ItlMs: number;
  p99ItlMs: number;
  maxItlMs: number;
  meanE2eLatencyMs: number;
  medianE2eLatencyMs: number;
  stdE2eLatencyMs: number;
  p90E2eLatencyMs: number;
  p99E2eLatencyMs: number;
  /** Mean requests in flight: Σ latency / duration. */
  concurrency: number;
  /** Largest number of token arrivals in one 1-s bucket. */
  maxOutputTokensPerS: number;
  /** Largest number of requests touching one 1-s bucket. */
  maxConcurrentRequests: number;
  /** Per request: output length (0 for failures). */
  outputLens: number[];
}

/** Inputs of {@link calculateMetrics} besides the outputs. */
export interface MetricsContext {
  /** Benchmark duration (s). */
  durationS: number;
  backend: string;
  /** Server-wide average speculative accept length, or null. */
  acceptLength: number | null;
  /** Re-tokenizes generated text without special tokens; returns the token count. */
  countTokens: (text: string) => number;
}

/**
 * Computes SGLang's metrics over the requests (successful ones only; failures add 0 to output lengths).
 * TPOT_i = (latency − ttft) / (outputLen − 1) for outputLen > 1; ITL is every request's gaps concatenated
 * (re-split by chunk token counts when `acceptLength` > 0 on the sglang-oai backends); empty TTFT / TPOT / ITL
 * lists count as [0]. Peak figures bucket token and request times into whole seconds from the first start.
 * @param rows the dataset rows, index-aligned with `outputs`
 * @param outputs measured requests
 * @returns the metrics; E2E statistics are NaN when no request succeeded
 */
export function calculateMetrics(
  rows: readonly DatasetRow[],
  outputs: readonly RequestFuncOutput[],
  ctx: MetricsContext,
): BenchmarkMetrics {
  const outputLens: number[] = [];
  const retokenizedLens: number[] = [];
  let totalInput = 0;
  let totalInputText = 0;
  let totalInputVision = 0;
  let completed = 0;
  let itls: number[] = [];
  const retokenizedItls: number[] = [];
  const tpots: number[] = [];
  const ttfts: number[] = [];
  const e2e: number[] = [];
  const useRetokenizedItl =
    ctx.acceptLength !== null && ctx.acceptLength > 0 && (ctx.backend === 'sglang-oai' || ctx.backend === 'sglang-oai-chat');

  outputs.forEach((out, i) => {
    if (!out.success) {
      outputLens.push(0);
      retokenizedLens.push(0);
      return;
    }
    const outputLen = out.outputLen;
    outputLens.push(outputLen);
    retokenizedLens.push(ctx.countTokens(out.generatedText));
    totalInput += rows[i].promptLen;
    totalInputText += rows[i].textPromptLen;
    totalInputVision += rows[i].visionPromptLen;
    if (outputLen > 1) tpots.push((out.latency - out.ttft) / (outputLen - 1));
    if (useRetokenizedItl) {
      out.itl.forEach((gap, k) => {
        // NOTE: upstream divides by zero for a chunk that re-tokenizes to nothing; count it as one token.
        const numTokens = Math.max(1, ctx.countTokens(out.textChunks[k] ?? ''));
        for (let j = 0; j < numTokens; j++) retokenizedItls.push(gap / numTokens);
      });
    } else {
      for (const gap of out.itl) itls.push(gap);
    }
    ttfts.push(out.ttft);
    e2e.push(out.latency);
    completed++;
  });

  let maxOutputTokensPerS = 0;
  let maxConcurrentRequests = 0;
  const ok = outputs.filter((o) => o.success);
  if (ok.length > 0) {
    let minStart = Infinity;
    let maxEnd = -Infinity;
    for (const o of ok) {
      minStart = Math.min(minStart, o.startTime);
      maxEnd = Math.max(maxEnd, o.startTime + o.latency);
    }
    const numBuckets = Math.ceil(maxEnd - minStart) + 1;
    const tokensPerSecond = new Float64Array(numBuckets);
    const concurrentPerSecond = new Float64Array(numBuckets);
    for (const o of ok) {
      let t = o.startTime + o.ttft;
      const times = [t];
      for (const gap of o.itl) {
        t += gap;
        times.push(t);
      }
      for (const tt of times) {
        const b = Math.trunc(tt - minStart);
        if (b >= 0 && b < numBuckets) tokensPerSecond[b] += 1;
      }
      const startSec = Math.trunc(o.startTime - minStart);
      const endSec = Math.trunc(o.startTime + o.latency - minStart);
      for (let s = startSec; s < Math.min(endSec + 1, numBuckets); s++) concurrentPerSecond[s] += 1;
    }
    maxOutputTokensPerS = npMax(Array.from(tokensPerSecond));
    maxConcurrentRequests = npMax(Array.from(concurrentPerSecond));
  }
  if (useRetokenizedItl) itls = retokenizedItls;

  const orZero = (xs: number[]): number[] => (xs.length === 0 ? [0] : xs);
  const ttftL = orZero(ttfts);
  const tpotL = orZero(tpots);
  const itlL = orZero(itls);
  const totalOutput = outputLens.reduce((a, b) => a + b, 0);
  const dur = ctx.durationS;
  return {
    completed,
    totalInput,
    totalInputText,
    totalInputVision,
    totalOutput,
    totalOutputRetokenized: retokenizedLens.reduce((a, b) => a + b, 0),
    requestThroughput: completed / dur,
    inputThroughput: totalInput / dur,
    outputThroughput: totalOutput / dur,
    totalThroughput: (totalInput + totalOutput) / dur,
    meanTtftMs: npMean(ttftL) * 1000,
    medianTtftMs: npMedian(ttftL) * 1000,
    stdTtftMs: npStd(ttftL) * 1000,
    p99TtftMs: npPercentile(ttftL, 99) * 1000,
    meanTpotMs: npMean(tpotL) * 1000,
    medianTpotMs: npMedian(tpotL) * 1000,
    stdTpotMs: npStd(tpotL) * 1000,
    p99TpotMs: npPercentile(tpotL, 99) * 1000,
    meanItlMs: npMean(itlL) * 1000,
    medianItlMs: npMedian(itlL) * 1000,
    stdItlMs: npStd(itlL) * 1000,
    p95ItlMs: npPercentile(itlL, 95) * 1000,
    p99ItlMs: npPercentile(itlL, 99) * 1000,
    maxItlMs: npMax(itlL) * 1000,
    meanE2eLatencyMs: npMean(e2e) * 1000,
    medianE2eLatencyMs: npMedian(e2e) * 1000,
    stdE2eLatencyMs: npStd(e2e) * 1000,
    p90E2eLatencyMs: npPercentile(e2e, 90) * 1000,
    p99E2eLatencyMs: npPercentile(e2e, 99) * 1000,
    concurrency: npSum(e2e) / dur,
    maxOutputTokensPerS,
    maxConcurrentRequests,
    outputLens,
  };
}

/** Run facts printed in the block header. */
export interface ResultBlockContext {
  backend: string;
  /** `inf` or a rate (req/s), printed as a Python float. */
  requestRate: number;
  /** null / 0 → `not set`. */
  maxConcurrency: number | null;
  durationS: number;
  /** Prints `Total input vision tokens` (image / mmmu datasets only). */
  showVisionTokens: boolean;
  acceptLength: number | null;
}

/**
 * The result block, line for line as sglang.bench_serving prints it: a leading empty line, the `=` title,
 * `"{:<40} {:<10}"` rows (values `.2f` where floats), `-` section titles, a closing line of 50 `=`.
 * @returns the lines (no trailing newlines)
 */
export function formatResultBlock(m: BenchmarkMetrics, ctx: ResultBlockContext): string[] {
  const f = (x: number): string => pyFixed(x, 2);
  const lines: string[] = [''];
  lines.push(pyCenter(' Serving Benchmark Result ', 50, '='));
  lines.push(pyRow('Backend:', ctx.backend));
  lines.push(pyRow('Traffic request rate:', pyFloatRepr(ctx.requestRate)));
  lines.push(pyRow('Max request concurrency:', ctx.maxConcurrency ? String(ctx.maxConcurrency) : 'not set'));
  lines.push(pyRow('Successful requests:', String(m.completed)));
  lines.push(pyRow('Benchmark duration (s):', f(ctx.durationS)));
  lines.push(pyRow('Total input tokens:', String(m.totalInput)));
  lines.push(pyRow('Total input text tokens:', String(m.totalInputText)));
  if (ctx.showVisionTokens) lines.push(pyRow('Total input vision tokens:', String(m.totalInputVision)));
  lines.push(pyRow('Total generated tokens:', String(m.totalOutput)));
  lines.push(pyRow('Total generated tokens (retokenized):', String(m.totalOutputRetokenized)));
  lines.push(pyRow('Request throughput (req/s):', f(m.requestThroughput)));
  lines.push(pyRow('Input token throughput (tok/s):', f(m.inputThroughput)));
  lines.push(pyRow('Output token throughput (tok/s):', f(m.outputThroughput)));
  lines.push(pyRow('Peak output token throughput (tok/s):', f(m.maxOutputTokensPerS)));
  lines.push(pyRow('Peak concurrent requests:', String(m.maxConcurrentRequests)));
  lines.push(pyRow('Total token throughput (tok/s):', f(m.totalThroughput)));
  lines.push(pyRow('Concurrency:', f(m.concurrency)));
  if (ctx.acceptLength) lines.push(pyRow('Accept length:', f(ctx.acceptLength)));
  lines.push(pyCenter('End-to-End Latency', 50, '-'));
  lines.push(pyRow('Mean E2E Latency (ms):', f(m.meanE2eLatencyMs)));
  lines.push(pyRow('Median E2E Latency (ms):', f(m.medianE2eLatencyMs)));
  lines.push(pyRow('P90 E2E Latency (ms):', f(m.p90E2eLatencyMs)));
  lines.push(pyRow('P99 E2E Latency (ms):', f(m.p99E2eLatencyMs)));
  lines.push(pyCenter('Time to First Token', 50, '-'));
  lines.push(pyRow('Mean TTFT (ms):', f(m.meanTtftMs)));
  lines.push(pyRow('Median TTFT (ms):', f(m.medianTtftMs)));
  lines.push(pyRow('P99 TTFT (ms):', f(m.p99TtftMs)));
  lines.push(pyCenter('Time per Output Token (excl. 1st token)', 50, '-'));
  lines.push(pyRow('Mean TPOT (ms):', f(m.meanTpotMs)));
  lines.push(pyRow('Median TPOT (ms):', f(m.medianTpotMs)));
  lines.push(pyRow('P99 TPOT (ms):', f(m.p99TpotMs)));
  lines.push(pyCenter('Inter-Token Latency', 50, '-'));
  lines.push(pyRow('Mean ITL (ms):', f(m.meanItlMs)));
  lines.push(pyRow('Median ITL (ms):', f(m.medianItlMs)));
  lines.push(pyRow('P95 ITL (ms):', f(m.p95ItlMs)));
  lines.push(pyRow('P99 ITL (ms):', f(m.p99ItlMs)));
  lines.push(pyRow('Max ITL (ms):', f(m.maxItlMs)));
  lines.push('='.repeat(50));
  return lines;
}
