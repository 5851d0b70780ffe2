// The Engine's public contract: what the HTTP edge (server/) sends in and gets back. Plain data only
// (structured-clonable), camelCase; protocol/ converts the snake_case wire fields into these once.
//
//   server ──GenerateRequest──▶ Engine (tokenizer_manager, main thread) ⇄ tokenizer worker (texts → ids)
//          ──TokenizedReq──▶ scheduler + model + detokenizer (worker thread, or in-process for tests)
//          ◀──GenerateOutput (AsyncIterable, one per emission)── Engine
import type { KernelEnv } from '../config/index.js';
import type { DpAttnGroupRefs, DpAttnNodes, RankRange, TpNodes } from '../executor/index.js';
import type { SamplingParamsInput } from '../sampling/index.js';
import type { BootstrapInfo, FinishReasonData, SchedulePolicy } from '../scheduler/index.js';
import type { ProfileReply, ProfileRequest } from './profiler.js';


/** A multi-node DP-attention layout as node 0 sees it (plain data). */
export interface DpNodesPlan extends DpAttnNodes {
  /** Where each group led by another node has its engine core: its DP rank, node, and "host:port" of that node. */
  readonly remoteCores: readonly { readonly dpRank: number; readonly nodeRank: number; readonly addr: string }[];
}

export type { ProfileReply, ProfileRequest };

export type { SamplingParamsInput, SchedulePolicy };

/**
 * Why a request finished, in SGLang's `meta_info.finish_reason` JSON form
 * (`python/sglang/srt/managers/schedule_batch.py` FINISH_MATCHED_TOKEN / FINISH_MATCHED_STR / FINISH_LENGTH / FINISH_ABORT).
 * - stop: `matched` is the stop token id (EOS or stop_token_ids) or the stop string that matched.
 * - length: `length` = max_new_tokens reached.
 * - abort: client abort, shutdown, or a scheduler-side rejection (`statusCode` 400/500/503).
 */
export type FinishReason = FinishReasonData;

/** One generation request as the server hands it to the engine. Exactly one of `text` / `textSegments` / `inputIds`. */
export interface GenerateRequest {
  /** Request id (the server makes a uuid hex when the client gave none). With n > 1 choice i runs as `${rid}-${i}` internally. */
  readonly rid: string;
  /** Prompt text (already chat-templated by the server); tokenized by the engine (BOS as tokenizer_config says). */
  readonly text?: string;
  /**
   * Prompt text in segments that must be tokenized one by one (e.g. the DeepSeek-V3.2 encoder's prompt and an
   * assistant prefix): each is encoded without special tokens and the ids concatenated. Exclusive with `text`.
   */
  readonly textSegments?: readonly string[];
  /** Prompt token ids (used as-is). */
  readonly inputIds?: readonly number[];
  /** Sampling parameters, camelCase, unset fields take SGLang's defaults (serving-spec §2.5). `n` handled by the engine. */
  readonly samplingParams?: SamplingParamsInput;
  /** true: yield an output per emission (deltas); false: yield exactly one final output per choice with everything. */
  readonly stream?: boolean;
  /** Return output (and, with logprobStartLen ≥ 0, input) token logprobs. */
  readonly returnLogprob?: boolean;
  /** First prompt position whose logprob is returned; −1 (default) = output tokens only. */
  readonly logprobStartLen?: number;
  /** Number of top alternatives per position (0 = none). */
  readonly topLogprobsNum?: number;
  /** Tokenize `text` with special tokens added (BOS) as the tokenizer config says (default true). */
  readonly addSpecialTokens?: boolean;
  /** The grammar constraint starts after the reasoning section (reasoning parser on, thinking enabled). */
  readonly requireReasoning?: boolean;
  /** PD: each choice's prefill server and room (the router's bootstrap fields; one entry per choice, n > 1 in order). */
  readonly bootstrap?: readonly BootstrapInfo[];
  /** The DP rank that serves the request (SGLang data_parallel_rank, set by a --dp-aware router); the balancer's pick otherwise. */
  readonly dataParallelRank?: number;
}

/** A logprob entry: [logprob, tokenId] (the server decodes text when the wire format wants it). */
export type TokenLogprob = readonly [logprob: number, tokenId: number];

