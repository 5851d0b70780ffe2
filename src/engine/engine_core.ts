// EngineCore: the scheduler side of the engine — model, KV pools, Scheduler and DetokenizerManager — driven by
// plain-data messages. Runs inside a worker thread when serving (worker_main.ts) and in-process in tests; only the
// transport differs. The loop runs one synchronous scheduler step per macrotask so messages interleave with steps.
import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { F32_CODEC, kvCodecName, Logger, parseKvCacheDtype, SILENT_LOGGER, TsglangError, UnsupportedFeatureError } from '../common/index.js';
import type { KvCodec } from '../common/index.js';
import { deriveContextLength, loadModelConfig, readKernelEnv } from '../config/index.js';
import { CacheManager, Scheduler, type StepStats } from '../scheduler/index.js';
import { ChunkCache, KVPool, kvBytesPerToken as kvBytesPerTokenOf, RadixCache, ReqToTokenPool, TokenToKVPoolAllocator } from '../mem_cache/index.js';
import {
  ModelRunner, defaultThreadsPerRank, installNativeSampling, isLockstepModel, launchDpAttnGroup, launchPpRanks, launchTpRanks, planMemory, readAvailableMemoryBytes,
  type ForwardModel, type LockstepModel, type PpLaunch, type TpLaunch, type TpLaunchOptions,
} from '../executor/index.js';
import { createOps } from '../kernels/index.js';
import { loadModel, type LoadedModel } from '../models/index.js';
import { loadTokenizer, type Tokenizer } from '../tokenizer/index.js';
import { GrammarClient } from '../constrained/index.js';
import { DetokenizerManager } from './detokenizer_manager.js';
import type { FromCoreMsg, ToCoreMsg } from './messages.js';
import type { EngineInfo, EngineLoad, EngineOptions } from './types.js';
import { CoreProfiler } from './profiler.js';
import { createSpecDecoder, loadDraftSource, planSpec, type DraftSource } from './spec_setup.js';
import { CoreDisagg } from './core_disagg.js';
import { resolveLoadBalanceMethod } from './dp_controller.js';

export { installNativeSampling } from '../executor/index.js';

/**
 * Sampling defaults from the checkpoint's generation_config.json (SGLang --sampling-defaults model): temperature,
 * top_p, top_k, min_p, repetition_penalty, as camelCase; {} when the file is absent or unreadable.
 */
export function readGenerationDefaults(modelPath: string): Record<string, number> {
  const out: Record<string, number> = {};
  let raw: Record<string, unknown>;
  try {
    raw = JSON.parse(readFileSync(join(modelPath, 'generation_config.json'), 'utf8')) as Record<string, unknown>;
  } catch {
    return out;
  }
  const map: [string, string][] = [['temperature', 'temperature'], ['top_p', 'topP'], ['top_k', 'topK'], ['min_p', 'minP'], ['repetition_penalty', 'repetitionPenalty']];
  for (const [k, v] of map) if (typeof raw[k] === 'number') out[v] = raw[k] as number;
  return out;
}

/**
 * Loads a model under TP/EP: ranks 1..tp-1 start as worker threads (executor/tp_runner.ts), each reading its shard;
 * rank 0's shard loads here and its model fans every step out to the ranks.
 * @throws InvalidRequestError for a layout the model does not split into; ModelLoadError naming a failed rank
 */
function loadTpModel(options: EngineOptions, logger: Logger): TpLaunch | PpLaunch {
  const tp = options.tpSize ?? 1;
  const pp = options.ppSize ?? 1;
  return (pp > 1 ? (o: TpLaunchOptions) => launchPpRanks({ ...o, ppSize: pp, asyncBatchDepth: options.ppAsyncBatchDepth ?? 0 }) : launchTpRanks)({
    modelPath: options.modelPath,
    overrides: options.jsonModelOverrideArgs ?? {},
    tpSize: tp,
    epSize: options.epSize ?? 1,
    ...(options.numThreads !== undefined ? { threadsPerRank: options.numThreads } : {}),
    ...(options.kernelEnv ? { kernelEnv: options.kernelEnv } : {}),
    ...(options.distTimeout ? { timeoutMs: options.distTimeout * 1000 } : {}),
    ...(options.tpNodes ? { nodes: options.tpNodes } : {}),
    ...(options.attnCpSize && options.attnCpSize > 1 ? { attnCpSize: options.attnCpSize } : {}),
    kvCacheDtype: parseKvCacheDtype(options.kvCacheDtype ?? 'auto') ?? 'auto',
    logger,
  });
}

