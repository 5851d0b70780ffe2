// Owns `tsglang serve`'s flags: one table (SGLang names, aliases, defaults written once), an argparse-like
// parser (unique-prefix abbreviations, `--x=v` and `--x v`, store-true switches) and the validation that
// stops start-up for flags whose feature tsglang does not build. Environment variables are read only here.
// Source of names/defaults: python/sglang/srt/server_args.py (v0.5.10), restated in serving-spec.md §1.
import { randomInt } from 'node:crypto';
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { InvalidRequestError, UnsupportedFeatureError } from '../common/index.js';

/** Every `tsglang serve` setting, camelCase of SGLang's snake_case field names. Frozen after parsing. */
export interface ServerArgs {
  modelPath: string | null;
  tokenizerPath: string | null;
  host: string;
  port: number;
  apiKey: string | null;
  servedModelName: string | null;
  chatTemplate: string | null;
  toolCallParser: string | null;
  reasoningParser: string | null;
  grammarBackend: string;
  constrainedJsonDisableAnyWhitespace: boolean;
  trustRemoteCode: boolean;
  revision: string | null;
  dtype: string;
  device: string;
  quantization: string | null;
  kvCacheDtype: string;
  contextLength: number | null;
  jsonModelOverrideArgs: Record<string, unknown>;
  memFractionStatic: number | null;
  maxTotalTokens: number | null;
  maxRunningRequests: number | null;
  maxQueuedRequests: number | null;
  maxPrefillTokens: number;
  chunkedPrefillSize: number | null;
  pageSize: number;
  schedulePolicy: string;
  scheduleConservativeness: number;
  disableRadixCache: boolean;
  enableMixedChunk: boolean;
  disableOverlapSchedule: boolean;
  streamInterval: number;
  randomSeed: number | null;
  allowAutoTruncate: boolean;
  skipTokenizerInit: boolean;
  skipServerWarmup: boolean;
  samplingDefaults: string;
  preferredSamplingParams: Record<string, unknown> | null;
  watchdogTimeout: number;
  enableCacheReport: boolean;
  enableMetrics: boolean;
  logLevel: string;
  logLevelHttp: string | null;
  logRequests: boolean;
  logRequestsLevel: number;
  numThreads: number | null;
  tpSize: number;
  dpSize: number;
  epSize: number;
  ppSize: number;
  ppMaxMicroBatchSize: number | null;
  ppAsyncBatchDepth: number;
  enableDpAttention: boolean;
  loadBalanceMethod: string;
  nnodes: number;
  nodeRank: number;
  distInitAddr: string | null;
  distTimeout: number | null;
  enablePrefillCp: boolean;
  cpStrategy: string | null;
  attnCpSize: number;
  moeA2aBackend: string;
  deepepMode: string;
  moeRunnerBackend: string;
  attentionBackend: string | null;
  dsaPrefillBackend: string | null;
  dsaDecodeBackend: string | null;
  dsaTopkBackend: string;
  cudaGraphMaxBs: number | null;
  cudaGraphMaxBsDecode: number | null;
  disableCudaGraph: boolean;
  enableTorchCompile: boolean;
  enableDeterministicInference: boolean;
  speculativeAlgorithm: string | null;
  speculativeNumSteps: number | null;
  speculativeEagleTopk: number | null;
  speculativeNumDraftTokens: number | null;
  speculativeDraftModelPath: string | null;
  speculativeAcceptThresholdSingle: number;
  speculativeAcceptThresholdAcc: number;
  disaggregationMode: string;
  disaggregationBootstrapPort: number;
  disaggregationTransferBackend: string;
  disaggregationDecodeEnableRadixCache: boolean;
}

/** Value type of a flag: store-true switch, or a typed value. */
export type FlagType = 'bool' | 'str' | 'int' | 'float' | 'json';

/** One row of the flag table. */
export interface FlagSpec {
  /** Canonical long name without dashes, e.g. 'tp-size'. */
  readonly name: string;
  /** Other accepted spellings (explicit SGLang aliases), without dashes. */
  readonly aliases?: readonly string[];
  readonly key: keyof ServerArgs;
  readonly type: FlagType;
  /** The default: written here once. */
  readonly default: ServerArgs[keyof ServerArgs];
  readonly choices?: readonly string[];
  readonly help: string;
  readonly metavar?: string;
}

const KERNEL_CHOICE = 'GPU kernel choice; tsglang runs its own CPU kernels';

// SGLang's choice lists of the GPU-only knobs (python/sglang/srt/server_args.py ATTENTION_BACKEND_CHOICES,
// MOE_RUNNER_BACKEND_CHOICES, MOE_A2A_BACKEND_CHOICES, DSA_CHOICES / NSA_CHOICES, DSA_TOPK_BACKEND_CHOICES, deepep_mode):
// validated as SGLang validates them, then summarised in one start-up warning (gpuKnobsNotice).
const ATTENTION_BACKEND_CHOICES = [
  'triton', 'torch_native', 'flex_attention', 'dsa', 'nsa', 'dsv4', 'compressed', 'cutlass_mla', 'fa3', 'fa4', 'flashinfer', 'flashmla',
  'trtllm_mla', 'cutedsl_mla', 'tokenspeed_mla', 'trtllm_mha', 'dual_chunk_flash_attn', 'aiter', 'wave', 'intel_amx', 'ascend', 'intel_xpu',
];
const MOE_RUNNER_BACKEND_CHOICES = [
  'auto', 'deep_gemm', 'triton', 'triton_kernel', 'flashinfer_trtllm', 'flashinfer_trtllm_routed', 'flashinfer_cutlass', 'flashinfer_mxfp4',
  'flashinfer_cutedsl', 'cutlass', 'aiter', 'marlin',
];
const DSA_KERNEL_CHOICES = ['flashmla_sparse', 'flashmla_sparse_q8', 'flashmla_kv', 'flashmla_auto', 'fa3', 'tilelang', 'aiter', 'trtllm'];
const DSA_TOPK_BACKEND_CHOICES = ['sgl-kernel', 'torch', 'flashinfer'];