/** Logprobs carried by one output (only the positions new in this output when streaming). */
export interface OutputLogprobs {
  /** [numNewOutputTokens] logprob of each sampled token (from the temperature-scaled distribution, SGLang default). */
  readonly outputTokenLogprobs: readonly TokenLogprob[];
  /** [numNewOutputTokens][topLogprobsNum] alternatives, descending; empty arrays when topLogprobsNum is 0. */
  readonly outputTopLogprobs: readonly (readonly TokenLogprob[])[];
  /**
   * Prompt positions from logprobStartLen on (first output only): entry j is the logprob of prompt token
   * logprobStartLen + j given the tokens before it; the very first prompt token has logprob null (SGLang).
   */
  readonly inputTokenLogprobs?: readonly (readonly [logprob: number | null, tokenId: number])[];
  readonly inputTopLogprobs?: readonly ((readonly TokenLogprob[]) | null)[];
}

/** One emission for one choice of a request. Streaming: deltas; non-streaming: one output holding everything. */
export interface GenerateOutput {
  /** The request's rid (not the internal per-choice rid). */
  readonly rid: string;
  /** Choice index in [0, n). */
  readonly index: number;
  /** Text new since this choice's previous output (never broken UTF-8; partial stop strings held back). */
  readonly text: string;
  /** Token ids new since this choice's previous output (a matched stop token is included, as SGLang's output_ids). */
  readonly outputIds: readonly number[];
  /** True on the last output of this choice. */
  readonly finished: boolean;
  /** Set when finished. */
  readonly finishReason: FinishReason | null;
  /** Prompt length in tokens. */
  readonly promptTokens: number;
  /** Tokens generated so far (cumulative). */
  readonly completionTokens: number;
  /** Prompt tokens served from the prefix cache (cumulative over retractions, as SGLang counts). */
  readonly cachedTokens: number;
  /** Times this request was retracted (SGLang meta_info retraction count). */
  readonly numRetractions: number;
  /** Speculative decoding (when on): verify steps, accepted draft tokens, tokens per verify (cumulative). */
  readonly spec?: { readonly verifyCt: number; readonly acceptedTokens: number; readonly numDraftTokens: number };
  /** Seconds from arrival to finish (finished outputs only). */
  readonly e2eLatencyS?: number;
  /** Present when returnLogprob. */
  readonly logprobs?: OutputLogprobs;
}