/**
 * The KV heads of a GQA/MHA checkpoint (num_key_value_heads, head_dim or hidden_size / num_attention_heads), or null for
 * MLA (kv_lora_rank: one latent row replicated on every rank).
 */
function gqaKvHeads(raw: Record<string, unknown>): { numKvHeads: number; headDim: number } | null {
  if (raw['kv_lora_rank'] !== undefined || typeof raw['num_key_value_heads'] !== 'number') return null;
  const headDim = typeof raw['head_dim'] === 'number' ? raw['head_dim'] : Number(raw['hidden_size']) / Number(raw['num_attention_heads']);
  return { numKvHeads: raw['num_key_value_heads'], headDim };
}

/** Decode steps between "Decode batch." log lines (SGLang --decode-log-interval default). */
export const DECODE_LOG_INTERVAL = 40;

/** SGLang's default --max-prefill-tokens. */
export const DEFAULT_MAX_PREFILL_TOKENS = 16384;

/** A model plus the facts the core needs about it (lets tests inject a fake model). */
export interface CoreModel {
  readonly model: ForwardModel;
  readonly architecture: string;
  readonly vocabSize: number;
  readonly maxPositionEmbeddings: number;
  readonly eosTokenIds: readonly number[];
}

/** Per-step timing/throughput counters (metrics only; wall clock never drives scheduling). */
interface Throughput {
  windowStartMs: number;
  windowTokens: number;
  lastGenThroughput: number;
}

/** Scheduler + model + detokenizer behind a message interface. */
export class EngineCore {
  readonly info: EngineInfo;
  readonly scheduler: Scheduler;
  private readonly detok: DetokenizerManager;
  private readonly send: (msg: FromCoreMsg) => void;
  private readonly logger: Logger;
  private looping = false;
  private stopped = false;
  private readonly tp: Throughput = { windowStartMs: 0, windowTokens: 0, lastGenThroughput: 0 };
  /** Total wall time spent in scheduler steps, ms, and step count (overhead figures). */
  stepTimeMs = 0;
  numSteps = 0;
  /** Wall time, ms, in detokenization (incl. stop-string finishes) and in handing outputs to the transport (statistics). */
  detokTimeMs = 0;
  /** /start_profile / /stop_profile of this core thread. */
  private readonly profiler = new CoreProfiler();
  emitTimeMs = 0;
  private numDecodeSteps = 0;
  private lastRatio = 0;
  private lastGenerated = 0;