/** The flag table of `tsglang serve` (SGLang names and defaults). */
export const SERVER_FLAGS: readonly FlagSpec[] = [
  // model and tokenizer
  { name: 'model-path', aliases: ['model'], key: 'modelPath', type: 'str', default: null, metavar: 'DIR', help: 'local checkpoint directory (config.json, safetensors, tokenizer.json); default: the embedded tiny MiniMax-M2 model' },
  { name: 'tokenizer-path', key: 'tokenizerPath', type: 'str', default: null, metavar: 'DIR', help: 'tokenizer directory (default: --model-path)' },
  { name: 'served-model-name', key: 'servedModelName', type: 'str', default: null, help: 'model name reported by /v1/models (default: --model-path)' },
  { name: 'chat-template', key: 'chatTemplate', type: 'str', default: null, metavar: 'FILE', help: 'Jinja chat template file overriding the tokenizer\'s' },
  { name: 'tool-call-parser', key: 'toolCallParser', type: 'str', default: null, help: 'tool-call parser' },
  { name: 'reasoning-parser', key: 'reasoningParser', type: 'str', default: null, help: 'reasoning parser' },
  { name: 'grammar-backend', key: 'grammarBackend', type: 'str', default: 'xgrammar', choices: ['xgrammar', 'outlines', 'llguidance', 'none'], help: 'grammar backend for constrained decoding (xgrammar or none are built)' },
  { name: 'constrained-json-disable-any-whitespace', key: 'constrainedJsonDisableAnyWhitespace', type: 'bool', default: false, help: 'JSON-schema grammars allow no free whitespace (compact separators)' },
  { name: 'trust-remote-code', key: 'trustRemoteCode', type: 'bool', default: false, help: 'accepted for compatibility (tsglang never runs model code from a checkpoint)' },
  { name: 'revision', key: 'revision', type: 'str', default: null, help: 'accepted for compatibility (local directories have no revisions)' },
  { name: 'dtype', key: 'dtype', type: 'str', default: 'auto', choices: ['auto', 'half', 'float16', 'bfloat16', 'float', 'float32'], help: 'activation dtype; the CPU engine computes in float32 for every choice' },
  { name: 'device', key: 'device', type: 'str', default: 'cpu', choices: ['cpu'], help: 'device (tsglang runs on CPU)' },
  { name: 'quantization', key: 'quantization', type: 'str', default: null, help: 'weight quantization (default: from the checkpoint; fp8 block-scaled is built)' },
  { name: 'kv-cache-dtype', key: 'kvCacheDtype', type: 'str', default: 'auto', choices: ['auto', 'bf16', 'bfloat16', 'fp8_e4m3', 'fp8_e5m2', 'fp4_e2m1'], help: 'KV cache storage dtype (auto: f32 on CPU; bf16; fp8_e4m3 / fp8_e5m2 with the checkpoint\'s k_scale / v_scale, else 1.0)' },
  { name: 'context-length', key: 'contextLength', type: 'int', default: null, help: 'max context length (default: from config.json)' },
  { name: 'json-model-override-args', key: 'jsonModelOverrideArgs', type: 'json', default: {}, metavar: 'JSON', help: 'JSON object merged into config.json' },
  // memory and scheduling
  { name: 'mem-fraction-static', key: 'memFractionStatic', type: 'float', default: null, help: 'fraction of memory for weights + KV pool (default: auto)' },
  { name: 'max-total-tokens', key: 'maxTotalTokens', type: 'int', default: null, help: 'cap on the KV pool token capacity' },
  { name: 'max-running-requests', key: 'maxRunningRequests', type: 'int', default: null, help: 'max concurrently running requests (default: auto)' },
  { name: 'max-queued-requests', key: 'maxQueuedRequests', type: 'int', default: null, help: 'max waiting requests' },
  { name: 'max-prefill-tokens', key: 'maxPrefillTokens', type: 'int', default: 16384, help: 'token budget of one prefill batch' },
  { name: 'chunked-prefill-size', key: 'chunkedPrefillSize', type: 'int', default: null, help: 'max tokens of one request per prefill step; -1 disables chunking (default: auto)' },
  { name: 'page-size', key: 'pageSize', type: 'int', default: 1, help: 'tokens per KV page' },
  { name: 'schedule-policy', key: 'schedulePolicy', type: 'str', default: 'fcfs', choices: ['fcfs', 'lpm', 'dfs-weight', 'lof', 'random'], help: 'waiting-queue order' },
  { name: 'schedule-conservativeness', key: 'scheduleConservativeness', type: 'float', default: 1.0, help: 'scales the new-token ratio estimate' },
  { name: 'disable-radix-cache', key: 'disableRadixCache', type: 'bool', default: false, help: 'no prefix sharing (chunk cache)' },
  { name: 'enable-mixed-chunk', key: 'enableMixedChunk', type: 'bool', default: false, help: 'run a prefill chunk and the decode batch in one forward' },
  { name: 'disable-overlap-schedule', key: 'disableOverlapSchedule', type: 'bool', default: false, help: 'accepted; tsglang\'s scheduler does not overlap CPU and device work' },
  { name: 'stream-interval', key: 'streamInterval', type: 'int', default: 1, help: 'stream an update every N tokens' },
  { name: 'random-seed', key: 'randomSeed', type: 'int', default: null, help: 'base random seed' },
  { name: 'allow-auto-truncate', key: 'allowAutoTruncate', type: 'bool', default: false, help: 'truncate over-long prompts instead of returning 400' },
  { name: 'skip-tokenizer-init', key: 'skipTokenizerInit', type: 'bool', default: false, help: 'requests carry input_ids; outputs are ids only' },
  { name: 'skip-server-warmup', key: 'skipServerWarmup', type: 'bool', default: false, help: 'skip the start-up warmup request' },
  { name: 'sampling-defaults', key: 'samplingDefaults', type: 'str', default: 'model', choices: ['model', 'openai'], help: 'defaults for unset sampling params' },
  { name: 'preferred-sampling-params', key: 'preferredSamplingParams', type: 'json', default: null, metavar: 'JSON', help: 'server-side sampling defaults for /generate' },
  { name: 'watchdog-timeout', key: 'watchdogTimeout', type: 'float', default: 300, help: 'seconds one forward may take before the server exits' },
  { name: 'num-threads', aliases: ['threads'], key: 'numThreads', type: 'int', default: null, help: 'tsglang: compute threads of the CPU kernels (default: the engine\'s)' },
  // server, API, observability
  { name: 'host', key: 'host', type: 'str', default: '127.0.0.1', help: 'HTTP bind address' },
  { name: 'port', key: 'port', type: 'int', default: 30000, help: 'HTTP port' },
  { name: 'api-key', key: 'apiKey', type: 'str', default: null, help: 'require `Authorization: Bearer KEY` (except /health*, /metrics)' },
  { name: 'enable-metrics', key: 'enableMetrics', type: 'bool', default: false, help: 'serve Prometheus metrics at /metrics' },
  { name: 'enable-cache-report', key: 'enableCacheReport', type: 'bool', default: false, help: 'report usage.prompt_tokens_details.cached_tokens' },
  { name: 'log-level', key: 'logLevel', type: 'str', default: 'info', choices: ['debug', 'info', 'warning', 'error'], help: 'log level' },
  { name: 'log-level-http', key: 'logLevelHttp', type: 'str', default: null, choices: ['debug', 'info', 'warning', 'error'], help: 'HTTP log level (default: --log-level)' },
  { name: 'log-requests', key: 'logRequests', type: 'bool', default: false, help: 'log request metadata, inputs and outputs' },
  { name: 'log-requests-level', key: 'logRequestsLevel', type: 'int', default: 2, help: '0 meta, 1 +sampling params, 2 +partial I/O, 3 full' },
  // parallelism (TP/EP/PP ranks and DP groups are threads of one process per node)
  { name: 'tp-size', aliases: ['tensor-parallel-size', 'tp'], key: 'tpSize', type: 'int', default: 1, help: 'tensor-parallel size' },
  { name: 'dp-size', aliases: ['data-parallel-size'], key: 'dpSize', type: 'int', default: 1, help: 'data-parallel size' },
  { name: 'ep-size', aliases: ['ep', 'expert-parallel-size'], key: 'epSize', type: 'int', default: 1, help: 'expert-parallel size' },
  { name: 'pp-size', aliases: ['pipeline-parallel-size'], key: 'ppSize', type: 'int', default: 1, help: 'pipeline-parallel size' },
  { name: 'pp-max-micro-batch-size', key: 'ppMaxMicroBatchSize', type: 'int', default: null, help: 'requests per pipeline micro-batch (default max(max_running_requests // pp_size, 1))' },
  { name: 'pp-async-batch-depth', key: 'ppAsyncBatchDepth', type: 'int', default: 0, help: 'extra in-flight micro-batches with --pp-size > 1' },
  { name: 'enable-dp-attention', key: 'enableDpAttention', type: 'bool', default: false, help: 'data-parallel attention (switched off when dp = 1)' },
  { name: 'load-balance-method', key: 'loadBalanceMethod', type: 'str', default: 'auto', choices: ['auto', 'round_robin', 'shortest_queue', 'minimum_tokens', 'follow_bootstrap_room'], help: 'how the DP controller spreads requests over DP ranks (auto: follow_bootstrap_room on a PD prefill server, else round_robin)' },
  { name: 'nnodes', key: 'nnodes', type: 'int', default: 1, help: 'number of nodes' },
  { name: 'node-rank', key: 'nodeRank', type: 'int', default: 0, help: 'rank of this node' },
  { name: 'dist-init-addr', aliases: ['nccl-init-addr'], key: 'distInitAddr', type: 'str', default: null, metavar: 'HOST:PORT', help: 'multi-node rendezvous address' },
  { name: 'dist-timeout', key: 'distTimeout', type: 'int', default: null, help: 'seconds for distributed init' },
  { name: 'enable-prefill-cp', key: 'enablePrefillCp', type: 'bool', default: false, help: 'prefill context parallelism' },
  { name: 'cp-strategy', key: 'cpStrategy', type: 'str', default: null, choices: ['interleave', 'zigzag'], help: 'prefill CP token split' },
  { name: 'attn-cp-size', key: 'attnCpSize', type: 'int', default: 1, help: 'attention CP group size' },
  { name: 'moe-a2a-backend', key: 'moeA2aBackend', type: 'str', default: 'none', choices: ['none', 'deepep', 'mooncake', 'nixl', 'mori', 'ascend_fuseep', 'flashinfer'], help: 'MoE all-to-all backend' },
  { name: 'deepep-mode', key: 'deepepMode', type: 'str', default: 'auto', choices: ['auto', 'normal', 'low_latency'], help: 'DeepEP dispatch mode (GPU only; no DeepEP on CPU)' },
  // kernel choices (GPU only)
  { name: 'moe-runner-backend', key: 'moeRunnerBackend', type: 'str', default: 'auto', choices: MOE_RUNNER_BACKEND_CHOICES, help: `MoE GEMM backend (${KERNEL_CHOICE})` },
  { name: 'attention-backend', key: 'attentionBackend', type: 'str', default: null, choices: ATTENTION_BACKEND_CHOICES, help: `attention backend (${KERNEL_CHOICE})` },
  { name: 'dsa-prefill-backend', aliases: ['nsa-prefill-backend'], key: 'dsaPrefillBackend', type: 'str', default: null, choices: DSA_KERNEL_CHOICES, help: `DSA prefill kernel (${KERNEL_CHOICE})` },
  { name: 'dsa-decode-backend', aliases: ['nsa-decode-backend'], key: 'dsaDecodeBackend', type: 'str', default: null, choices: DSA_KERNEL_CHOICES, help: `DSA decode kernel (${KERNEL_CHOICE})` },
  { name: 'dsa-topk-backend', key: 'dsaTopkBackend', type: 'str', default: 'sgl-kernel', choices: DSA_TOPK_BACKEND_CHOICES, help: `DSA indexer top-k kernel (${KERNEL_CHOICE})` },
  { name: 'cuda-graph-max-bs', key: 'cudaGraphMaxBs', type: 'int', default: null, help: 'largest CUDA-graph batch (no CUDA graphs on CPU)' },
  { name: 'cuda-graph-max-bs-decode', key: 'cudaGraphMaxBsDecode', type: 'int', default: null, help: 'largest decode CUDA-graph batch (no CUDA graphs on CPU)' },
  { name: 'disable-cuda-graph', key: 'disableCudaGraph', type: 'bool', default: false, help: 'accepted; there are no CUDA graphs on CPU' },
  { name: 'enable-torch-compile', key: 'enableTorchCompile', type: 'bool', default: false, help: 'accepted; tsglang has no torch.compile' },
  { name: 'enable-deterministic-inference', key: 'enableDeterministicInference', type: 'bool', default: false, help: 'accepted; tsglang\'s CPU kernels are batch invariant already' },
  // speculative decoding (scheduler/spec_decode.ts; EAGLE3 and NGRAM are refused) and PD disaggregation
  { name: 'speculative-algorithm', key: 'speculativeAlgorithm', type: 'str', default: null, choices: ['EAGLE', 'EAGLE3', 'NEXTN', 'STANDALONE', 'NGRAM'], help: 'speculative decoding algorithm (NEXTN = EAGLE: DeepSeek MTP layer as the draft; STANDALONE: a separate draft model)' },
  { name: 'speculative-draft-model-path', key: 'speculativeDraftModelPath', type: 'str', default: null, aliases: ['speculative-draft-model'], help: 'draft model checkpoint (default: the target, whose MTP layer EAGLE drafts with)' },
  { name: 'speculative-num-steps', key: 'speculativeNumSteps', type: 'int', default: null, help: 'draft depth (default: auto, DeepSeek 3)' },
  { name: 'speculative-eagle-topk', key: 'speculativeEagleTopk', type: 'int', default: null, help: 'draft branching factor (default: auto, DeepSeek 1)' },
  { name: 'speculative-num-draft-tokens', key: 'speculativeNumDraftTokens', type: 'int', default: null, help: 'tokens verified per step (default: auto, DeepSeek 4; topk 1 forces steps + 1)' },
  { name: 'speculative-accept-threshold-single', key: 'speculativeAcceptThresholdSingle', type: 'float', default: 1.0, help: 'accept a draft token whose target probability reaches this' },
  { name: 'speculative-accept-threshold-acc', key: 'speculativeAcceptThresholdAcc', type: 'float', default: 1.0, help: 'divides the accumulated target probability the coin is compared with' },
  { name: 'disaggregation-mode', key: 'disaggregationMode', type: 'str', default: 'null', choices: ['null', 'prefill', 'decode'], help: 'PD disaggregation role' },
  { name: 'disaggregation-bootstrap-port', key: 'disaggregationBootstrapPort', type: 'int', default: 8998, help: 'bootstrap port of a prefill server' },
  { name: 'disaggregation-transfer-backend', key: 'disaggregationTransferBackend', type: 'str', default: 'null', choices: ['null', 'mooncake', 'nixl', 'ascend', 'mori', 'mooncake_tcp', 'fake', 'tcp', 'ucx'], help: 'KV transfer backend: ucx (libucx-dev; the default when its addon loads), tcp (else the default), fake (no transfer, for warm-up and tests); SGLang\'s mooncake, nixl, ascend, mori are not available' },
  { name: 'disaggregation-decode-enable-radix-cache', key: 'disaggregationDecodeEnableRadixCache', type: 'bool', default: false, help: 'keep a prefix cache on a decode server (off by default)' },
];