/** Engine start-up options: the engine's slice of the server flags (SGLang names, camelCase). */
export interface EngineOptions {
  /** Checkpoint directory (config.json, safetensors). */
  readonly modelPath: string;
  /** Tokenizer directory (default: modelPath). */
  readonly tokenizerPath?: string;
  /** Override of the model's context length (--context-length). */
  readonly contextLength?: number | null;
  /** --kv-cache-dtype: auto (f32 on CPU), bf16 / bfloat16, fp8_e4m3, fp8_e5m2 (KV rows stored in that dtype). */
  readonly kvCacheDtype?: string;
  /** --mem-fraction-static (fraction of total memory for weights + KV pool); null = auto (executor/memory_plan.ts). */
  readonly memFractionStatic?: number | null;
  /** --max-total-tokens: cap on KV pool token capacity. */
  readonly maxTotalTokens?: number | null;
  /** --max-running-requests. */
  readonly maxRunningRequests?: number | null;
  /** --max-prefill-tokens (default 16384). */
  readonly maxPrefillTokens?: number;
  /** --chunked-prefill-size; null = auto; ≤ 0 disables chunking. */
  readonly chunkedPrefillSize?: number | null;
  /** --page-size (default 1). */
  readonly pageSize?: number;
  /** --schedule-policy (default 'fcfs'). */
  readonly schedulePolicy?: SchedulePolicy;
  /** --schedule-conservativeness (default 1.0). */
  readonly scheduleConservativeness?: number;
  /** --disable-radix-cache (ChunkCache instead of the radix tree). */
  readonly disableRadixCache?: boolean;
  /** --enable-mixed-chunk (extend + running decodes in one forward). */
  readonly enableMixedChunk?: boolean;
  /** --speculative-algorithm EAGLE | NEXTN | STANDALONE (null/absent = off). */
  readonly speculativeAlgorithm?: string | null;
  /** --speculative-draft-model-path (default: the target; EAGLE drafts with its MTP layer). */
  readonly speculativeDraftModelPath?: string | null;
  /** --speculative-num-steps / -eagle-topk / -num-draft-tokens (null = SGLang's auto choice). */
  readonly speculativeNumSteps?: number | null;
  readonly speculativeEagleTopk?: number | null;
  readonly speculativeNumDraftTokens?: number | null;
  /** --speculative-accept-threshold-single / -acc (default 1.0: exact target distribution). */
  readonly speculativeAcceptThresholdSingle?: number;
  readonly speculativeAcceptThresholdAcc?: number;
  /** --stream-interval (default 1). */
  readonly streamInterval?: number;
  /** --random-seed: base seed for requests without their own seed. */
  readonly randomSeed?: number | null;
  /** --json-model-override-args, parsed. */
  readonly jsonModelOverrideArgs?: Record<string, unknown>;
  /** --allow-auto-truncate. */
  readonly allowAutoTruncate?: boolean;
  /** --skip-tokenizer-init: inputIds only, outputs ids only. */
  readonly skipTokenizerInit?: boolean;
  /** Compute threads for the model kernels (per TP rank; default: the cores, divided by tp_size under TP). */
  readonly numThreads?: number;
  /** --tp-size: tensor-parallel ranks, worker threads of the engine core (default 1). */
  readonly tpSize?: number;
  /** --ep-size: expert-parallel size inside the TP group (default 1; must divide tpSize). */
  readonly epSize?: number;
  /**
   * --pp-size: pipeline stages of tpSize ranks each (default 1): the decoder layers split over them, micro-batches
   * flowing stage to stage (executor/pp_runner.ts, scheduler/pp_loop.ts).
   */
  readonly ppSize?: number;
  /** --pp-max-micro-batch-size: requests per micro-batch (default max(max_running_requests // pp_size, 1)). */
  readonly ppMaxMicroBatchSize?: number | null;
  /** --pp-async-batch-depth: micro-batches in flight beyond pp_size (default 0). */
  readonly ppAsyncBatchDepth?: number;
  /**
   * --dp-size: data-parallel groups (default 1). Without enableDpAttention, dp independent replicas of tpSize ranks
   * each behind one DP controller (engine/dp_controller.ts); with it, dp attention-DP groups inside the tpSize ranks.
   */
  readonly dpSize?: number;
  /** --enable-dp-attention (with dpSize > 1): attn_tp = tp / dp ranks per group, MLPs over all tp ranks. */
  readonly enableDpAttention?: boolean;
  /** --load-balance-method of the DP controller: auto / round_robin, shortest_queue, minimum_tokens. */
  readonly loadBalanceMethod?: string;
  /**
   * Set by the DP controller (or a node's core host) on each attention-DP group's core: its group, the groups'
   * communicators and the ranks of its process (node).
   */
  readonly dpAttention?: { readonly dpRank: number; readonly groups: DpAttnGroupRefs; readonly localRanks?: RankRange };
  /**
   * --nnodes > 1 with --enable-dp-attention, on node 0 (cli/multinode.ts): the node layout and where the engine
   * cores of the groups led by other nodes listen (engine/remote_core.ts).
   */
  readonly dpNodes?: DpNodesPlan;
  /**
   * Prefill context parallelism (--enable-prefill-cp --cp-strategy interleave, --attn-cp-size): the attention CP group
   * size (default 1 = off; must divide tpSize; DeepSeek only). Extend batches are split token-wise over the group.
   */
  readonly attnCpSize?: number;
  /** Set by the DP controller on each plain-DP replica's core: its replica index (log prefix). */
  readonly dpRank?: number;
  /** --dist-timeout, seconds: how long a rank waits for its peers (default 1800, torch.distributed's). */
  readonly distTimeout?: number | null;
  /** --nnodes > 1 on node 0: this node's ranks and the Gloo groups spanning every node (cli/multinode.ts). */
  readonly tpNodes?: TpNodes;
  /** Kernel environment variables (config's readKernelEnv(); default: read when the model loads). */
  readonly kernelEnv?: KernelEnv;
  /** Run scheduler + model in a worker thread (default true; tests use false = in-process). */
  readonly useWorkerThread?: boolean;
  /**
   * Tokenize prompt texts in a tokenizer worker thread (engine/tokenizer_worker.ts) instead of on the calling thread
   * (default: as `useWorkerThread`; `tsglang serve` always does). The worker has a heap limit and a per-request time
   * limit, so a pathological prompt fails alone (400) instead of stalling or crashing the server.
   */
  readonly tokenizerWorker?: boolean;
  /** Per-request tokenization time limit in the tokenizer worker, ms (default TOKENIZE_TIMEOUT_MS, 60 s). */
  readonly tokenizeTimeoutMs?: number;
  /** V8 old-generation limit of the tokenizer worker, MB (default TOKENIZER_WORKER_HEAP_MB, 2048; tests go lower). */
  readonly tokenizerWorkerHeapMb?: number;
  /** 'debug' | 'info' | 'warning' | 'error'. */
  readonly logLevel?: string;
  /** Keep every scheduler step's statistics (tests assert them; off when serving). */
  readonly recordStepStats?: boolean;
  /** --grammar-backend: 'xgrammar' (default) or 'none'. */
  readonly grammarBackend?: string;
  /** --constrained-json-disable-any-whitespace: JSON grammars without free whitespace. */
  readonly constrainedJsonDisableAnyWhitespace?: boolean;
  /** PD disaggregation role (--disaggregation-mode prefill|decode and its flags); absent outside PD. */
  readonly disaggregation?: DisaggregationOptions;
}

