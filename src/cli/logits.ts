// `tsglang logits`: the model bring-up tool. Loads a checkpoint, runs a prompt of raw token ids, prints exactly one
// JSON object on stdout: {"logits": {"<position>": [vocabSize floats]}, "greedy": [ids], "mtp_logits": {"<position>": [...]}}
// ("greedy" only with --greedy, "mtp_logits" only with --mtp-next-tokens). Logs and the progress bar go to stderr.
import { InvalidRequestError, Logger, parseKvCacheDtype, TsglangError } from '../common/index.js';
import type { KvCacheDtype } from '../common/index.js';
import { readKernelEnv } from '../config/index.js';
import { createOps, defaultThreads } from '../kernels/index.js';
import { SimpleBatchContext } from '../layers/index.js';
import { KVPool } from '../mem_cache/index.js';
import { launchTpRanks } from '../executor/index.js';
import { loadModel, mtpLayerOf } from '../models/index.js';
import type { CausalLM } from '../models/index.js';
import { parseStrictFlags } from './cli_common.js';

const USAGE = `usage: tsglang logits --model-path DIR --input-ids 3,17,42 [--positions last|all|0,5,9] [--greedy N]
                      [--mtp-next-tokens T0,...,Tn-1] [--json-model-override-args JSON] [--threads T]
                      [--kv-cache-dtype auto|bf16|fp8_e4m3|fp8_e5m2]

  --model-path DIR                  local Hugging Face checkpoint directory (config.json + safetensors)
  --input-ids IDS                   comma-separated token ids, used as given (no BOS added)
  --positions last|all|LIST         prompt positions whose logits are printed (default: last)
  --greedy N                        also decode N tokens greedily through the KV cache (no EOS stop)
  --mtp-next-tokens IDS             DeepSeek MTP layer: one token per prompt position; pair i = (final-norm hidden
                                    state at position i, Ti) runs as one sequence at positions 0..n-1; adds
                                    "mtp_logits" for --positions
  --json-model-override-args JSON   JSON object merged over config.json (top-level keys)
  --threads T                       compute threads of the native kernels, per TP rank (default: available cores,
                                    divided by --tp-size)
  --tp-size N (--tp), --ep-size M (--ep)   tensor / expert parallelism on rank threads (default 1)
  --kv-cache-dtype D                KV cache storage dtype as \`serve --kv-cache-dtype\` (default auto: f32)
`;

/** Parsed flags of `tsglang logits`. */
export interface LogitsArgs {
  readonly modelPath: string;
  readonly inputIds: number[];
  /** 'last', 'all' or explicit positions. */
  readonly positions: 'last' | 'all' | number[];
  readonly greedy: number | null;
  readonly overrideArgs: string | undefined;
  /** --mtp-next-tokens: one token per prompt position, or null. */
  readonly mtpNextTokens: number[] | null;
  /** --threads: compute threads (default: available cores). */
  readonly threads: number;
  /** True when --threads was given (else TP ranks get cores / tp_size each). */
  readonly threadsGiven: boolean;
  /** --tp-size / --ep-size (default 1). */
  readonly tpSize: number;
  readonly epSize: number;
  /** --kv-cache-dtype (default 'auto'). */
  readonly kvCacheDtype: KvCacheDtype;
}

/**
 * Parses argv of `tsglang logits`.
 * @throws InvalidRequestError naming the flag for a missing or malformed value
 */
