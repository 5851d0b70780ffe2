// bench-serving's command line: sglang.bench_serving's flags (names, defaults, checks), the `Namespace(...)` line
// it prints, the server root and extra request body the flags describe, and the default output file name.
// Source: python/sglang/bench_serving.py (argparse section, run_benchmark); bench-spec.md §1.
import { InvalidRequestError } from '../common/index.js';
import { flagKey, parseFlags, type FlagSpec } from './argparse.js';
import type { DatasetOptions } from './datasets.js';
import { pyFloatRepr } from './py_format.js';
import { BACKENDS, defaultPortFor, type Backend } from './request_funcs.js';

/** The flags of bench-serving (SGLang's names and defaults, doc-era: seed 1). */
export const BENCH_SERVING_FLAGS: readonly FlagSpec[] = [
  { name: '--backend', type: 'str', default: 'sglang', choices: BACKENDS, help: 'server API to benchmark' },
  { name: '--base-url', type: 'str', help: 'server root URL (no /v1); overrides --host/--port' },
  { name: '--host', type: 'str', default: '0.0.0.0', help: 'server host' },
  { name: '--port', type: 'int', help: 'server port (default per backend: 30000; vllm 8000; lmdeploy 23333)' },
  { name: '--dataset-name', type: 'str', default: 'sharegpt', choices: ['sharegpt', 'random', 'random-ids', 'generated-shared-prefix'], help: 'dataset' },
  { name: '--dataset-path', type: 'str', default: '', help: 'dataset file (ShareGPT JSON); empty: download' },
  { name: '--model', type: 'str', help: 'model name sent; default: first of GET /v1/models' },
  { name: '--served-model-name', type: 'str', help: 'model name sent, overriding --model' },
  { name: '--tokenizer', type: 'str', help: 'tokenizer directory; default: --model, or the server /model_info tokenizer_path' },
  { name: '--num-prompts', type: 'int', default: 1000, help: 'number of prompts' },
  { name: '--sharegpt-output-len', type: 'int', help: 'fixed output length for sharegpt' },
  { name: '--sharegpt-context-len', type: 'int', help: 'drop sharegpt rows longer than this' },
  { name: '--random-input-len', type: 'int', default: 1024, help: 'input tokens per request (random datasets)' },
  { name: '--random-output-len', type: 'int', default: 1024, help: 'output tokens per request (random datasets)' },
  { name: '--random-range-ratio', type: 'float', default: 0.0, help: 'lengths drawn from [max(L*r,1), L]' },
  { name: '--request-rate', type: 'float', default: Infinity, help: 'requests per second (Poisson arrivals); inf sends all at once' },
  { name: '--max-concurrency', type: 'int', help: 'maximum requests in flight' },
  { name: '--output-file', type: 'str', help: 'JSONL file the result record is appended to' },
  { name: '--output-details', type: 'bool', help: 'add per-request arrays to the JSONL record' },
  { name: '--disable-tqdm', type: 'bool', help: 'no progress bar' },
  { name: '--disable-stream', type: 'bool', help: 'non-streamed requests' },
  { name: '--return-logprob', type: 'bool', help: 'ask for logprobs (native backend)' },
  { name: '--seed', type: 'int', default: 1, help: 'seed of the random streams' },
  { name: '--disable-ignore-eos', type: 'bool', help: 'send ignore_eos false' },
  { name: '--extra-request-body', type: 'str', help: 'JSON object merged into every request payload' },
  { name: '--apply-chat-template', type: 'bool', help: 'apply the chat template to sharegpt prompts' },
  { name: '--profile', type: 'bool', help: 'POST /start_profile and /stop_profile around the run' },
  { name: '--lora-name', type: 'list', help: 'LoRA adapter names' },
  { name: '--lora-request-distribution', type: 'str', default: 'uniform', choices: ['uniform', 'distinct', 'skewed'], help: 'how adapters are picked' },
  { name: '--lora-zipf-alpha', type: 'float', default: 1.5, help: 'Zipf alpha of the skewed distribution (> 1)' },
  { name: '--prompt-suffix', type: 'str', default: '', help: 'suffix of every sharegpt prompt' },
  { name: '--flush-cache', type: 'bool', help: 'POST /flush_cache after the warm-up' },
  { name: '--warmup-requests', type: 'int', default: 1, help: 'warm-up requests' },
  { name: '--tokenize-prompt', type: 'bool', help: 'send token ids (--backend sglang only)' },
  { name: '--tag', type: 'str', help: 'tag stored in the JSONL record' },
  { name: '--header', type: 'list', help: 'extra HTTP headers KEY=VALUE' },
  { name: '--gsp-num-groups', type: 'int', default: 64, help: 'generated-shared-prefix: groups' },
  { name: '--gsp-prompts-per-group', type: 'int', default: 16, help: 'generated-shared-prefix: prompts per group' },
  { name: '--gsp-system-prompt-len', type: 'int', default: 2048, help: 'generated-shared-prefix: system prompt tokens' },
  { name: '--gsp-question-len', type: 'int', default: 128, help: 'generated-shared-prefix: question tokens' },
  { name: '--gsp-output-len', type: 'int', default: 256, help: 'generated-shared-prefix: output tokens' },
  { name: '--gsp-range-ratio', type: 'float', default: 1.0, help: 'generated-shared-prefix: length range ratio' },
  { name: '--gsp-ordered', type: 'bool', help: 'generated-shared-prefix: keep group order' },
];