  /**
   * Loads the model (unless given) and the tokenizer (unless given: in-process engines share the caller's), sizes the KV pool from memory (executor/memory_plan.ts), prints the capacity.
   * @throws ModelLoadError / InvalidRequestError / OutOfKVCacheError / UnsupportedFeatureError on a bad set-up
   */
  static create(
    options: EngineOptions,
    send: (msg: FromCoreMsg) => void,
    logger: Logger = SILENT_LOGGER,
    injected?: CoreModel,
    loadedTokenizer?: Tokenizer | null,
  ): EngineCore {
    const kvCacheDtype = parseKvCacheDtype(options.kvCacheDtype ?? 'auto');
    if (kvCacheDtype === null) {
      throw new UnsupportedFeatureError(`--kv-cache-dtype ${options.kvCacheDtype} is not built on CPU (auto, bf16, fp8_e4m3 and fp8_e5m2 are)`);
    }
    const tokenizerPath = options.tokenizerPath ?? options.modelPath;
    const tokenizer = options.skipTokenizerInit ? null : loadedTokenizer ?? loadTokenizer(tokenizerPath);
    const memBefore = readAvailableMemoryBytes();
    // --context-length vs the model's: refused before the weights load (SGLang checks it in ModelConfig).
    const warnContext = (m: string) => logger.warning(m);
    const checkedContext = injected
      ? null
      : deriveContextLength(loadModelConfig(options.modelPath, options.jsonModelOverrideArgs ?? {}).maxPositionEmbeddings, options.contextLength, warnContext);
    let cm: CoreModel;
    /** The model the speculative draft comes from (EAGLE: one holding the MTP layer; STANDALONE: the draft LM). */
    let draftSource: DraftSource | null = null;
    /** KV-cache storage from the model's backend (huge pages on the native one); plain arrays for an injected model. */
    let kvAlloc: ((n: number) => Float32Array) | undefined;
    /** GQA/MHA KV heads (PD moves them between TP layouts); null for MLA or an injected model. */
    let kvHeads: { numKvHeads: number; headDim: number } | null = null;
    const tpSize = options.tpSize ?? 1;
    const ppSize = options.ppSize ?? 1;
    if (ppSize > 1 && options.speculativeAlgorithm) throw new UnsupportedFeatureError('PP + speculative decoding is only supported in disaggregated prefill mode');
    /** Decoder layers of the whole model (every stage's KV pool holds its share of them). */
    let numLayers = 0;
    if (injected) cm = injected;
    else {
      let loaded: { model: ForwardModel; config: LoadedModel['config'] };
      if (options.dpAttention) {
        // one attention-DP group of the TP group: this thread is its attn_tp rank 0 (executor/dp_attention_runner.ts)
        const dpSize = options.dpSize ?? 1;
        const launch = launchDpAttnGroup({
          rank: options.dpAttention.dpRank * (tpSize / dpSize), tpSize, epSize: options.epSize ?? 1, dpSize,
          modelPath: options.modelPath, overrides: options.jsonModelOverrideArgs ?? {},
          threads: options.numThreads ?? defaultThreadsPerRank(tpSize), groups: options.dpAttention.groups,
          ...(options.dpAttention.localRanks ? { localRanks: options.dpAttention.localRanks } : {}),
          ...(options.kernelEnv ? { kernelEnv: options.kernelEnv } : {}), kvCacheDtype: kvCacheDtype ?? 'auto',
        }, logger);
        loaded = { model: launch.model, config: launch.rank0.config };
        kvAlloc = launch.allocKv;
      } else if (tpSize > 1 || ppSize > 1) {
        const launch = loadTpModel(options, logger);
        loaded = { model: launch.model, config: launch.rank0.config };
        kvAlloc = launch.allocKv;
      } else {
        const ops = createOps({ ...(options.numThreads !== undefined ? { threads: options.numThreads } : {}), ...(options.kernelEnv ? { env: options.kernelEnv } : {}) });
        kvAlloc = (n) => ops.allocateKvBuffer(n);
        loaded = loadModel(options.modelPath, { ops, overrides: options.jsonModelOverrideArgs ?? {}, logger });
      }
      numLayers = loaded.config.numHiddenLayers;
      draftSource = loadDraftSource(options, { model: loaded.model, vocabSize: loaded.config.vocabSize }, tpSize, logger);
      kvHeads = gqaKvHeads(loaded.config.raw);
      const gen = tokenizer?.eosTokenIds ?? [];
      const cfgEos = loaded.config.raw['eos_token_id'];
      const eos = gen.length > 0 ? gen : Array.isArray(cfgEos) ? (cfgEos as number[]) : typeof cfgEos === 'number' ? [cfgEos] : [];
      cm = {
        model: loaded.model,
        architecture: loaded.config.architectures[0] ?? 'unknown',
        vocabSize: loaded.config.vocabSize,
        maxPositionEmbeddings: loaded.config.maxPositionEmbeddings,
        eosTokenIds: eos,
      };
    }
    installNativeSampling(options.kernelEnv ?? readKernelEnv(), options.numThreads ?? availableParallelism());
    const memAfter = readAvailableMemoryBytes();
    const pageSize = options.pageSize ?? 1;
    const contextLength = checkedContext ?? deriveContextLength(cm.maxPositionEmbeddings, options.contextLength, warnContext);
    const maxPrefillTokens = options.maxPrefillTokens ?? DEFAULT_MAX_PREFILL_TOKENS;
    const layout = cm.model.kvPoolLayout(kvCacheDtype);
    // Speculative decoding (serving-spec §4.1): SGLang's resolved (steps, topk, draft tokens); max_running_requests
    // defaults to 48 and mixed chunk is off.
    const specPlan = planSpec(options, draftSource, cm.architecture, pageSize, kvCacheDtype);
    const spec = specPlan?.cfg ?? null;
    // Every TP rank holds a KV pool of this layout (its heads; MLA's latent replicated) in this process's memory,
    // each row in the KV dtype's codec; the draft's pool (same token slots) is budgeted with it. Plain DP: dp replicas
    // of tp ranks plan from the same memory; attention-DP groups share the tp ranks.
    // Under PP each stage's pool holds its layers: the budget is a layer's bytes times every layer of the model.
    const layoutBytes = ppSize > 1 ? kvBytesPerTokenOf({ numLayers: 1, buffers: layout.buffers }) * numLayers : kvBytesPerTokenOf(layout);
    const kvBytesPerToken = layoutBytes * tpSize * (options.dpRank !== undefined ? options.dpSize ?? 1 : 1) + (specPlan?.draftBytesPerToken ?? 0);
    const maxRunningOpt = options.maxRunningRequests ?? (spec ? 48 : null);
    const plan = planMemory({
      totalMemBytes: memBefore,
      availableAfterLoadBytes: Math.min(memAfter, memBefore),
      memFractionStatic: options.memFractionStatic ?? null,
      chunkedPrefillSize: options.chunkedPrefillSize ?? null,
      maxPrefillTokens,
      kvBytesPerToken: Math.max(1, kvBytesPerToken),
      maxTotalTokens: options.maxTotalTokens ?? null,
      pageSize,
      contextLength,
      maxRunningRequests: maxRunningOpt,
      ...(ppSize > 1 ? { ppSize } : {}),
    });
    if (plan.notice !== null) logger.warning(plan.notice);
    const capacity = plan.maxTotalNumTokens;
    const kvPool = new KVPool(layout, capacity + pageSize, Math.min(capacity + pageSize, 64 * pageSize), kvAlloc ? (n) => kvAlloc(n) : undefined);
    const allocator = new TokenToKVPoolAllocator(capacity, pageSize, kvPool);
    // PD decode keeps no prefix cache unless --disaggregation-decode-enable-radix-cache (SGLang)
    const noRadix = (options.disableRadixCache ?? false) || (options.disaggregation?.mode === 'decode' && !options.disaggregation.decodeEnableRadixCache);
    const cache = noRadix ? new ChunkCache(allocator) : new RadixCache(allocator);
    const rowLen = Math.min(contextLength, capacity) + pageSize;
    const reqToTokenPool = new ReqToTokenPool(plan.reqToTokenPoolSize + 1, rowLen);
    const runner = new ModelRunner(cm.model, kvPool, cm.vocabSize);
    const specDecoder = specPlan ? createSpecDecoder(specPlan, draftSource!, cm.vocabSize, kvPool.maxLocs, plan.maxRunningRequests, kvCacheDtype, kvAlloc, logger) : null;
    // SGLang: no grammar backend with --grammar-backend none or --skip-tokenizer-init.
    const wake: { core: EngineCore | null } = { core: null };
    const grammar =
      (options.grammarBackend ?? 'xgrammar') === 'xgrammar' && tokenizer
        ? new GrammarClient({
          tokenizerPath,
          vocabSize: cm.vocabSize,
          eosTokenIds: cm.eosTokenIds,
          thinkEndId: tokenizer.tokenToId('</think>') ?? null,
          onWake: () => wake.core?.kick(),
          anyWhitespace: !(options.constrainedJsonDisableAnyWhitespace ?? false),
          logger,
        })
        : null;
    const scheduler = new Scheduler(
      {
        pageSize,
        maxRunningRequests: plan.maxRunningRequests,
        maxPrefillTokens,
        chunkedPrefillSize: plan.chunkedPrefillSize,
        schedulePolicy: options.schedulePolicy ?? 'fcfs',
        scheduleConservativeness: options.scheduleConservativeness ?? 1,
        enableMixedChunk: spec ? false : options.enableMixedChunk ?? false,
        contextLength,
        maxTotalNumTokens: capacity,
        eosTokenIds: cm.eosTokenIds,
        recordStats: options.recordStepStats ?? false,
        // SGLang: pp_max_micro_batch_size defaults to max(max_running_requests // pp_size, 1)
        ...(ppSize > 1 ? { ppMaxMicroBatchSize: options.ppMaxMicroBatchSize ?? Math.max(Math.floor(plan.maxRunningRequests / ppSize), 1) } : {}),
      },
      runner,
      new CacheManager(reqToTokenPool, allocator, cache),
      grammar,
      specDecoder,
    );
    const gib = (b: number): string => (b / 1024 ** 3).toFixed(2);
    // SGLang's start-up lines (memory_pool.py / scheduler.py), with CPU RAM in place of GPU memory.
    const sizeOf = (names: string[]): number =>
      capacity * kvBytesPerTokenOf({ numLayers: layout.numLayers, buffers: layout.buffers.filter((b) => names.includes(b.name)) });
    const hasKV = layout.buffers.some((b) => b.name === 'k') && layout.buffers.some((b) => b.name === 'v');
    const codecs = [...new Set(layout.buffers.map((b) => `${b.name} ${kvCodecName(Array.isArray(b.codec) ? (b.codec as KvCodec[])[0] : (b.codec as KvCodec | undefined) ?? F32_CODEC)}`))].join(', ');
    logger.info(
      `KV Cache is allocated. #tokens: ${capacity}, ` +
        (hasKV ? `K size: ${gib(sizeOf(['k']))} GB, V size: ${gib(sizeOf(['v']))} GB` : `KV size: ${gib(capacity * kvBytesPerToken)} GB`) +
        ` (the cap; kv_cache_dtype=${options.kvCacheDtype ?? 'auto'}: ${codecs}, ${kvBytesPerToken} bytes/token). ` +
        `Committed now: ${kvPool.committedLocs} tokens = ${gib(kvPool.committedLocs * kvBytesPerToken)} GB; committed as it fills, up to ${gib(kvPool.maxLocs * kvPool.bytesPerToken)} GB ` +
        `(/get_server_info kv_cache_max_bytes, /metrics sglang:kv_cache_committed_bytes)`,
    );
    logger.info(
      `max_total_num_tokens=${capacity}, chunked_prefill_size=${plan.chunkedPrefillSize ?? -1}, max_prefill_tokens=${maxPrefillTokens}, ` +
        `max_running_requests=${plan.maxRunningRequests}, context_len=${contextLength}, available_cpu_mem=${gib(memAfter)} GB ` +
        `(mem_fraction_static=${plan.memFractionStatic}, page_size=${pageSize})`,
    );
    const info: EngineInfo = {
      modelPath: options.modelPath,
      tokenizerPath,
      architecture: cm.architecture,
      contextLength,
      vocabSize: cm.vocabSize,
      eosTokenIds: cm.eosTokenIds,
      maxTotalNumTokens: capacity,
      maxRunningRequests: plan.maxRunningRequests,
      maxPrefillTokens,
      chunkedPrefillSize: plan.chunkedPrefillSize,
      pageSize,
      maxReqInputLen: scheduler.maxReqInputLen,
      disableRadixCache: noRadix,
      defaultSamplingParams: readGenerationDefaults(options.modelPath),
      kvCacheMaxBytes: kvPool.maxLocs * kvPool.bytesPerToken,
      ...(spec ? { speculative: { algorithm: spec.algorithm, numSteps: spec.numSteps, topk: spec.topk, numDraftTokens: spec.numDraftTokens } } : {}),
    };
    const core = new EngineCore(info, scheduler, tokenizer, options.streamInterval ?? 1, send, logger, grammar);
    wake.core = core;
    if (options.disaggregation) {
      const dpSize = options.dpSize ?? 1;
      const dp = options.dpAttention ? { size: dpSize, rank: options.dpAttention.dpRank, attention: true }
        : options.dpRank !== undefined ? { size: dpSize, rank: options.dpRank, attention: false } : { size: 1, rank: 0, attention: false };
      const placement = { dp, loadBalanceMethod: resolveLoadBalanceMethod(options.loadBalanceMethod ?? 'auto', options.disaggregation.mode), kvHeads };
      core.disagg = new CoreDisagg(options.disaggregation, scheduler, options.kvCacheDtype ?? 'auto', placement, () => core.wakeFromRole(), logger);
    }
    return core;
  }