/** The parsed command line: frozen args plus which flags the user actually gave (canonical names). */
export interface ParsedServerArgs {
  readonly args: Readonly<ServerArgs>;
  readonly given: ReadonlySet<string>;
  readonly help: boolean;
}

/** Every default, from the table. */
export function defaultServerArgs(): ServerArgs {
  const out: Record<string, unknown> = {};
  for (const f of SERVER_FLAGS) out[f.key] = structuredClone(f.default);
  return out as unknown as ServerArgs;
}

function badArg(flag: string, msg: string): InvalidRequestError {
  return new InvalidRequestError(`argument --${flag}: ${msg}`, flag);
}

/**
 * Resolves a long option as argparse does: exact name or alias first, else a unique prefix of one flag's
 * names (`--tp` → --tp-size, `--nccl-init` → --dist-init-addr via its alias --nccl-init-addr).
 * @throws InvalidRequestError for unknown or ambiguous options
 */
export function resolveFlag(option: string, table: readonly FlagSpec[] = SERVER_FLAGS): FlagSpec {
  for (const f of table) if (f.name === option || f.aliases?.includes(option)) return f;
  const hits = new Map<FlagSpec, string>();
  for (const f of table) {
    for (const n of [f.name, ...(f.aliases ?? [])]) if (n.startsWith(option) && !hits.has(f)) hits.set(f, n);
  }
  if (hits.size === 1) return [...hits.keys()][0];
  if (hits.size > 1) {
    const names = [...hits.values()].map((n) => `--${n}`).join(', ');
    throw new InvalidRequestError(`ambiguous option: --${option} could match ${names}`, option);
  }
  throw new InvalidRequestError(`unrecognized arguments: --${option}`, option);
}

