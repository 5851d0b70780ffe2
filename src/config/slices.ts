// Derives the per-component configuration slices from the frozen ServerArgs: each component's constructor
// receives only its slice, never ServerArgs (layout-and-style.md §3.7). Pure functions, no I/O.
import type { ServerArgs } from './server_args.js';

/** What the HTTP server (server/) needs. */
export interface HttpServerConfig {
  readonly host: string;
  readonly port: number;
  readonly apiKey: string | null;
  /** Name reported by /v1/models and used as the metrics label. */
  readonly servedModelName: string;
  readonly enableMetrics: boolean;
  readonly enableCacheReport: boolean;
  readonly logRequests: boolean;
  readonly logRequestsLevel: number;
  /** Jinja template file overriding the tokenizer's (--chat-template), or null. */
  readonly chatTemplatePath: string | null;
  readonly toolCallParser: string | null;
  readonly reasoningParser: string | null;
  readonly skipServerWarmup: boolean;
  /** --sampling-defaults: 'model' takes unset params from generation_config.json, 'openai' does not. */
  readonly samplingDefaults: string;
  /** --preferred-sampling-params (snake_case as given), merged under /generate requests' sampling_params. */
  readonly preferredSamplingParams: Readonly<Record<string, unknown>> | null;
  readonly skipTokenizerInit: boolean;
  readonly logLevel: string;
}

/** What the engine needs (structurally the engine's EngineOptions; config/ cannot import engine/). */
export interface EngineSlice {
  readonly modelPath: string;
  readonly tokenizerPath?: string;
  readonly contextLength: number | null;
  readonly kvCacheDtype: string;
  readonly memFractionStatic: number | null;
  readonly maxTotalTokens: number | null;
  readonly maxRunningRequests: number | null;
  readonly maxPrefillTokens: number;
  readonly chunkedPrefillSize: number | null;
  readonly pageSize: number;
  readonly schedulePolicy: 'fcfs' | 'lpm';
  readonly scheduleConservativeness: number;
  readonly disableRadixCache: boolean;
  readonly enableMixedChunk: boolean;
  readonly streamInterval: number;
  readonly randomSeed: number | null;
  readonly jsonModelOverrideArgs: Record<string, unknown>;
  readonly allowAutoTruncate: boolean;
  readonly skipTokenizerInit: boolean;
  readonly numThreads?: number;
  /** --tp-size / --ep-size (ranks are worker threads of the engine core). */
  readonly tpSize: number;
  readonly epSize: number;
  /** --dp-size, --enable-dp-attention (only with dp > 1), --load-balance-method. */
  readonly dpSize: number;
  readonly enableDpAttention: boolean;
  readonly loadBalanceMethod: string;
  /** Prefill CP group size (--attn-cp-size, or tp / dp with --enable-prefill-cp alone; 1 = off). */
  readonly attnCpSize: number;
  /** --pp-size, --pp-max-micro-batch-size (null: max(max_running_requests // pp_size, 1)), --pp-async-batch-depth. */
  readonly ppSize: number;
  readonly ppMaxMicroBatchSize: number | null;
  readonly ppAsyncBatchDepth: number;
  /** --dist-timeout, seconds (null = the default 30 minutes). */
  readonly distTimeout: number | null;
  readonly logLevel: string;
  /** --grammar-backend (xgrammar | none). */
  readonly grammarBackend: string;
  readonly constrainedJsonDisableAnyWhitespace: boolean;
  /** --speculative-* (algorithm null = off; NEXTN already rewritten to EAGLE). */
  readonly speculativeAlgorithm: string | null;
  readonly speculativeDraftModelPath: string | null;
  readonly speculativeNumSteps: number | null;
  readonly speculativeEagleTopk: number | null;
  readonly speculativeNumDraftTokens: number | null;
  readonly speculativeAcceptThresholdSingle: number;
  readonly speculativeAcceptThresholdAcc: number;
  /** --disaggregation-mode prefill|decode and its flags (transferBackend null: not given). */
  readonly disaggregation?: {
    readonly mode: 'prefill' | 'decode';
    readonly bootstrapPort: number;
    readonly host: string;
    readonly transferBackend: string | null;
    readonly decodeEnableRadixCache: boolean;
  };
}

/**
 * The HTTP server's slice.
 * @param a validated args
 * @param servedModelName the resolved served name (see servedModelName())
 */