  /** The grammar backend (null: --grammar-backend none, or no tokenizer). */
  readonly grammar: GrammarClient | null;
  /** The PD role (--disaggregation-mode), or null. */
  disagg: CoreDisagg | null = null;

  /** Starts the PD role's servers, if any (before the core reports ready). @throws Error when a port is taken */
  async startDisaggregation(): Promise<void> {
    await this.disagg?.start();
  }

  constructor(info: EngineInfo, scheduler: Scheduler, tokenizer: Tokenizer | null, streamInterval: number, send: (msg: FromCoreMsg) => void, logger: Logger, grammar: GrammarClient | null = null) {
    this.info = info;
    this.grammar = grammar;
    this.scheduler = scheduler;
    this.detok = new DetokenizerManager(tokenizer, streamInterval);
    this.send = send;
    this.logger = logger;
  }

  /** The model's lockstep with the other attention-DP groups (null outside DP-attention). */
  private get lockstep(): LockstepModel | null {
    const m = this.scheduler.runner.model;
    return isLockstepModel(m) ? m : null;
  }

  /** Handles one message from the Engine (a DP controller's carry a `seq`, recorded for the lockstep). */
  handle(msg: ToCoreMsg): void {
    if (this.stopped) return;
    const seq = (msg as { seq?: unknown }).seq;
    if (typeof seq === 'number') this.lockstep?.noteSeq(seq);
    switch (msg.type) {
      case 'kick':
        this.lockstepWakeSent = false;
        this.kick();
        return;
      case 'generate': {
        try {
          this.detok.add(msg.req.rid, msg.detok, msg.req.stream);
          // (PD prefill may hold the request in its bootstrap queue until the decode side's destination arrives)
          const t = this.disagg ? this.disagg.admit(msg.req) : msg.req;
          if (t) this.scheduler.addRequest(t);
        } catch (e) {
          this.detok.remove(msg.req.rid);
          this.disagg?.refused(msg.req.rid);
          const err = e instanceof TsglangError ? e : null;
          this.send({ type: 'req_error', rid: msg.req.rid, message: (e as Error).message, kind: err?.kind ?? 'internal', param: (err as { param?: string | null } | null)?.param ?? null });
          return;
        }
        this.kick();
        return;
      }
      case 'abort':
        if (!this.disagg?.abort(msg.rid)) this.scheduler.abort(msg.rid);
        this.kick();
        return;
      case 'abort_all':
        this.disagg?.abortAll();
        this.scheduler.abortAll();
        this.kick();
        return;
      case 'flush':
        this.send({ type: 'reply', id: msg.id, value: this.scheduler.flushCache() });
        return;
      case 'load':
        this.send({ type: 'reply', id: msg.id, value: this.load() });
        return;
      case 'start_profile':
        void this.profiler.start(msg.req).then((value) => this.send({ type: 'reply', id: msg.id, value }));
        return;
      case 'stop_profile':
        void this.profiler.stop().then((value) => this.send({ type: 'reply', id: msg.id, value }));
        return;
      case 'shutdown':
        this.disagg?.abortAll();
        void this.disagg?.close();
        this.scheduler.abortAll();
        this.runOneStep();
        // PP: the micro-batches in flight come back (their aborts apply then) before the ranks are told to stop
        for (let i = 0; this.scheduler.inFlight > 0 && i < 64; i++) this.runOneStep();
        this.stopped = true;
        this.scheduler.runner.model.close?.(); // TP: every rank leaves its loop
        void this.grammar?.shutdown();
        return;
    }
  }