function convert(f: FlagSpec, raw: string): unknown {
  switch (f.type) {
    case 'int': {
      if (!/^[+-]?\d+$/.test(raw.trim())) throw badArg(f.name, `invalid int value: '${raw}'`);
      return Number.parseInt(raw, 10);
    }
    case 'float': {
      const v = Number(raw);
      if (raw.trim() === '' || !Number.isFinite(v)) throw badArg(f.name, `invalid float value: '${raw}'`);
      return v;
    }
    case 'json': {
      let v: unknown;
      try { v = JSON.parse(raw); } catch { throw badArg(f.name, `invalid JSON: '${raw}'`); }
      if (v === null || typeof v !== 'object' || Array.isArray(v)) throw badArg(f.name, 'expected a JSON object');
      return v;
    }
    case 'str':
      if (f.choices && !f.choices.includes(raw)) {
        throw badArg(f.name, `invalid choice: '${raw}' (choose from ${f.choices.map((c) => `'${c}'`).join(', ')})`);
      }
      return raw;
    case 'bool':
      return true;
  }
}

/**
 * One problem with the command line: `invalid` (a bad value, an unknown flag) or `not_built` (a feature tsglang
 * parses but does not build yet). Start-up collects every problem and reports them all in one message.
 */
export interface ArgProblem {
  readonly kind: 'invalid' | 'not_built';
  readonly message: string;
}

/**
 * The error for a command line with problems: one message listing all of them (the single problem's own message when
 * there is only one). An UnsupportedFeatureError when every problem is a feature not built, else InvalidRequestError.
 */
export function argProblemsError(problems: readonly ArgProblem[]): InvalidRequestError | UnsupportedFeatureError {
  const onlyNotBuilt = problems.every((p) => p.kind === 'not_built');
  const message = problems.length === 1
    ? problems[0].message
    : `${problems.length} problems with the flags (all listed; fix or remove them to start the server):\n${problems.map((p) => `  - ${p.message}`).join('\n')}`;
  return onlyNotBuilt ? new UnsupportedFeatureError(message) : new InvalidRequestError(message, null);
}

/**
 * Parses `tsglang serve` flags like SGLang's argparse parser, collecting every problem instead of stopping at the
 * first: unrecognized arguments are gathered in one `unrecognized arguments: …` entry (as argparse words it), then one
 * entry per flag with a bad value. Flags with problems keep their defaults in `args`.
 * @param argv flags after `serve`
 */
