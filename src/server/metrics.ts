// Prometheus metrics with SGLang's names (python/sglang/srt/metrics/collector.py; serving-spec.md §8), served at
// /metrics with --enable-metrics. Tokenizer-side counters/histograms are observed on the HTTP side as outputs
// stream through; scheduler gauges are read from the engine at scrape time.
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { EngineApi, GenerateOutput } from '../engine/index.js';

const TTFT_BUCKETS = [0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400];
const ITL_BUCKETS = [0.002, 0.004, 0.006, 0.008, 0.01, 0.015, 0.02, 0.025, 0.03, 0.035, 0.04, 0.06, 0.08, 0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8];
const E2E_BUCKETS = [0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 800];

/** The server's metric registry. One per server (no global registry). */
export class ServerMetrics {
  readonly registry = new Registry();
  private readonly labels: { model_name: string };
  private readonly promptTokens: Counter<'model_name'>;
  private readonly generationTokens: Counter<'model_name'>;
  private readonly cachedTokens: Counter<'model_name'>;
  private readonly numRequests: Counter<'model_name'>;
  private readonly numAborted: Counter<'model_name'>;
  private readonly ttft: Histogram<'model_name'>;
  private readonly itl: Histogram<'model_name'>;
  private readonly e2e: Histogram<'model_name'>;

  /**
   * @param modelName the served model name (label `model_name`)
   * @param engine read for the scheduler gauges at scrape time
   */
  constructor(modelName: string, engine: EngineApi) {
    this.labels = { model_name: modelName };
    const reg = [this.registry];
    const ln = ['model_name'] as const;
    this.promptTokens = new Counter({ name: 'sglang:prompt_tokens_total', help: 'Number of prefill tokens processed.', labelNames: ln, registers: reg });
    this.generationTokens = new Counter({ name: 'sglang:generation_tokens_total', help: 'Number of generation tokens processed.', labelNames: ln, registers: reg });
    this.cachedTokens = new Counter({ name: 'sglang:cached_tokens_total', help: 'Number of cached prompt tokens.', labelNames: ln, registers: reg });
    this.numRequests = new Counter({ name: 'sglang:num_requests_total', help: 'Number of requests processed.', labelNames: ln, registers: reg });
    this.numAborted = new Counter({ name: 'sglang:num_aborted_requests_total', help: 'Number of requests aborted.', labelNames: ln, registers: reg });
    this.ttft = new Histogram({ name: 'sglang:time_to_first_token_seconds', help: 'Histogram of time to first token in seconds.', labelNames: ln, buckets: TTFT_BUCKETS, registers: reg });
    this.itl = new Histogram({ name: 'sglang:inter_token_latency_seconds', help: 'Histogram of inter-token latency in seconds.', labelNames: ln, buckets: ITL_BUCKETS, registers: reg });
    this.e2e = new Histogram({ name: 'sglang:e2e_request_latency_seconds', help: 'Histogram of End-to-end request latency in seconds.', labelNames: ln, buckets: E2E_BUCKETS, registers: reg });
    // Scheduler gauges are exported by TP rank 0 only (SGLang without --enable-metrics-for-all-schedulers), labelled tp_rank.
    const gaugeLabels = { ...this.labels, tp_rank: '0' };
    const gauge = (name: string, help: string, pick: (l: Awaited<ReturnType<EngineApi['getLoad']>>) => number) =>
      new Gauge({
        name, help, labelNames: ['model_name', 'tp_rank'] as const, registers: reg,
        async collect() { this.set(gaugeLabels, pick(await engine.getLoad())); },
      });
    gauge('sglang:num_running_reqs', 'The number of running requests.', (l) => l.numRunningReqs);
    gauge('sglang:num_used_tokens', 'The number of used tokens.', (l) => l.numUsedTokens);
    gauge('sglang:token_usage', 'The token usage.', (l) => l.tokenUsage);
    gauge('sglang:gen_throughput', 'The generation throughput (token/s).', (l) => l.genThroughput);
    gauge('sglang:num_queue_reqs', 'The number of requests in the waiting queue.', (l) => l.numQueueReqs);
    gauge('sglang:cache_hit_rate', 'The prefix cache hit rate.', (l) => l.cacheHitRate);
    gauge('sglang:num_retracted_reqs', 'The number of retracted requests.', (l) => l.numRetractedReqs);
    gauge('sglang:kv_cache_committed_bytes', 'Bytes of KV cache pool memory committed so far (tsglang: the pool is committed as it fills).', (l) => l.kvCacheCommittedBytes ?? 0);
    if (engine.info.speculative) {
      gauge('sglang:spec_accept_length', 'The average acceptance length of speculative decoding.', (l) => l.avgSpecAcceptLength ?? 0);
      gauge('sglang:spec_accept_rate', 'The average acceptance rate of speculative decoding.', (l) => l.specAcceptRate ?? 0);
    }
    gauge('sglang:num_grammar_queue_reqs', 'The number of requests in the grammar waiting queue.', (l) => l.numGrammarQueueReqs ?? 0);
    // PD queues (SGLang's names, "infight" as SGLang spells it)
    gauge('sglang:num_prefill_prealloc_queue_reqs', 'The number of requests in the prefill prealloc (bootstrap) queue.', (l) => l.disaggregation?.numBootstrapQueueReqs ?? 0);
    gauge('sglang:num_prefill_infight_queue_reqs', 'The number of requests in the prefill inflight queue.', (l) => l.disaggregation?.numInflightQueueReqs ?? 0);
    gauge('sglang:num_decode_prealloc_queue_reqs', 'The number of requests in the decode prealloc queue.', (l) => l.disaggregation?.numPreallocQueueReqs ?? 0);
    gauge('sglang:num_decode_transfer_queue_reqs', 'The number of requests in the decode transfer queue.', (l) => l.disaggregation?.numTransferQueueReqs ?? 0);
    let soSeen = 0;
    const soLabels = this.labels;
    new Counter({
      name: 'sglang:num_so_requests_total', help: 'Number of structured output requests processed.', labelNames: ln, registers: reg,
      async collect() {
        const v = (await engine.getLoad()).numSoRequests ?? 0;
        if (v > soSeen) this.inc(soLabels, v - soSeen);
        soSeen = Math.max(soSeen, v);
      },
    });
  }