  /**
   * SGLang's scheduler log lines (scheduler_metrics_mixin.py): every prefill batch, every 40th decode batch
   * (decode_log_interval) and every retraction.
   */
  private logStep(st: StepStats, nowMs: number): void {
    const cap = this.info.maxTotalNumTokens;
    const used = cap - st.availableTokens - st.evictableTokens;
    const usage = (used / cap).toFixed(2);
    if (st.numRetracted > 0) {
      this.logger.info(
        `KV cache pool is full. Retract requests. #retracted_reqs: ${st.numRetracted}, #new_token_ratio: ${this.lastRatio.toFixed(4)} -> ${st.newTokenRatio.toFixed(4)}`,
      );
    }
    this.lastRatio = st.newTokenRatio;
    if (st.numExtendReqs > 0) {
      this.logger.info(
        `Prefill batch. #new-seq: ${st.numExtendReqs}, #new-token: ${st.numExtendTokens}, #cached-token: ${st.numCachedTokens}, ` +
          `token usage: ${usage}, #running-req: ${st.numRunningBefore}, #queue-req: ${st.numWaiting},`,
      );
    }
    if (st.numDecodeReqs > 0 && ++this.numDecodeSteps % DECODE_LOG_INTERVAL === 0) {
      const elapsed = Math.max(1e-3, nowMs - this.tp.windowStartMs);
      this.tp.lastGenThroughput = (this.tp.windowTokens * 1000) / elapsed;
      this.tp.windowStartMs = nowMs;
      this.tp.windowTokens = 0;
      const spec = this.scheduler.spec;
      let specPart = '';
      if (spec) {
        const w = spec.takeWindow();
        const len = w.verifies > 0 ? w.emitted / w.verifies : 0;
        const rate = w.verifies > 0 ? w.acceptedDrafts / (w.verifies * (spec.cfg.numDraftTokens - 1)) : 0;
        specPart = `accept len: ${len.toFixed(2)}, accept rate: ${rate.toFixed(2)}, `;
      }
      this.logger.info(
        `Decode batch. #running-req: ${st.numDecodeReqs}, #token: ${used}, token usage: ${usage}, ${specPart}cuda graph: False, ` +
          `gen throughput (token/s): ${this.tp.lastGenThroughput.toFixed(2)}, #queue-req: ${st.numWaiting},`,
      );
    }
  }