export function parseServerArgsCollecting(argv: readonly string[]): { parsed: ParsedServerArgs; problems: ArgProblem[] } {
  const args = defaultServerArgs() as unknown as Record<string, unknown>;
  const given = new Set<string>();
  const problems: ArgProblem[] = [];
  const unrecognized: string[] = [];
  let help = false;
  for (let i = 0; i < argv.length; i++) {
    const tok = argv[i];
    if (tok === '-h' || tok === '--help') { help = true; continue; }
    if (!tok.startsWith('--') || tok === '--') { unrecognized.push(tok); continue; }
    const eq = tok.indexOf('=');
    const option = eq >= 0 ? tok.slice(2, eq) : tok.slice(2);
    let raw: string | undefined = eq >= 0 ? tok.slice(eq + 1) : undefined;
    let f: FlagSpec;
    try {
      f = resolveFlag(option);
    } catch (e) {
      if (!/^ambiguous/.test((e as Error).message)) {
        // an unknown flag takes the next token along when it is no flag (its value, as argparse lists it)
        unrecognized.push(tok);
        if (raw === undefined && argv[i + 1] !== undefined && !argv[i + 1].startsWith('--')) unrecognized.push(argv[++i]);
      } else {
        problems.push({ kind: 'invalid', message: (e as Error).message });
        if (raw === undefined && argv[i + 1] !== undefined && !argv[i + 1].startsWith('--')) i++;
      }
      continue;
    }
    try {
      if (f.type === 'bool') {
        if (raw !== undefined) throw badArg(f.name, `ignored explicit argument '${raw}'`);
      } else if (raw === undefined) {
        const next = argv[i + 1];
        if (next === undefined || (next.startsWith('--') && next.length > 2)) throw badArg(f.name, 'expected one argument');
        raw = next;
        i++;
      }
      args[f.key] = convert(f, raw ?? '');
      given.add(f.name);
    } catch (e) {
      problems.push({ kind: 'invalid', message: (e as Error).message });
    }
  }
  if (unrecognized.length > 0) problems.unshift({ kind: 'invalid', message: `unrecognized arguments: ${unrecognized.join(' ')}` });
  if (args.speculativeAlgorithm === 'NEXTN') args.speculativeAlgorithm = 'EAGLE';
  // SGLang ServerArgs.__post_init__: no --random-seed → random.randint(0, 1 << 30), printed with the other args
  if (args.randomSeed === null) args.randomSeed = randomInt(0, 2 ** 30 + 1);
  return { parsed: { args: Object.freeze(args as unknown as ServerArgs), given, help }, problems };
}

/**
 * Parses `tsglang serve` flags like SGLang's argparse parser.
 * @param argv flags after `serve`
 * @returns args (defaults filled, NEXTN rewritten to EAGLE, a random --random-seed in [0, 2^30] when absent), the set of flags given, and whether --help was asked
 * @throws InvalidRequestError naming every bad flag (unknown, ambiguous, missing or badly typed value, positional)
 */
export function parseServerArgs(argv: readonly string[]): ParsedServerArgs {
  const { parsed, problems } = parseServerArgsCollecting(argv);
  if (problems.length > 0) throw argProblemsError(problems);
  return parsed;
}

/**
 * Help text listing every flag with its default.
 * @param extraChoices choices known outside config/ (e.g. the parser names), listed with their flag
 */
export function serverArgsHelp(extraChoices: Readonly<Record<string, readonly string[]>> = {}): string {
  const lines = ['usage: tsglang serve [--model-path DIR] [flags]', '', 'flags (SGLang names; unique prefixes work, e.g. --tp):'];
  for (const f of SERVER_FLAGS) {
    const names = [f.name, ...(f.aliases ?? [])].map((n) => `--${n}`).join(', ');
    const meta = f.type === 'bool' ? '' : ` ${f.metavar ?? f.type.toUpperCase()}`;
    const def = f.type === 'bool' || f.default === null ? '' : ` (default: ${JSON.stringify(f.default)})`;
    const all = f.choices ?? extraChoices[f.name];
    const choices = all ? ` {${all.join(',')}}` : '';
    lines.push(`  ${(names + meta).padEnd(44)} ${f.help}${choices}${def}`);
  }
  return lines.join('\n') + '\n';
}

/** Notices for accepted flags that change nothing on this build (printed at start-up, never silent). */
export interface ServerArgsCheck {
  readonly notices: readonly string[];
}

/** A value check of one flag: the problem's text (after `argument --flag: `), or null when the value is fine. */
type ValueRule = readonly [flag: string, check: (a: Readonly<ServerArgs>) => string | null];

const atLeast1 = (v: number | null): string | null => (v !== null && v < 1 ? `must be ≥ 1, got ${v}` : null);