  /** Counts a request as received (`sglang:num_requests_total`). */
  onRequestStart(): void {
    this.numRequests.inc(this.labels);
  }

  /**
   * Passes engine outputs through while observing TTFT (first output), ITL (later outputs; an output carrying k
   * tokens adds k observations of interval/k, as SGLang) and, at finish, E2E latency and token counters.
   * @param arrivalMs performance.now() when the HTTP request arrived: TTFT and E2E are measured from it, as SGLang
   *   measures them from the request's created_time (tokenizer_manager.py), whenever this wrapper is applied
   */
  async *observe(outputs: AsyncIterable<GenerateOutput>, arrivalMs: number): AsyncGenerator<GenerateOutput> {
    const start = arrivalMs;
    const last = new Map<number, { t: number; tokens: number }>();
    for await (const o of outputs) {
      const now = performance.now();
      const prev = last.get(o.index);
      const newTokens = o.completionTokens - (prev?.tokens ?? 0);
      if (!prev) this.ttft.observe(this.labels, (now - start) / 1000);
      else if (newTokens > 0) for (let i = 0; i < newTokens; i++) this.itl.observe(this.labels, (now - prev.t) / 1000 / newTokens);
      last.set(o.index, { t: now, tokens: o.completionTokens });
      if (o.finished) {
        this.e2e.observe(this.labels, (now - start) / 1000);
        this.generationTokens.inc(this.labels, o.completionTokens);
        if (o.index === 0) {
          this.promptTokens.inc(this.labels, o.promptTokens);
          this.cachedTokens.inc(this.labels, o.cachedTokens);
        }
        if (o.finishReason?.type === 'abort') this.numAborted.inc(this.labels);
      }
      yield o;
    }
  }

  /** Prometheus text exposition. */
  async render(): Promise<string> {
    return this.registry.metrics();
  }
}
