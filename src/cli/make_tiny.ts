// `tsglang make-tiny --arch minimax-m2 --out DIR [--seed S] [--preset tiny|bench|demo] [--num-shards N]
// [--json-model-override-args JSON]`: writes a deterministic tiny random checkpoint (config.json + FP8 safetensors
// shards + index) of a registered architecture, or with `--preset demo` the trained demo checkpoint of MiniMax-M2 or
// DeepSeek-V3.2 (executor/demo_weights.ts). Tokenizer files and the chat template are added by the tokenizer
// step below (owned by the HTTP-edge work, D2).
import { InvalidRequestError, Logger, TsglangError } from '../common/index.js';
import { parseOverrideArgs } from '../config/index.js';
import { DEMO_ARCHS, writeTinyCheckpoint } from '../executor/index.js';
import type { TinyCheckpoint } from '../executor/index.js';
import { MODEL_DEFINITIONS } from '../models/index.js';
import { tinyTokenizerFamily, tinyTokenizerSpec, writeTinyTokenizer } from '../tokenizer/index.js';
import { parseStrictFlags } from './cli_common.js';
import { EMBEDDED_CONTEXT_LENGTH, EMBEDDED_EOS_SHAPING, shapeEosWeights, writeDemoModelWithTokenizer } from './embedded_model.js';

const USAGE = `usage: tsglang make-tiny --arch ARCH --out DIR [--seed S] [--preset tiny|bench|demo] [--num-shards N]
                         [--json-model-override-args JSON] [--eos-shaping on|off]

  --arch ARCH      architecture: ${MODEL_DEFINITIONS.flatMap((d) => d.tinyArchNames).join(', ')}
  --out DIR        output directory (created if missing; existing files are overwritten)
  --seed S         PRNG seed (default 0)
  --preset NAME    size preset: tiny (tests) or bench (a few hundred million parameters, FP8; default tiny), or demo:
                   the trained demo model (${DEMO_ARCHS.join(', ')}; a few million parameters trained on a synthetic
                   corpus, not a language model; --seed and --eos-shaping do not apply)
  --num-shards N   safetensors shards (default 2; 1 writes a single model.safetensors)
  --json-model-override-args JSON   config.json fields replacing the preset's
  --eos-shaping on|off  on (default): the embedded default's EOS shaping, so sampled answers end (tens to a few hundred
                   tokens at temperature 1) and max_position_embeddings ${EMBEDDED_CONTEXT_LENGTH}; off: plain random weights (a request
                   without max_tokens then runs to the context length)
`;

/**
 * The EOS row's weight on the constant channel per family (EosShaping.eosWeight), calibrated as the embedded default's
 * (its EOS logit sits ~5 below the log-sum-exp of the others, so temperature-1 answers end after tens to hundreds of
 * tokens): the DeepSeek tiny presets' final hidden states have a larger RMS, so their EOS row needs a larger weight.
 */
const TINY_EOS_WEIGHT: Readonly<Record<string, number>> = { 'minimax-m2': EMBEDDED_EOS_SHAPING.eosWeight, 'deepseek-v32': 4.25, 'deepseek-v3': 4.25 };

/** Parsed flags of make-tiny. */
export interface MakeTinyArgs {
  readonly arch: string;
  readonly out: string;
  readonly seed: number;
  readonly preset: string;
  readonly numShards: number;
  readonly configOverrides: Record<string, unknown>;
  /** --eos-shaping (default true). */
  readonly eosShaping: boolean;
}

/**
 * Parses argv of `tsglang make-tiny`.
 * @throws InvalidRequestError naming the flag
 */