/** Value checks, one per flag (SGLang's ranges). */
const VALUE_RULES: readonly ValueRule[] = [
  ['port', (a) => (a.port < 0 || a.port > 65535 ? `must be in [0, 65535], got ${a.port}` : null)],
  ['tp-size', (a) => atLeast1(a.tpSize)],
  ['dp-size', (a) => atLeast1(a.dpSize)],
  ['ep-size', (a) => atLeast1(a.epSize)],
  ['pp-size', (a) => atLeast1(a.ppSize)],
  ['nnodes', (a) => atLeast1(a.nnodes)],
  ['page-size', (a) => atLeast1(a.pageSize)],
  ['stream-interval', (a) => atLeast1(a.streamInterval)],
  ['attn-cp-size', (a) => atLeast1(a.attnCpSize)],
  ['mem-fraction-static', (a) => (a.memFractionStatic !== null && !(a.memFractionStatic > 0 && a.memFractionStatic < 1) ? `must be in (0, 1), got ${a.memFractionStatic}` : null)],
  ['context-length', (a) => atLeast1(a.contextLength)],
  ['max-total-tokens', (a) => atLeast1(a.maxTotalTokens)],
  ['max-running-requests', (a) => atLeast1(a.maxRunningRequests)],
  ['max-prefill-tokens', (a) => atLeast1(a.maxPrefillTokens)],
  ['num-threads', (a) => atLeast1(a.numThreads)],
  ['cuda-graph-max-bs', (a) => atLeast1(a.cudaGraphMaxBs)],
  ['cuda-graph-max-bs-decode', (a) => atLeast1(a.cudaGraphMaxBsDecode)],
  ['pp-async-batch-depth', (a) => (a.ppAsyncBatchDepth < 0 ? `must be ≥ 0, got ${a.ppAsyncBatchDepth}` : null)],
  ['pp-max-micro-batch-size', (a) => atLeast1(a.ppMaxMicroBatchSize)],
  // SGLang's check_server_args asserts (server_args.py) for pipeline parallelism
  ['enable-mixed-chunk', (a) => (a.ppSize > 1 && a.enableMixedChunk ? 'Pipeline parallelism is not compatible with mixed chunked prefill.' : null)],
  ['speculative-algorithm', (a) => (a.ppSize > 1 && a.speculativeAlgorithm !== null && a.disaggregationMode !== 'prefill' ? 'PP + speculative decoding is only supported in disaggregated prefill mode' : null)],
  ['nnodes', (a) => (a.nnodes > 1 && (a.tpSize * a.ppSize) % a.nnodes !== 0 ? 'tp_size must be divisible by number of nodes' : null)],
  ['nnodes', (a) => (a.nnodes > 1 && a.ppSize > 1 && a.ppSize % a.nnodes !== 0 && a.nnodes % a.ppSize !== 0
    ? `--pp-size ${a.ppSize} stages do not map onto --nnodes ${a.nnodes} (each node holds pp_size // nnodes whole stages, or nnodes // pp_size nodes share a stage)` : null)],
  ['log-requests-level', (a) => (![0, 1, 2, 3].includes(a.logRequestsLevel) ? `invalid choice: ${a.logRequestsLevel} (choose from 0, 1, 2, 3)` : null)],
  ['node-rank', (a) => (a.nodeRank < 0 || a.nodeRank >= a.nnodes ? `must be in [0, nnodes=${a.nnodes}), got ${a.nodeRank}` : null)],
  ['ep-size', (a) => (a.moeA2aBackend !== 'deepep' && a.tpSize % a.epSize !== 0 ? `must divide --tp-size: tp_size % ep_size == 0 is required, got ${a.tpSize} % ${a.epSize} = ${a.tpSize % a.epSize}` : null)],
  ['attn-cp-size', (a) => (a.attnCpSize > 1 && a.tpSize % (a.attnCpSize * a.dpSize) !== 0 ? `must divide tp_size / dp_size: tp_size % (dp_size * attn_cp_size) == 0 is required, got ${a.tpSize} % (${a.dpSize} * ${a.attnCpSize})` : null)],
  ['cp-strategy', (a) => ((a.enablePrefillCp || a.attnCpSize > 1) && a.dpSize > 1 ? `interleave prefill CP does not support --dp-size greater than 1 (got ${a.dpSize}); keep --dp 1` : null)],
  ['dp-size', (a) => (a.enableDpAttention && a.tpSize % a.dpSize !== 0 ? `--enable-dp-attention needs tp_size % dp_size == 0, got ${a.tpSize} % ${a.dpSize} = ${a.tpSize % a.dpSize}` : null)],
  // SGLang's check_server_args: DP replicas stay on one node; across nodes only attention-DP groups
  ['dp-size', (a) => (a.dpSize > 1 && a.nnodes !== 1 && !a.enableDpAttention ? 'multi-node data parallel is not supported unless dp attention!' : null)],
  ['model-path', (a) => (a.modelPath !== null && (!existsSync(a.modelPath) || !statSync(a.modelPath).isDirectory())
    ? `'${a.modelPath}' is not a local directory (tsglang has no model hub: pass a checkpoint directory, or omit --model-path for the embedded model)`
    : a.modelPath !== null && !existsSync(join(a.modelPath, 'config.json'))
      ? `'${a.modelPath}' has no config.json (a checkpoint directory holds config.json, *.safetensors and tokenizer.json; \`tsglang make-tiny --out DIR\` writes one)` : null)],
  ['tokenizer-path', (a) => (a.tokenizerPath !== null && !existsSync(a.tokenizerPath) ? `'${a.tokenizerPath}' does not exist` : null)],
  ['speculative-num-steps', (a) => atLeast1(a.speculativeNumSteps)],
  ['speculative-eagle-topk', (a) => atLeast1(a.speculativeEagleTopk)],
  ['speculative-num-draft-tokens', (a) => (a.speculativeNumDraftTokens !== null && a.speculativeNumDraftTokens < 2 ? `must be ≥ 2, got ${a.speculativeNumDraftTokens}` : null)],
  ['speculative-accept-threshold-single', (a) => (!(a.speculativeAcceptThresholdSingle > 0 && a.speculativeAcceptThresholdSingle <= 1) ? `must be in (0, 1], got ${a.speculativeAcceptThresholdSingle}` : null)],
  ['speculative-accept-threshold-acc', (a) => (!(a.speculativeAcceptThresholdAcc > 0 && a.speculativeAcceptThresholdAcc <= 1) ? `must be in (0, 1], got ${a.speculativeAcceptThresholdAcc}` : null)],
  ['speculative-draft-model-path', (a) => (a.speculativeDraftModelPath !== null && !existsSync(join(a.speculativeDraftModelPath, 'config.json')) ? `'${a.speculativeDraftModelPath}' is not a checkpoint directory (no config.json)` : null)],
  ['speculative-algorithm', (a) => (a.speculativeAlgorithm === null && a.speculativeDraftModelPath !== null ? 'is required with --speculative-draft-model-path' : null)],
  ['chat-template', (a) => (a.chatTemplate !== null && !existsSync(a.chatTemplate) ? `'${a.chatTemplate}' is not a file (tsglang takes a path to a Jinja template)` : null)],
];

/**
 * Features parsed but not built yet: each rule names what a setting asks for, or null when it asks for nothing
 * unbuilt. One line per feature, so the work that builds a feature removes its line.
 */
type NotBuiltRule = (a: Readonly<ServerArgs>, given: ReadonlySet<string>, machineCpus: number) => string | null;

const NOT_BUILT_RULES: readonly NotBuiltRule[] = [
  // --dp-size: engine/dp_controller.ts (replicas on one node, or attention-DP groups with --enable-dp-attention, also
  // across nodes: engine/remote_core.ts)
  // --pp-size: executor/pp_runner.ts (stages of tp ranks each; across nodes with cli/multinode.ts)
  (a) => (a.ppSize > 1 && a.dpSize > 1 ? `pipeline parallelism with data parallelism (--pp-size ${a.ppSize} with --dp-size ${a.dpSize})` : null),
  (a) => (a.ppSize > 1 && a.disaggregationMode !== 'null' ? `pipeline parallelism with PD disaggregation (--pp-size ${a.ppSize} with --disaggregation-mode ${a.disaggregationMode})` : null),
  // --nnodes > 1: cli/multinode.ts (needs Gloo; checks --dist-init-addr and tp_size % nnodes)
  // --enable-prefill-cp --cp-strategy interleave with dp = 1 (also across nodes): layers/context_parallel.ts (DeepSeek MLA)
  (a) => (a.cpStrategy === 'zigzag' ? 'zigzag prefill context parallelism (--cp-strategy zigzag; SGLang has it unavailable for DeepSeek V3.2 too: use interleave)' : null),
  // (prefill CP also across nodes: each stage's CP groups are Gloo groups under --pp-size > 1, pp_layout.ts)
  (a) => (a.speculativeAlgorithm === 'EAGLE3' || a.speculativeAlgorithm === 'NGRAM' ? `speculative algorithm ${a.speculativeAlgorithm} (--speculative-algorithm; EAGLE, NEXTN and STANDALONE are built)` : null),
  (a) => (a.kvCacheDtype === 'fp4_e2m1' ? `KV cache dtype '${a.kvCacheDtype}' (--kv-cache-dtype; auto = f32, bf16, fp8_e4m3 and fp8_e5m2 are built)` : null),
  (a) => (a.quantization !== null && a.quantization !== 'fp8' ? `quantization '${a.quantization}' (--quantization; FP8 block-scaled checkpoints are built)` : null),
  (a) => (a.grammarBackend !== 'xgrammar' && a.grammarBackend !== 'none' ? `grammar backend '${a.grammarBackend}' (--grammar-backend; xgrammar and none are built)` : null),
  (a) => (a.schedulePolicy !== 'fcfs' && a.schedulePolicy !== 'lpm' ? `schedule policy '${a.schedulePolicy}' (fcfs and lpm are built)` : null),
];