/** Parsed bench-serving flags (camelCase of the flag names). */
export interface BenchServingArgs extends DatasetOptions {
  backend: Backend;
  baseUrl: string | null;
  host: string;
  port: number | null;
  model: string | null;
  servedModelName: string | null;
  tokenizer: string | null;
  requestRate: number;
  maxConcurrency: number | null;
  outputFile: string | null;
  outputDetails: boolean;
  disableTqdm: boolean;
  disableStream: boolean;
  returnLogprob: boolean;
  seed: number;
  disableIgnoreEos: boolean;
  extraRequestBody: string | null;
  profile: boolean;
  loraName: string[] | null;
  loraRequestDistribution: 'uniform' | 'distinct' | 'skewed';
  loraZipfAlpha: number;
  flushCache: boolean;
  warmupRequests: number;
  tag: string | null;
  header: string[] | null;
}

/**
 * Parses bench-serving's argv.
 * @returns the args, or null when `--help` was asked
 * @throws InvalidRequestError for a bad flag or value (the message names it)
 */
export function parseBenchServingArgs(argv: readonly string[]): BenchServingArgs | null {
  const { values, help } = parseFlags(argv, BENCH_SERVING_FLAGS, 'tsglang bench-serving');
  if (help) return null;
  const args = values as unknown as BenchServingArgs;
  if (args.numPrompts < 1) throw new InvalidRequestError('--num-prompts must be at least 1', 'num_prompts');
  if (args.maxConcurrency !== null && args.maxConcurrency < 0) throw new InvalidRequestError('--max-concurrency must be ≥ 0', 'max_concurrency');
  if (!(args.requestRate > 0)) throw new InvalidRequestError('--request-rate must be > 0 (or inf)', 'request_rate');
  if (args.tokenizePrompt && args.backend !== 'sglang') {
    throw new InvalidRequestError('`--tokenize-prompt` only compatible with `--backend sglang` currently', 'tokenize_prompt');
  }
  if (!(args.loraZipfAlpha > 1)) throw new InvalidRequestError(`invalid --lora-zipf-alpha ${args.loraZipfAlpha}: it must be greater than 1`, 'lora_zipf_alpha');
  if (args.loraRequestDistribution !== 'uniform' && args.loraName !== null && args.loraName.length < 2) {
    throw new InvalidRequestError("More than 1 LoRA adapter must be specified via --lora-name to use 'distinct' or 'skewed'", 'lora_name');
  }
  return args;
}

/** The server root URL: --base-url without trailing slashes, else `http://host:port` (port: the backend's default). */
export function serverRoot(args: BenchServingArgs): string {
  if (args.baseUrl) return args.baseUrl.replace(/\/+$/, '');
  return `http://${args.host}:${args.port ?? defaultPortFor(args.backend)}`;
}

/**
 * `--extra-request-body` as an object merged over every payload ({} when absent).
 * @throws InvalidRequestError (param `extra_request_body`) for invalid JSON or a non-object
 */
export function parseExtraBody(text: string | null): Record<string, unknown> {
  if (!text) return {};
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (err) {
    throw new InvalidRequestError(`--extra-request-body is not valid JSON: ${(err as Error).message}`, 'extra_request_body');
  }
  if (v === null || typeof v !== 'object' || Array.isArray(v)) {
    throw new InvalidRequestError('--extra-request-body must be a JSON object', 'extra_request_body');
  }
  return v as Record<string, unknown>;
}

/** Python `repr` of a flag value (None/True/False, float repr, quoted str, list). */
function pyRepr(v: unknown): string {
  if (v === null || v === undefined) return 'None';
  if (v === true) return 'True';
  if (v === false) return 'False';
  if (typeof v === 'number') return Number.isInteger(v) ? String(v) : pyFloatRepr(v);
  if (typeof v === 'string') return `'${v.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
  if (Array.isArray(v)) return '[' + v.map(pyRepr).join(', ') + ']';
  return String(v);
}

/** `Namespace(backend='sglang', ...)` as SGLang prints its args (snake_case keys). */
export function namespaceRepr(args: BenchServingArgs): string {
  const parts = BENCH_SERVING_FLAGS.map((s) => {
    const key = flagKey(s.name);
    let v = (args as unknown as Record<string, unknown>)[key];
    if (s.type === 'float' && typeof v === 'number' && Number.isInteger(v)) v = pyFloatRepr(v);
    const shown = typeof v === 'string' && s.type === 'float' ? v : pyRepr(v);
    return `${s.name.replace(/^--/, '').replace(/-/g, '_')}=${shown}`;
  });
  return `Namespace(${parts.join(', ')})`;
}

function pad2(n: number): string {
  return String(n).padStart(2, '0');
}

/** SGLang's default output file name. */
export function defaultOutputFile(args: BenchServingArgs, today: Date): string {
  const mmdd = pad2(today.getMonth() + 1) + pad2(today.getDate());
  if (args.datasetName.startsWith('random')) {
    return `${args.backend}_${mmdd}_${args.numPrompts}_${args.randomInputLen}_${args.randomOutputLen}.jsonl`;
  }
  return `${args.backend}_${mmdd}_${args.numPrompts}_${args.datasetName}.jsonl`;
}