export function httpServerSlice(a: Readonly<ServerArgs>, servedModelName: string): HttpServerConfig {
  return Object.freeze({
    host: a.host,
    port: a.port,
    apiKey: a.apiKey,
    servedModelName,
    enableMetrics: a.enableMetrics,
    enableCacheReport: a.enableCacheReport,
    logRequests: a.logRequests,
    logRequestsLevel: a.logRequestsLevel,
    chatTemplatePath: a.chatTemplate,
    toolCallParser: a.toolCallParser,
    reasoningParser: a.reasoningParser,
    skipServerWarmup: a.skipServerWarmup,
    samplingDefaults: a.samplingDefaults,
    preferredSamplingParams: a.preferredSamplingParams,
    skipTokenizerInit: a.skipTokenizerInit,
    logLevel: a.logLevelHttp ?? a.logLevel,
  });
}

/** --ep-size in effect: SGLang sets it to --tp-size under --moe-a2a-backend deepep (_handle_a2a_moe). */
export function epSizeOf(a: Readonly<ServerArgs>): number {
  return a.moeA2aBackend === 'deepep' ? a.tpSize : a.epSize;
}

/** The attention CP group size in effect: --attn-cp-size, or every attention rank of the (dp = 1) TP group under --enable-prefill-cp. */
export function attnCpSizeOf(a: Readonly<ServerArgs>): number {
  return a.attnCpSize > 1 ? a.attnCpSize : a.enablePrefillCp ? Math.max(1, Math.floor(a.tpSize / a.dpSize)) : 1;
}

/**
 * The engine's slice.
 * @param a validated args (schedulePolicy already checked to be fcfs or lpm)
 * @param modelPath the resolved checkpoint directory (the embedded model's when --model-path is absent)
 */
export function engineSlice(a: Readonly<ServerArgs>, modelPath: string): EngineSlice {
  return Object.freeze({
    modelPath,
    ...(a.tokenizerPath !== null ? { tokenizerPath: a.tokenizerPath } : {}),
    contextLength: a.contextLength,
    kvCacheDtype: a.kvCacheDtype,
    memFractionStatic: a.memFractionStatic,
    maxTotalTokens: a.maxTotalTokens,
    maxRunningRequests: a.maxRunningRequests,
    maxPrefillTokens: a.maxPrefillTokens,
    chunkedPrefillSize: a.chunkedPrefillSize,
    pageSize: a.pageSize,
    schedulePolicy: a.schedulePolicy === 'lpm' ? 'lpm' : 'fcfs',
    scheduleConservativeness: a.scheduleConservativeness,
    disableRadixCache: a.disableRadixCache,
    enableMixedChunk: a.enableMixedChunk,
    streamInterval: a.streamInterval,
    randomSeed: a.randomSeed,
    jsonModelOverrideArgs: a.jsonModelOverrideArgs,
    allowAutoTruncate: a.allowAutoTruncate,
    skipTokenizerInit: a.skipTokenizerInit,
    ...(a.numThreads !== null ? { numThreads: a.numThreads } : {}),
    tpSize: a.tpSize,
    epSize: epSizeOf(a),
    ppSize: a.ppSize,
    ppMaxMicroBatchSize: a.ppMaxMicroBatchSize,
    ppAsyncBatchDepth: a.ppAsyncBatchDepth,
    dpSize: a.dpSize,
    enableDpAttention: a.enableDpAttention && a.dpSize > 1,
    loadBalanceMethod: a.loadBalanceMethod,
    // --enable-prefill-cp without --attn-cp-size: every attention rank of the (dp = 1) TP group is a CP rank
    attnCpSize: attnCpSizeOf(a),
    distTimeout: a.distTimeout,
    logLevel: a.logLevel,
    grammarBackend: a.grammarBackend,
    constrainedJsonDisableAnyWhitespace: a.constrainedJsonDisableAnyWhitespace,
    speculativeAlgorithm: a.speculativeAlgorithm,
    speculativeDraftModelPath: a.speculativeDraftModelPath,
    speculativeNumSteps: a.speculativeNumSteps,
    speculativeEagleTopk: a.speculativeEagleTopk,
    speculativeNumDraftTokens: a.speculativeNumDraftTokens,
    speculativeAcceptThresholdSingle: a.speculativeAcceptThresholdSingle,
    speculativeAcceptThresholdAcc: a.speculativeAcceptThresholdAcc,
    ...(a.disaggregationMode === 'prefill' || a.disaggregationMode === 'decode'
      ? {
        disaggregation: {
          mode: a.disaggregationMode as 'prefill' | 'decode',
          bootstrapPort: a.disaggregationBootstrapPort,
          host: a.host,
          transferBackend: a.disaggregationTransferBackend === 'null' ? null : a.disaggregationTransferBackend,
          decodeEnableRadixCache: a.disaggregationDecodeEnableRadixCache,
        },
      }
      : {}),
  });
}