/**
 * Checks the parsed args and collects every problem (value errors, features not built) instead of stopping at the
 * first; accepted flags that change nothing on CPU get notices.
 * @param machineCpus CPUs of this machine (for the TP message)
 */
export function checkServerArgs(a: Readonly<ServerArgs>, given: ReadonlySet<string>, machineCpus = 1): ServerArgsCheck & { problems: ArgProblem[] } {
  const notices: string[] = [];
  const problems: ArgProblem[] = [];
  for (const [flag, check] of VALUE_RULES) {
    const m = check(a);
    if (m !== null) problems.push({ kind: 'invalid', message: `argument --${flag}: ${m}` });
  }
  for (const rule of NOT_BUILT_RULES) {
    const what = rule(a, given, machineCpus);
    if (what !== null) problems.push({ kind: 'not_built', message: `${what} is not supported by tsglang yet; remove the flag to start the server.` });
  }
  // TP/EP ranks are worker threads (executor/tp_runner.ts); the model checks that its heads / experts split (at load).
  if (a.tpSize > machineCpus) notices.push(`--tp-size ${a.tpSize} runs ${a.tpSize} rank threads on ${machineCpus} CPU core(s): ranks share cores (slower, same results)`);
  // accepted, with a notice (the GPU-only knobs: one line, gpuKnobsNotice)
  if (a.enableDpAttention && a.dpSize === 1) notices.push('--enable-dp-attention with dp_size = 1 is switched off (as SGLang does)');
  if (a.ppSize > 1) notices.push('Pipeline parallelism is incompatible with overlap schedule.'); // SGLang's warning (tsglang has no overlap scheduler)
  // SGLang server_args.py _handle_a2a_moe: DeepEP runs experts over the whole TP group (slices.ts epSizeOf)
  if (a.moeA2aBackend === 'deepep') notices.push(`DeepEP MoE is enabled. The expert parallel size is adjusted to be the same as the tensor parallel size[${a.tpSize}].`);
  if (given.has('disable-overlap-schedule')) notices.push('--disable-overlap-schedule: tsglang has no overlap scheduler; nothing to disable');
  if (a.nnodes === 1 && a.tpSize === 1 && (given.has('dist-init-addr') || given.has('dist-timeout'))) notices.push('--dist-init-addr/--dist-timeout: single-node, single-rank serving; no distributed init happens');
  if (given.has('revision')) notices.push('--revision: local checkpoint directories have no revisions; ignored');
  if (given.has('dtype') && a.dtype !== 'auto') notices.push(`--dtype ${a.dtype}: the CPU engine computes in float32`);
  if (given.has('watchdog-timeout')) notices.push('--watchdog-timeout: no watchdog in tsglang yet');
  if (given.has('enable-deterministic-inference')) notices.push('--enable-deterministic-inference: tsglang is deterministic and batch invariant by construction; nothing to switch');
  return { notices, problems };
}

/**
 * Validates the parsed args (checkServerArgs) and throws when there is any problem, listing all of them.
 * @param machineCpus CPUs of this machine (for the TP message)
 * @throws UnsupportedFeatureError (only features not built), InvalidRequestError (any value error)
 */
export function validateServerArgs(a: Readonly<ServerArgs>, given: ReadonlySet<string>, machineCpus = 1): ServerArgsCheck {
  const { notices, problems } = checkServerArgs(a, given, machineCpus);
  if (problems.length > 0) throw argProblemsError(problems);
  return { notices };
}

/** The GPU-only flags of the seed pages and what tsglang does on CPU instead (one start-up warning: gpuKnobsNotice). */
const GPU_KNOBS: ReadonlyArray<readonly [flag: string, key: keyof ServerArgs]> = [
  ['attention-backend', 'attentionBackend'], ['dsa-prefill-backend', 'dsaPrefillBackend'], ['dsa-decode-backend', 'dsaDecodeBackend'],
  ['dsa-topk-backend', 'dsaTopkBackend'], ['moe-runner-backend', 'moeRunnerBackend'], ['moe-a2a-backend', 'moeA2aBackend'], ['deepep-mode', 'deepepMode'],
  ['cuda-graph-max-bs', 'cudaGraphMaxBs'], ['cuda-graph-max-bs-decode', 'cudaGraphMaxBsDecode'], ['disable-cuda-graph', 'disableCudaGraph'],
  ['enable-torch-compile', 'enableTorchCompile'],
];

/** The SGLANG_* environment variables of the seed pages that only tune GPU kernels or GPU processes. */
export const GPU_ENV_VARS = ['SGLANG_DEEPEP_LL_COMBINE_SEND_NUM_SMS', 'SGLANG_SET_CPU_AFFINITY'] as const;

/**
 * The one start-up warning that lists every GPU-only knob given (flags with their values, GPU environment variables)
 * and says what tsglang uses on CPU instead.
 * @param gpuEnv the GPU_ENV_VARS that are set, with their values (ServerEnv.gpuEnv)
 * @returns the warning, or null when none was given
 */