/** The PD flags the engine core needs. */
export interface DisaggregationOptions {
  readonly mode: 'prefill' | 'decode';
  /** --disaggregation-bootstrap-port (prefill). */
  readonly bootstrapPort: number;
  /** --host: where the bootstrap server and the transfer endpoint listen (prefill). */
  readonly host: string;
  /** --disaggregation-transfer-backend, or null when not given (tcp). */
  readonly transferBackend: string | null;
  /** --disaggregation-decode-enable-radix-cache (decode keeps no prefix cache by default). */
  readonly decodeEnableRadixCache: boolean;
}

/** Static facts about the loaded engine (for /get_model_info, /get_server_info, /v1/models, context checks). */
export interface EngineInfo {
  readonly modelPath: string;
  readonly tokenizerPath: string;
  /** HF `architectures[0]`. */
  readonly architecture: string;
  readonly contextLength: number;
  readonly vocabSize: number;
  /** EOS ids (generation_config.json, else config/tokenizer). */
  readonly eosTokenIds: readonly number[];
  /** KV pool token capacity after sizing (printed at start-up). */
  readonly maxTotalNumTokens: number;
  readonly maxRunningRequests: number;
  readonly maxPrefillTokens: number;
  readonly chunkedPrefillSize: number | null;
  readonly pageSize: number;
  /** --disable-radix-cache in effect. */
  readonly disableRadixCache: boolean;
  /** max prompt length accepted (SGLang max_req_input_len). */
  readonly maxReqInputLen: number;
  /** Sampling defaults from generation_config.json (temperature, topP, topK, minP, repetitionPenalty), when present. */
  readonly defaultSamplingParams: Readonly<Record<string, number>>;
  /**
   * Bytes the KV pool may commit at most (all token slots backed), printed at start-up. The pool is committed as it
   * fills (EngineLoad.kvCacheCommittedBytes) and never shrinks: with the radix cache on, finished prefixes keep their
   * slots, so RSS grows towards this bound under varied load (SGLang commits the whole pool up front).
   */
  readonly kvCacheMaxBytes?: number;
  /** Speculative decoding in effect (resolved steps / topk / draft tokens), absent when off. */
  readonly speculative?: { readonly algorithm: string; readonly numSteps: number; readonly topk: number; readonly numDraftTokens: number };
}

/** Live load statistics (for /get_server_info, /metrics). */
export interface EngineLoad {
  readonly numRunningReqs: number;
  readonly numQueueReqs: number;
  /** KV tokens in use (running requests + locked prefix nodes). */
  readonly numUsedTokens: number;
  /** numUsedTokens / maxTotalNumTokens. */
  readonly tokenUsage: number;
  /** Tokens in the prefix cache that may be evicted. */
  readonly evictableTokens: number;
  /** Decode tokens/s over the last logging window. */
  readonly genThroughput: number;
  /** Fraction of prompt tokens served from the prefix cache (cumulative). */
  readonly cacheHitRate: number;
  /** Total retractions so far. */
  readonly numRetractedReqs: number;
  /** Bytes of KV pool storage committed so far (≤ EngineInfo.kvCacheMaxBytes; grows, never shrinks). */
  readonly kvCacheCommittedBytes?: number;
  /** Requests waiting for their grammar to compile (sglang:num_grammar_queue_reqs). */
  readonly numGrammarQueueReqs?: number;
  /** Requests with a grammar constraint so far (sglang:num_so_requests_total). */
  readonly numSoRequests?: number;
  /** Speculative decoding: average accept length since start-up (emitted tokens per request-verify), and accept rate. */
  readonly avgSpecAcceptLength?: number;
  readonly specAcceptRate?: number;
  /** Under --dp-size > 1: each DP group's (replica's) own load, by DP rank (the fields above are their sums). */
  readonly dpLoads?: readonly EngineLoad[];
  /** PD role counters: queue lengths (sglang:num_prefill_prealloc_queue_reqs etc.), transfers, pages and bytes moved. */
  readonly disaggregation?: DisaggregationLoad;
}