export function parseMakeTinyArgs(argv: string[]): MakeTinyArgs {
  const values = parseStrictFlags(argv, {
    arch: { type: 'string' },
    out: { type: 'string' },
    seed: { type: 'string', default: '0' },
    preset: { type: 'string', default: 'tiny' },
    'num-shards': { type: 'string', default: '2' },
    'json-model-override-args': { type: 'string' },
    'eos-shaping': { type: 'string', default: 'on' },
  });
  const shaping = String(values['eos-shaping']);
  if (shaping !== 'on' && shaping !== 'off') throw new InvalidRequestError(`--eos-shaping must be on or off, got '${shaping}'`, 'eos-shaping');
  if (typeof values.arch !== 'string') throw new InvalidRequestError('--arch is required', 'arch');
  if (typeof values.out !== 'string' || values.out === '') throw new InvalidRequestError('--out is required', 'out');
  const int = (flag: string, min: number): number => {
    const s = String(values[flag]);
    if (!/^\d+$/.test(s) || Number(s) < min) throw new InvalidRequestError(`--${flag} must be an integer >= ${min}, got '${s}'`, flag);
    return Number(s);
  };
  let configOverrides: Record<string, unknown>;
  try {
    configOverrides = parseOverrideArgs(values['json-model-override-args'] as string | undefined);
  } catch (err) {
    throw new InvalidRequestError((err as Error).message, 'json-model-override-args');
  }
  return { arch: values.arch, out: values.out, seed: int('seed', 0), preset: String(values.preset), numShards: int('num-shards', 1), configOverrides, eosShaping: shaping === 'on' };
}

/**
 * Entry of `tsglang make-tiny`.
 * @returns 0 on success, 2 on a usage error, 1 otherwise
 */
export async function run(argv: string[]): Promise<number> {
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(USAGE);
    return 0;
  }
  const logger = new Logger('info');
  try {
    const args = parseMakeTinyArgs(argv);
    if (args.preset === 'demo') {
      const files = writeDemoModelWithTokenizer(args.arch, args.out, { numShards: args.numShards, configOverrides: args.configOverrides });
      logger.info(`wrote demo ${args.arch} checkpoint to ${args.out}: ${files.join(', ')}`);
      return 0;
    }
    // Tokenizer step (D2): the tokenizer fixes vocab_size / bos / eos in config.json (flags still win).
    const tokSpec = MODEL_DEFINITIONS.some((d) => d.tinyArchNames.includes(args.arch)) ? tinyTokenizerSpec(tinyTokenizerFamily(args.arch)) : null;
    // EOS shaping (as the embedded default; embedded_model.ts says how): a random model would never stop sampling
    const shaped = args.eosShaping && tokSpec !== null;
    const ckpt: TinyCheckpoint = writeTinyCheckpoint(args.arch, args.out, {
      seed: args.seed, preset: args.preset, numShards: args.numShards,
      configOverrides: { ...(tokSpec?.configOverrides ?? {}), ...(shaped ? { max_position_embeddings: EMBEDDED_CONTEXT_LENGTH } : {}), ...args.configOverrides },
      ...(shaped ? { adjustValues: shapeEosWeights({ ...EMBEDDED_EOS_SHAPING, eosTokenId: tokSpec.eosTokenId, eosWeight: TINY_EOS_WEIGHT[tinyTokenizerFamily(args.arch)] ?? EMBEDDED_EOS_SHAPING.eosWeight }) } : {}),
    });
    // Tokenizer step (D2): tokenizer.json, tokenizer_config.json, generation_config.json, chat template.
    const tokFiles = tokSpec ? writeTinyTokenizer(ckpt.dir, tokSpec.family) : [];
    logger.info(`wrote tiny ${args.arch} checkpoint to ${ckpt.dir}: ${[...ckpt.files, ...tokFiles].join(', ')}`);
    return 0;
  } catch (err) {
    if (err instanceof TsglangError) {
      process.stderr.write(`tsglang make-tiny: error: ${err.message}\n`);
      return err instanceof InvalidRequestError ? 2 : 1;
    }
    if (typeof (err as NodeJS.ErrnoException).code === 'string') {
      // fs errors (ENOENT / EACCES / ENOTDIR / EROFS on --out): the message names the path.
      process.stderr.write(`tsglang make-tiny: error: ${(err as Error).message}\n`);
      return 1;
    }
    throw err;
  }
}