export function gpuKnobsNotice(a: Readonly<ServerArgs>, given: ReadonlySet<string>, gpuEnv: ReadonlyArray<readonly [string, string]> = []): string | null {
  const items: string[] = [];
  for (const [flag, key] of GPU_KNOBS) {
    if (!given.has(flag)) continue;
    const v = a[key];
    items.push(typeof v === 'boolean' ? `--${flag}` : `--${flag} ${String(v)}`);
  }
  for (const [k, v] of gpuEnv) items.push(`${k}=${v}`);
  if (items.length === 0) return null;
  return `GPU-only settings accepted with no effect on CPU: ${items.join(', ')}. tsglang uses instead: its own AVX2 CPU kernels `
    + `(paged attention and MLA reading the KV pool in --kv-cache-dtype, the DSA indexer top-k, fused FP8/BF16-dequant MoE GEMMs), `
    + 'MoE tokens gathered/reduced by its own collectives (no DeepEP all-to-all), no CUDA graphs or torch.compile (each step calls the kernels directly), '
    + 'its own compute thread pool (--num-threads; no per-GPU CPU affinity).';
}

/** The effective served model name: --served-model-name, else --model-path, else the embedded model's name. */
export function servedModelName(a: Readonly<ServerArgs>, resolvedModelPath: string): string {
  return a.servedModelName ?? a.modelPath ?? resolvedModelPath;
}

/** The kernel backend's environment variables (read here; createOps / loadNativeAddon receive them). */
export interface KernelEnv {
  /** $TSGLANG_NATIVE_ADDON: path of the native addon (null: the built one under native/build/Release). */
  readonly nativeAddonPath: string | null;
  /** $TSGLANG_NATIVE=0 disables the native addon. */
  readonly nativeDisabled: boolean;
  /** $TSGLANG_THREADS when an integer ≥ 1, else null (then: the available cores). */
  readonly threads: number | null;
  /** $TSGLANG_BACKEND as given, 'auto' when unset or empty (validated by kernels' parseOpsBackend). */
  readonly backend: string;
  /** $TSGLANG_GEMM: 'blas' selects the BLAS large-M matmul, anything else the batch-invariant 'own'. */
  readonly gemm: 'own' | 'blas';
}

/** Environment variables tsglang reads (only here). */
export interface ServerEnv extends KernelEnv {
  /** $HOME/.cache/tsglang, or $TSGLANG_CACHE_DIR. */
  readonly cacheDir: string;
  /**
   * $TSGLANG_TOKENIZE_TIMEOUT_S (seconds, > 0) in ms: how long one request may be tokenized in the tokenizer worker;
   * null when unset or invalid (the engine's default, 60 s).
   */
  readonly tokenizeTimeoutMs: number | null;
  /**
   * $SGLANG_DSA_PREFILL_DENSE_ATTN_KV_LEN_THRESHOLD (older name SGLANG_NSA_PREFILL_DENSE_ATTN_KV_LEN_THRESHOLD), an
   * integer ≥ 0, else null: SGLang's DSA models prefill with dense attention while the kv length is at most this
   * (default index_topk). See dsaDenseThresholdNotice.
   */
  readonly dsaPrefillDenseAttnKvLenThreshold: number | null;
  /** $SGLANG_TORCH_PROFILER_DIR, else /tmp: where /start_profile writes (SGLang's default). */
  readonly profilerDir: string;
  /** The GPU_ENV_VARS that are set (name, value), for gpuKnobsNotice. */
  readonly gpuEnv: ReadonlyArray<readonly [string, string]>;
}

/**
 * Reads the kernel backend's environment variables (TSGLANG_NATIVE_ADDON, TSGLANG_NATIVE, TSGLANG_THREADS,
 * TSGLANG_BACKEND, TSGLANG_GEMM).
 * @param env process.env or a test copy
 */
export function readKernelEnv(env: NodeJS.ProcessEnv = process.env): KernelEnv {
  const rawThreads = env.TSGLANG_THREADS;
  const n = rawThreads !== undefined && rawThreads !== '' ? Number(rawThreads) : NaN;
  return {
    nativeAddonPath: env.TSGLANG_NATIVE_ADDON ?? null,
    nativeDisabled: env.TSGLANG_NATIVE === '0',
    threads: Number.isInteger(n) && n >= 1 ? n : null,
    backend: env.TSGLANG_BACKEND || 'auto',
    gemm: env.TSGLANG_GEMM === 'blas' ? 'blas' : 'own',
  };
}

/**
 * Reads tsglang's environment variables.
 * @param env process.env or a test copy
 */
export function readServerEnv(env: NodeJS.ProcessEnv = process.env): ServerEnv {
  const home = env.HOME ?? env.USERPROFILE ?? '.';
  const timeoutS = env.TSGLANG_TOKENIZE_TIMEOUT_S ? Number(env.TSGLANG_TOKENIZE_TIMEOUT_S) : NaN;
  const dense = env.SGLANG_DSA_PREFILL_DENSE_ATTN_KV_LEN_THRESHOLD ?? env.SGLANG_NSA_PREFILL_DENSE_ATTN_KV_LEN_THRESHOLD;
  const denseN = dense !== undefined && dense !== '' ? Number(dense) : NaN;
  return {
    cacheDir: env.TSGLANG_CACHE_DIR || `${home}/.cache/tsglang`,
    tokenizeTimeoutMs: Number.isFinite(timeoutS) && timeoutS > 0 ? timeoutS * 1000 : null,
    dsaPrefillDenseAttnKvLenThreshold: Number.isInteger(denseN) && denseN >= 0 ? denseN : null,
    profilerDir: env.SGLANG_TORCH_PROFILER_DIR || '/tmp',
    gpuEnv: GPU_ENV_VARS.filter((k) => env[k] !== undefined).map((k) => [k, env[k] as string] as const),
    ...readKernelEnv(env),
  };
}

/**
 * The start-up warning for a dense-prefill threshold tsglang does not follow. SGLang prefills DSA models with dense
 * attention while the kv length is ≤ the threshold (default index_topk, where dense equals the top-k of all keys);
 * tsglang's prefill always attends the indexer's top-k, so a threshold above index_topk (dense attention over more
 * keys) is not reproduced. A threshold ≤ index_topk changes nothing in exact arithmetic.
 * @param indexTopK the model's index_topk (undefined / not a number: not a DSA model, no notice)
 * @returns the warning, or null when the threshold is unset or has no effect
 */
export function dsaDenseThresholdNotice(env: Pick<ServerEnv, 'dsaPrefillDenseAttnKvLenThreshold'>, indexTopK: unknown): string | null {
  const t = env.dsaPrefillDenseAttnKvLenThreshold;
  if (t === null || typeof indexTopK !== 'number' || t <= indexTopK) return null;
  return `SGLANG_DSA_PREFILL_DENSE_ATTN_KV_LEN_THRESHOLD=${t}: tsglang's DSA prefill always attends the indexer's top-${indexTopK} keys (dense only up to index_topk = ${indexTopK} keys); dense prefill up to ${t} keys is not implemented, so the threshold has no effect`;
}