  /** Live statistics. */
  load(): EngineLoad {
    const l = this.scheduler.load();
    const s = this.scheduler;
    return {
      numRunningReqs: l.numRunning,
      numQueueReqs: l.numWaiting,
      numUsedTokens: l.usedTokens,
      tokenUsage: l.usedTokens / this.info.maxTotalNumTokens,
      evictableTokens: l.evictable,
      genThroughput: this.tp.lastGenThroughput,
      cacheHitRate: s.totalPromptTokens > 0 ? s.totalCachedTokens / s.totalPromptTokens : 0,
      numRetractedReqs: s.totalRetracted,
      kvCacheCommittedBytes: s.runner.kvPool.committedLocs * s.runner.kvPool.bytesPerToken,
      numGrammarQueueReqs: s.grammarQueue.length,
      numSoRequests: this.grammar?.numSoRequests ?? 0,
      ...(s.spec ? {
        avgSpecAcceptLength: s.spec.avgAcceptLength,
        specAcceptRate: s.spec.total.verifies > 0 ? s.spec.total.acceptedDrafts / (s.spec.total.verifies * (s.spec.cfg.numDraftTokens - 1)) : 0,
      } : {}),
      ...(this.disagg ? { disaggregation: this.disagg.load() } : {}),
    };
  }

