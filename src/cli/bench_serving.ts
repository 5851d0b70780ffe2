// `tsglang bench-serving [flags]`: wires bench/bench_serving.ts to the real world — the tokenizer
// (tokenizer/), the wall clock, a progress bar on stderr, the ShareGPT download cache and auth headers.
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import cliProgress from 'cli-progress';
import { readServerEnv } from '../config/index.js';
import { TsglangError, UnsupportedFeatureError, InvalidRequestError } from '../common/index.js';
import { ChatPromptBuilder, loadTokenizer, type Tokenizer } from '../tokenizer/index.js';
import {
  BENCH_SERVING_FLAGS,
  DATA_URLS,
  SYSTEM_CLOCK,
  dataCacheDir,
  describeDownloadFailure,
  downloadCached,
  formatHelp,
  parseBenchServingArgs,
  runBenchServing,
  type BenchChatMessage,
  type BenchTokenizer,
  type ProgressBar,
  type TokenizerSources,
} from '../bench/index.js';

/**
 * Adapts tsglang's tokenizer to the bench's interface: encode with/without BOS, decode keeping special
 * tokens, the base vocabulary (ids below the first trailing run of special added tokens), and the chat prompt
 * the server would build (tokenizer/chat_template.ts: the model's Jinja template or the DeepSeek-V3.2 encoder).
 * @param tok a loaded tokenizer
 * @param dir its directory (for the chat prompt builder; a directory it cannot read means no chat template)
 * @returns the adapter; its `applyChatTemplate` throws UnsupportedFeatureError when the directory has no chat
 *   template (and is not DeepSeek-V3.2)
 */
export function benchTokenizerOf(tok: Tokenizer, dir: string): BenchTokenizer {
  let base = tok.vocabSize;
  while (base > 0 && tok.isSpecialToken(base - 1)) base--;
  let builder: ChatPromptBuilder | null = null;
  try {
    builder = ChatPromptBuilder.fromModelDir(dir);
  } catch {
    builder = null;
  }
  const hasChatTemplate = builder !== null && (builder.kind === 'dsv32' || builder.templateSource !== null);
  return {
    vocabSize: base,
    bosToken: tok.bosToken,
    hasChatTemplate,
    encode: (text, addSpecialTokens) => tok.encode(text, { addSpecialTokens }),
    decode: (ids) => tok.decode(ids, { skipSpecialTokens: false }),
    applyChatTemplate: (messages: readonly BenchChatMessage[]) => {
      if (builder === null || !hasChatTemplate) throw new UnsupportedFeatureError('--apply-chat-template: the tokenizer has no chat template');
      return builder.build({ messages: messages.map((m) => ({ role: m.role, content: m.content })) }).text;
    },
    vocabIds: () => Array.from({ length: base }, (_, i) => i),
  };
}

function isDir(p: string): boolean {
  try {
    return statSync(p).isDirectory() && existsSync(join(p, 'tokenizer.json'));
  } catch {
    return false;
  }
}

/**
 * Picks the tokenizer directory: --tokenizer, else the server's tokenizer path (/model_info), else --model.
 * @throws InvalidRequestError naming --tokenizer when none is a local directory with tokenizer.json
 */
export function resolveTokenizerDir(src: TokenizerSources): string {
  if (src.tokenizer !== null) {
    if (isDir(src.tokenizer)) return src.tokenizer;
    throw new InvalidRequestError(
      `--tokenizer ${src.tokenizer}: not a local directory with tokenizer.json (tsglang downloads no tokenizers)`,
      'tokenizer',
    );
  }
  for (const cand of [src.serverTokenizerPath, src.model]) if (cand && isDir(cand)) return cand;
  throw new InvalidRequestError(
    `no tokenizer: model '${src.model}' is not a local directory and the server reported no local tokenizer path; give --tokenizer DIR (a folder with tokenizer.json)`,
    'tokenizer',
  );
}

/**
 * Authorization from OPENAI_API_KEY (Bearer) or API_KEY (raw), then `--header KEY=VALUE` pairs (later pairs
 * win; key and value trimmed). Source: python/sglang/bench_serving.py (headers of the request functions).
 * @throws InvalidRequestError (param `header`) for a pair without `=` or starting with `=`
 */
export function requestHeaders(env: NodeJS.ProcessEnv, pairs: readonly string[] | null): Record<string, string> {
  const headers: Record<string, string> = {};
  if (env.OPENAI_API_KEY) headers.Authorization = `Bearer ${env.OPENAI_API_KEY}`;
  else if (env.API_KEY) headers.Authorization = env.API_KEY;
  for (const p of pairs ?? []) {
    const eq = p.indexOf('=');
    if (eq <= 0) throw new InvalidRequestError(`--header ${p}: expected KEY=VALUE`, 'header');
    headers[p.slice(0, eq).trim()] = p.slice(eq + 1).trim();
  }
  return headers;
}

function progressBar(total: number): ProgressBar {
  const bar = new cliProgress.SingleBar(
    { stream: process.stderr, format: '{percentage}%|{bar}| {value}/{total} [{duration_formatted}<{eta_formatted}]', hideCursor: false },
    cliProgress.Presets.legacy,
  );
  bar.start(total, 0);
  return { increment: () => bar.increment(), stop: () => bar.stop() };
}

/** Entry of `tsglang bench-serving`. @returns exit code (0 ok, 1 failure, 2 usage error) */
export async function run(argv: string[]): Promise<number> {
  let args;
  try {
    args = parseBenchServingArgs(argv);
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n`);
    return 2;
  }
  if (args === null) {
    process.stdout.write(formatHelp('tsglang bench-serving', 'Benchmark the online serving throughput (sglang.bench_serving).', BENCH_SERVING_FLAGS));
    return 0;
  }
  const why: string[] = [];
  try {
    await runBenchServing(args, {
      clock: SYSTEM_CLOCK,
      loadTokenizer: async (src) => {
        const dir = resolveTokenizerDir(src);
        return benchTokenizerOf(loadTokenizer(dir), dir);
      },
      print: (line) => process.stdout.write(line + '\n'),
      warn: (line) => process.stderr.write(line + '\n'),
      progress: progressBar,
      // A failed download is reported by the dataset in one line (it falls back to random ids for `random`).
      fetchShareGpt: () => {
        why.length = 0;
        return downloadCached(DATA_URLS.sharegpt, join(dataCacheDir(readServerEnv().cacheDir), 'ShareGPT_V3_unfiltered_cleaned_split.json'), 10_000, (w) => why.push(w));
      },
      fetchFailure: () => describeDownloadFailure(DATA_URLS.sharegpt, why),
      headers: requestHeaders(process.env, args.header),
      isInCi: ['true', '1'].includes((process.env.SGLANG_IS_IN_CI ?? 'false').toLowerCase()),
      today: new Date(),
    });
    return 0;
  } catch (err) {
    if (err instanceof TsglangError) {
      process.stderr.write(`tsglang bench-serving: ${err.message}\n`);
      return 1;
    }
    throw err;
  }
}