export function parseLogitsArgs(argv: string[]): LogitsArgs {
  const values = parseStrictFlags(argv, {
    'model-path': { type: 'string' },
    'input-ids': { type: 'string' },
    positions: { type: 'string', default: 'last' },
    greedy: { type: 'string' },
    'json-model-override-args': { type: 'string' },
    'mtp-next-tokens': { type: 'string' },
    threads: { type: 'string' },
    'tp-size': { type: 'string' },
    tp: { type: 'string' },
    'ep-size': { type: 'string' },
    ep: { type: 'string' },
    'kv-cache-dtype': { type: 'string', default: 'auto' },
  });
  const kvCacheDtype = parseKvCacheDtype(String(values['kv-cache-dtype']));
  if (kvCacheDtype === null) throw new InvalidRequestError(`--kv-cache-dtype: invalid choice '${String(values['kv-cache-dtype'])}' (choose from auto, bf16, bfloat16, fp8_e4m3, fp8_e5m2)`, 'kv-cache-dtype');
  const modelPath = values['model-path'];
  if (typeof modelPath !== 'string' || modelPath === '') throw new InvalidRequestError('--model-path is required', 'model-path');
  const idsText = values['input-ids'];
  if (typeof idsText !== 'string' || idsText.trim() === '') throw new InvalidRequestError('--input-ids is required (e.g. 3,17,42)', 'input-ids');
  const inputIds = parseIntList(idsText, '--input-ids');
  const posText = String(values.positions);
  const positions = posText === 'last' || posText === 'all' ? posText : parseIntList(posText, '--positions');
  if (Array.isArray(positions)) {
    for (const p of positions) {
      if (p >= inputIds.length) throw new InvalidRequestError(`--positions: ${p} is outside the prompt (length ${inputIds.length})`, 'positions');
    }
  }
  let greedy: number | null = null;
  if (values.greedy !== undefined) {
    const g = String(values.greedy);
    if (!/^\d+$/.test(g)) throw new InvalidRequestError(`--greedy must be a non-negative integer, got '${g}'`, 'greedy');
    greedy = Number(g);
  }
  const ov = values['json-model-override-args'];
  let mtpNextTokens: number[] | null = null;
  if (typeof values['mtp-next-tokens'] === 'string') {
    mtpNextTokens = parseIntList(values['mtp-next-tokens'], '--mtp-next-tokens');
    if (mtpNextTokens.length !== inputIds.length) {
      throw new InvalidRequestError(`--mtp-next-tokens has ${mtpNextTokens.length} ids but the prompt has ${inputIds.length} positions (one next token per position)`, 'mtp-next-tokens');
    }
  }
  let threads = defaultThreads(readKernelEnv());
  if (values.threads !== undefined) {
    const t = String(values.threads);
    if (!/^\d+$/.test(t) || Number(t) < 1) throw new InvalidRequestError(`--threads must be a positive integer, got '${t}'`, 'threads');
    threads = Number(t);
  }
  const size = (long: string, short: string): number => {
    const v = values[long] ?? values[short];
    if (v === undefined) return 1;
    if (!/^\d+$/.test(String(v)) || Number(v) < 1) throw new InvalidRequestError(`--${long} must be a positive integer, got '${String(v)}'`, long);
    return Number(v);
  };
  const tpSize = size('tp-size', 'tp');
  const epSize = size('ep-size', 'ep');
  if (tpSize % epSize !== 0) throw new InvalidRequestError(`--ep-size (${epSize}) must divide --tp-size (${tpSize})`, 'ep-size');
  if (tpSize > 1 && mtpNextTokens !== null) throw new InvalidRequestError('--mtp-next-tokens runs the MTP layer on one rank only; drop --tp-size', 'mtp-next-tokens');
  return { modelPath, inputIds, positions, greedy, overrideArgs: typeof ov === 'string' ? ov : undefined, mtpNextTokens, threads, threadsGiven: values.threads !== undefined, tpSize, epSize, kvCacheDtype };
}

function parseIntList(text: string, flag: string): number[] {
  const parts = text.split(',').map((s) => s.trim());
  const out: number[] = [];
  for (const p of parts) {
    if (!/^\d+$/.test(p)) throw new InvalidRequestError(`${flag}: '${p}' is not a non-negative integer`, flag.slice(2));
    out.push(Number(p));
  }
  return out;
}

/** Index of the largest value (lowest index on ties). @param row [V] f32 */
export function argmax(row: Float32Array): number {
  let best = 0;
  for (let i = 1; i < row.length; i++) if (row[i] > row[best]) best = i;
  return best;
}

/** Result of computeLogits. */
export interface LogitsResult {
  /** position → [vocabSize] logits. */
  readonly logits: Map<number, Float32Array>;
  /** Greedy continuation (absent without --greedy). */
  readonly greedy?: number[];
  /** position → [vocabSize] MTP-layer logits (only with --mtp-next-tokens). */
  readonly mtpLogits?: Map<number, Float32Array>;
}

/**
 * Runs the prompt as one extend (logits of the wanted positions), then `greedy` tokens one decode at a time.
 * @throws InvalidRequestError for a token id outside the vocabulary
 */
export function computeLogits(
  model: CausalLM, inputIds: readonly number[], positions: 'last' | 'all' | readonly number[], greedy: number | null, mtpNextTokens: readonly number[] | null = null,
  kvCacheDtype: KvCacheDtype = 'auto',
): LogitsResult {
  const V = model.config.vocabSize;
  inputIds.forEach((id, i) => {
    if (id >= V) throw new InvalidRequestError(`--input-ids: id ${id} at position ${i} is outside the vocabulary [0, ${V})`, 'input-ids');
  });
  const n = inputIds.length;
  const wanted = positions === 'last' ? [n - 1] : positions === 'all' ? [...Array(n).keys()] : [...positions];
  // with --mtp-next-tokens every position's final-norm hidden state feeds the MTP layer
  const rows = mtpNextTokens ? [...Array(n).keys()] : [...new Set([...wanted, n - 1])].sort((a, b) => a - b);
  const maxLen = n + Math.max(0, greedy ?? 0);
  const ctx = new SimpleBatchContext(new KVPool(model.kvPoolLayout(kvCacheDtype), maxLen + 1), 1, maxLen);
  const req = ctx.addReq();
  const batch = ctx.makeBatch([{ req, inputIds }], { logits: 'all' });
  const prefill = model.forward({ ...batch, logitRows: Int32Array.from(rows), captureHiddenStates: mtpNextTokens !== null });
  const row = (i: number): Float32Array => prefill.logits.slice(i * V, (i + 1) * V);
  const logits = new Map<number, Float32Array>();
  for (const p of wanted) logits.set(p, row(rows.indexOf(p)));
  const mtpLogits = mtpNextTokens ? computeMtpLogits(model, prefill.hiddenStates!, mtpNextTokens, wanted) : undefined;
  if (greedy === null) return { logits, mtpLogits };
  const tokens: number[] = [];
  let last = row(rows.indexOf(n - 1));
  for (let i = 0; i < greedy; i++) {
    const tok = argmax(last);
    tokens.push(tok);
    if (i === greedy - 1) break;
    last = model.forward(ctx.makeBatch([{ req, inputIds: [tok] }])).logits;
  }
  return { logits, greedy: tokens, mtpLogits };
}