  private lockstepWakeSent = false;

  /**
   * The PD role has news (a transfer event, a timer). Under attention-DP every group must step together: the DP
   * controller is asked to kick them all (once until the next kick arrives); otherwise the loop runs.
   */
  wakeFromRole(): void {
    if (!this.lockstep) return this.kick();
    if (this.lockstepWakeSent || this.stopped) return;
    this.lockstepWakeSent = true;
    this.send({ type: 'lockstep_wake' });
  }

  /** Runs the loop if it is idle (new message, or the grammar backend has news). */
  kick(): void {
    if (this.looping || this.stopped) return;
    this.looping = true;
    setImmediate(() => this.loop());
  }

  private loop(): void {
    if (this.stopped) {
      this.looping = false;
      return;
    }
    const progressed = this.runOneStep();
    // (PD: transfer events and the role's timers kick the loop too)
    let again = progressed && (this.scheduler.hasWork || (this.disagg?.hasWork ?? false));
    const ls = this.lockstep;
    if (ls) {
      // attention-DP: every group steps while any group has work (idle batches where this one has none)
      try {
        again = ls.afterIteration(this.scheduler.hasWork);
      } catch (e) {
        const m = (e as Error).message;
        again = false;
        // another group shutting down breaks the TP group: expected when the server stops
        if (/attention-DP shutdown/.test(m)) this.logger.debug(`attention-DP group left: ${m}`);
        else if (!this.stopped) this.stopOnFatal(`attention-DP step failed: ${m}`);
      }
    }
    // Nothing runnable (e.g. every waiting request blocked): stop spinning; the next message kicks the loop again.
    if (again && !this.stopped) setImmediate(() => this.loop());
    else this.looping = false;
  }