/** PD counters of one server (prefill or decode side). */
export interface DisaggregationLoad {
  readonly mode: 'prefill' | 'decode';
  readonly transferBackend: string;
  /** Prefill: waiting for the decode side's destination / transfers in flight. Decode: prealloc / transfer queues. */
  readonly numBootstrapQueueReqs: number;
  readonly numInflightQueueReqs: number;
  readonly numPreallocQueueReqs: number;
  readonly numTransferQueueReqs: number;
  readonly transfers: number;
  /** Of those, payloads moved by UCX put (backend ucx; the rest over TCP). */
  readonly ucxTransfers: number;
  readonly failedTransfers: number;
  /** KV payload bytes sent (prefill) or received (decode). */
  readonly kvBytes: number;
  /** KV token rows sent or received. */
  readonly kvTokens: number;
  /** Pages (tokens / page size, rounded up per request) received or sent. */
  readonly kvPages: number;
  /** Chunks sent or written (a chunked prefill sends one per finished chunk). */
  readonly kvChunks: number;
  /** attn_tp ranks of this core's group whose KV it moves. */
  readonly attnTpSize: number;
  /** KV bytes per token on the wire (every layer, all KV heads). */
  readonly kvBytesPerToken: number;
  /** Forward steps that ran a prefill (extend) on this server (0 on a decode server for PD requests). */
  readonly numPrefillSteps: number;
  /** Test hook (TSGLANG_PD_KV_DIGEST=1): per bootstrap room, SHA-256 of the prompt's KV as this side holds it. */
  readonly kvDigests?: Readonly<Record<string, string>>;
}

/**
 * What the HTTP edge calls. Created by `Engine.create(opts)` (engine/engine.ts), which loads the model, sizes the KV
 * pool, prints the token capacity and starts the worker thread (or runs in-process when `useWorkerThread: false`).
 */
export interface EngineApi {
  readonly info: EngineInfo;
  /**
   * Tokenizes (when `text`), validates (context length, sampling params) and runs one request; n > 1 runs n choices
   * (outputs carry `index`). Validation errors (InvalidRequestError, ContextLengthExceededError) reject the first
   * `next()` of the iterator, before any output, so a server can await the first item before sending headers.
   * Aborting `signal` (or `abort(rid)`) ends every choice with finishReason `{type: 'abort'}` and frees its KV cache.
   */
  generate(req: GenerateRequest, signal?: AbortSignal): AsyncIterable<GenerateOutput>;
  /**
   * Tokenizes prompts as /v1/tokenize does (no generation): a prompt whose token lower bound reaches the context
   * length is refused untokenized; the others are encoded off the calling thread when the engine has a tokenizer
   * worker.
   * @param signal aborts the tokenization (the client left)
   * @returns one id array per prompt
   * @throws (rejects with) ContextLengthExceededError, InvalidRequestError (no tokenizer; a prompt past the
   *   tokenizer worker's limits), RequestAbortedError
   */
  tokenize(prompts: readonly string[], addSpecialTokens: boolean, signal?: AbortSignal): Promise<number[][]>;
  /** Aborts a request (all its choices) wherever it is (tokenization, queue or running). Unknown rid: no-op. */
  abort(rid: string): void;
  /** Aborts every request. */
  abortAll(): void;
  /** Empties the prefix cache; false (and nothing done) while requests are running or queued, as SGLang. */
  flushCache(): Promise<boolean>;
  /** Live load statistics. */
  getLoad(): Promise<EngineLoad>;
  /** /start_profile: CPU profile + step timings of the engine core (engine/profiler.ts); absent on fakes. */
  startProfile?(req: ProfileRequest): Promise<ProfileReply>;
  /** /stop_profile: stops the profile and writes its files. */
  stopProfile?(): Promise<ProfileReply>;
  /** Aborts everything and stops the worker. */
  shutdown(): Promise<void>;
}