/**
 * Runs the MTP layer over pairs (hidden[i], nextTokens[i]) as one sequence at positions 0..n-1 with its own KV cache
 * (SGLang draft-extend convention, fixtures/README.md) and returns the logits of `wanted` positions.
 * @param hidden [n, hiddenSize] f32 final-norm hidden states of prompt positions 0..n-1
 * @throws InvalidRequestError when the model has no MTP layer or a token is outside the vocabulary
 */
function computeMtpLogits(model: CausalLM, hidden: Float32Array, nextTokens: readonly number[], wanted: readonly number[]): Map<number, Float32Array> {
  const mtp = mtpLayerOf(model);
  if (mtp === null) {
    throw new InvalidRequestError(`--mtp-next-tokens: the checkpoint has no MTP layer (no model.layers.${model.config.numHiddenLayers}.* nextn tensors for ${model.config.architectures.join(', ')})`, 'mtp-next-tokens');
  }
  const V = model.config.vocabSize;
  nextTokens.forEach((id, i) => {
    if (id >= V) throw new InvalidRequestError(`--mtp-next-tokens: id ${id} at position ${i} is outside the vocabulary [0, ${V})`, 'mtp-next-tokens');
  });
  const n = nextTokens.length;
  const ctx = new SimpleBatchContext(new KVPool(mtp.kvPoolLayout(), n + 1), 1, n);
  const batch = ctx.makeBatch([{ req: ctx.addReq(), inputIds: nextTokens }]);
  const out = mtp.forward({ ...batch, logitRows: Int32Array.from(wanted) }, hidden);
  return new Map(wanted.map((p, i) => [p, out.logits.slice(i * V, (i + 1) * V)]));
}

/** JSON text of a LogitsResult: {"logits": {"<pos>": [...]}, "greedy": [...]} (floats as shortest round-trip of f32). */
export function formatLogitsJson(res: LogitsResult): string {
  const parts: string[] = [];
  for (const [p, l] of [...res.logits].sort((a, b) => a[0] - b[0])) parts.push(`${JSON.stringify(String(p))}:[${Array.from(l, (x) => (Number.isFinite(x) ? String(x) : 'null')).join(',')}]`);
  let s = `{"logits":{${parts.join(',')}}`;
  if (res.greedy) s += `,"greedy":${JSON.stringify(res.greedy)}`;
  if (res.mtpLogits) {
    const m = [...res.mtpLogits].sort((a, b) => a[0] - b[0]).map(([p, l]) => `${JSON.stringify(String(p))}:[${Array.from(l, (x) => (Number.isFinite(x) ? String(x) : 'null')).join(',')}]`);
    s += `,"mtp_logits":{${m.join(',')}}`;
  }
  return s + '}';
}

/**
 * Entry of `tsglang logits`.
 * @returns 0 on success, 2 on a usage error, 1 on a load or runtime error (message on stderr)
 */
export async function run(argv: string[]): Promise<number> {
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(USAGE);
    return 0;
  }
  let args: LogitsArgs;
  try {
    args = parseLogitsArgs(argv);
  } catch (err) {
    process.stderr.write(`tsglang logits: ${(err as Error).message}\n\n${USAGE}`);
    return 2;
  }
  try {
    const logger = new Logger('info');
    let model: CausalLM;
    let close = (): void => {};
    if (args.tpSize > 1) {
      const tp = launchTpRanks({ modelPath: args.modelPath, overrides: args.overrideArgs ?? {}, tpSize: args.tpSize, epSize: args.epSize, ...(args.threadsGiven ? { threadsPerRank: args.threads } : {}), kernelEnv: readKernelEnv(), kvCacheDtype: args.kvCacheDtype, logger });
      const m = tp.model;
      model = { config: tp.rank0.config, kvPoolLayout: (dt) => m.kvPoolLayout(dt), forward: (b) => m.forward(b) };
      close = () => m.close();
    } else {
      model = loadModel(args.modelPath, { ops: createOps({ threads: args.threads, env: readKernelEnv() }), overrides: args.overrideArgs ?? {}, logger }).model;
    }
    let res: LogitsResult;
    try {
      res = computeLogits(model, args.inputIds, args.positions, args.greedy, args.mtpNextTokens, args.kvCacheDtype);
    } finally {
      close();
    }
    process.stdout.write(formatLogitsJson(res) + '\n');
    return 0;
  } catch (err) {
    if (err instanceof TsglangError) {
      process.stderr.write(`tsglang logits: error: ${err.message}\n`);
      return err instanceof InvalidRequestError ? 2 : 1;
    }
    throw err;
  }
}