  /**
   * One scheduler step + detokenization + emission. Public for tests that drive the core step by step.
   * @returns true if a forward ran or outputs were emitted
   */
  runOneStep(): boolean {
    const t0 = performance.now();
    // A step that throws is recovered inside Scheduler.step: the requests it can be pinned on finish with an error
    // their clients receive, the others carry on (or are re-run alone when it cannot be pinned).
    this.disagg?.beforeStep();
    const result = this.scheduler.step();
    const tokenOutputs = this.disagg ? this.disagg.afterStep(result.outputs, (result.stats?.numExtendReqs ?? 0) > 0) : result.outputs;
    const f = result.failure;
    if (f) {
      this.logger.error(
        `scheduler step failed: ${f.error.stack ?? String(f.error)}\n` +
          `failed requests: [${f.failedRids.join(', ')}], re-run alone: [${f.retriedRids.join(', ')}]`,
      );
    }
    const broken = f ? this.scheduler.runner.model.brokenReason?.() ?? null : null;
    const tDetok = performance.now();
    const { outputs, stopMatches } = this.detok.process(tokenOutputs);
    for (const m of stopMatches) this.scheduler.finishReq(m.rid, { type: 'stop', matched: m.matched });
    const t1 = performance.now();
    this.detokTimeMs += t1 - tDetok;
    const st = result.stats;
    if (st) {
      this.stepTimeMs += t1 - t0;
      this.numSteps++;
      // tokens generated this step (a speculative verify emits several per request)
      const gen = this.scheduler.totalGeneratedTokens;
      this.tp.windowTokens += st.numExtendReqs === 0 ? gen - this.lastGenerated : st.numDecodeReqs;
      this.lastGenerated = gen;
      this.logStep(st, t1);
      this.profiler.onStep(st, t0, tDetok - t0, t1 - tDetok);
    }
    if (outputs.length > 0) {
      this.send({ type: 'outputs', outputs });
      this.emitTimeMs += performance.now() - t1;
    }
    if (broken !== null && !this.stopped) this.stopOnFatal(broken);
    return result.stats !== null || tokenOutputs.length > 0 || f !== undefined || result.launched === true;
  }

  /**
   * The model can never run again (TP: a failed step broke the rank groups): every request still queued or running
   * ends with an abort, status 500, naming the cause; the core stops and tells the Engine, which shuts the server
   * down (as SGLang's scheduler process exits and takes the server with it).
   */
  private stopOnFatal(why: string): void {
    this.stopped = true;
    this.logger.error(`the model can no longer run (${why}); failing every request and stopping`);
    const message = `The engine failed to run this request: ${why}`;
    // PD: requests waiting for their KV (allocated, not committed) are failed too and their KV freed
    this.disagg?.abortAll({ message, statusCode: 500 });
    this.scheduler.abortAll({ type: 'abort', message, statusCode: 500 });
    const stepOutputs = this.scheduler.step().outputs;
    const { outputs } = this.detok.process(this.disagg ? this.disagg.afterStep(stepOutputs, false) : stepOutputs);
    if (outputs.length > 0) this.send({ type: 'outputs', outputs });
    this.scheduler.runner.model.close?.();
    void this.grammar?.shutdown();
    this.send({ type: 'fatal', message: why });
  }
}
