// `tsglang eval gsm8k | mmlu | gpqa [flags]`: the accuracy scripts of the seed documents
// (sglang.test.few_shot_gsm8k, benchmark/mmlu/bench_sglang.py, sglang.test.run_eval --eval-name gpqa) with their
// flags and printed lines. Resolves data files (local, else a short-timeout download, else a clear error),
// the server root and the model; the evals themselves live in bench/.
import { spawnSync } from 'node:child_process';
import { appendFileSync, existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import cliProgress from 'cli-progress';
import { readServerEnv } from '../config/index.js';
import { InvalidRequestError, TsglangError, makeDirs } from '../common/index.js';
import {
  DATA_URLS,
  SYSTEM_CLOCK,
  dataCacheDir,
  describeDownloadFailure,
  downloadCached,
  fetchJsonOrNull,
  formatHelp,
  loadGpqa,
  loadGsm8k,
  parseFlags,
  PyFloat,
  pyJsonDumps,
  pyMetricsRepr,
  runGpqa,
  runGsm8k,
  runMmlu,
  type CompletionApi,
  type FlagSpec,
} from '../bench/index.js';

const SERVER_FLAGS: FlagSpec[] = [
  { name: '--host', type: 'str', default: 'http://127.0.0.1', help: 'server host (with or without http://)' },
  { name: '--port', type: 'int', default: 30000, help: 'server port' },
  { name: '--base-url', type: 'str', help: 'server root URL (overrides --host/--port)' },
  { name: '--backend', type: 'str', default: 'srt', choices: ['srt', 'openai', 'vllm'], help: 'srt: SGLang /generate; openai, vllm: /v1/completions' },
  { name: '--model', type: 'str', help: 'model name for /v1/completions (default: first of /v1/models)' },
];

/** Flags of `tsglang eval gsm8k` (few_shot_gsm8k + benchmark/gsm8k/bench_sglang.py). */
export const GSM8K_FLAGS: readonly FlagSpec[] = [
  { name: '--num-shots', type: 'int', default: 5, help: 'few-shot examples (the first items of the test set)' },
  { name: '--data-path', type: 'str', default: 'test.jsonl', help: 'GSM8K test.jsonl (else downloaded)' },
  { name: '--num-questions', type: 'int', default: 200, help: 'questions evaluated' },
  { name: '--max-new-tokens', type: 'int', default: 512, help: 'tokens per answer' },
  { name: '--temperature', type: 'float', default: 0.0, help: 'sampling temperature' },
  { name: '--parallel', type: 'int', default: 128, help: 'requests in flight' },
  { name: '--result-file', type: 'str', help: 'JSONL file the result record is appended to (bench_sglang.py)' },
  ...SERVER_FLAGS,
];

/** Flags of `tsglang eval mmlu` (benchmark/mmlu/bench_sglang.py). */
export const MMLU_FLAGS: readonly FlagSpec[] = [
  { name: '--ntrain', type: 'int', default: 5, aliases: ['-k'], help: 'few-shot examples per subject' },
  { name: '--data_dir', type: 'str', default: 'data', aliases: ['-d', '--data-dir'], help: 'folder with dev/ and test/ CSVs' },
  { name: '--nsub', type: 'int', default: 60, help: 'first N subjects (sorted)' },
  { name: '--parallel', type: 'int', default: 64, help: 'requests in flight' },
  { name: '--result-file', type: 'str', default: 'result.jsonl', help: 'JSONL file the result record is appended to' },
  ...SERVER_FLAGS,
];

/** Flags of `tsglang eval gpqa` (sglang.test.run_eval). */
export const GPQA_FLAGS: readonly FlagSpec[] = [
  { name: '--base-url', type: 'str', help: 'server root URL (/v1 is appended)' },
  { name: '--host', type: 'str', default: '0.0.0.0', help: 'server host' },
  { name: '--port', type: 'int', default: 30000, help: 'server port' },
  { name: '--model', type: 'str', help: 'model name (default: first of /v1/models)' },
  { name: '--eval-name', type: 'str', default: 'gpqa', choices: ['gpqa'], help: 'eval (only gpqa here)' },
  { name: '--data-path', type: 'str', help: 'gpqa_diamond.csv (else downloaded)' },
  { name: '--num-examples', type: 'int', help: 'examples (Random(0).sample); default all' },
  { name: '--num-threads', type: 'int', default: 512, help: 'requests in flight per run' },
  { name: '--repeat', type: 'int', default: 1, help: 'full runs, in parallel' },
  { name: '--api', type: 'str', default: 'chat', choices: ['chat', 'completion'], help: 'chat or completions API' },
  { name: '--max-tokens', type: 'int', default: 2048, help: 'max_tokens per answer' },
  { name: '--temperature', type: 'float', default: 0.0, help: 'temperature' },
  { name: '--top-p', type: 'float', default: 1.0, help: 'top_p' },
  { name: '--top-k', type: 'int', help: 'top_k (extra body)' },
  { name: '--min-p', type: 'float', help: 'min_p (extra body)' },
  { name: '--reasoning-effort', type: 'str', help: 'reasoning_effort' },
  { name: '--chat-template-kwargs', type: 'str', help: 'JSON object sent as chat_template_kwargs' },
  { name: '--thinking-mode', type: 'str', choices: ['deepseek-v3', 'qwen-3', 'glm-45', 'kimi-k2'], help: 'turn thinking on in the chat template' },
];

function rootOf(v: Record<string, unknown>): string {
  if (typeof v.baseUrl === 'string' && v.baseUrl) return v.baseUrl.replace(/\/+$/, '');
  const host = String(v.host);
  return `${/^https?:\/\//.test(host) ? host : `http://${host}`}:${String(v.port)}`;
}

function headersFromEnv(): Record<string, string> {
  const key = process.env.OPENAI_API_KEY;
  return key && key !== 'EMPTY' ? { Authorization: `Bearer ${key}` } : {};
}

function bar(total: number): { onDone: () => void; stop: () => void } {
  if (!process.stderr.isTTY) return { onDone: () => {}, stop: () => {} };
  const b = new cliProgress.SingleBar({ stream: process.stderr, hideCursor: false }, cliProgress.Presets.legacy);
  b.start(total, 0);
  return { onDone: () => b.increment(), stop: () => b.stop() };
}

/**
 * A local data file: `path` when it exists, else the cached download of `url`.
 * @throws InvalidRequestError naming the file to provide when both fail (offline)
 */
async function dataFile(path: string | null, url: string, cacheName: string, what: string, flag: string): Promise<string> {
  if (path && existsSync(path)) return path;
  const why: string[] = [];
  const got = await downloadCached(url, join(dataCacheDir(readServerEnv().cacheDir), cacheName), 10_000, (w) => why.push(w));
  if (got) return got;
  throw new InvalidRequestError(
    `${what} not found: ${path ? `${path} does not exist and ` : ''}${describeDownloadFailure(url, why)}. Give ${flag} pointing to a local ${cacheName} (from ${url}).`,
    flag,
  );
}

async function firstModel(root: string, headers: Record<string, string>): Promise<string | null> {
  const list = (await fetchJsonOrNull(`${root}/v1/models`, { headers })) as { data?: { id?: string }[] } | null;
  return list?.data?.[0]?.id ?? null;
}

async function runGsm8kCli(argv: string[]): Promise<number> {
  const { values: v, help } = parseFlags(argv, GSM8K_FLAGS, 'tsglang eval gsm8k');
  if (help) {
    process.stdout.write(formatHelp('tsglang eval gsm8k', 'Few-shot GSM8K (sglang.test.few_shot_gsm8k).', GSM8K_FLAGS));
    return 0;
  }
  const path = await dataFile(v.dataPath as string, DATA_URLS.gsm8kTest, 'test.jsonl', 'GSM8K test set', '--data-path');
  const items = loadGsm8k(path);
  const root = rootOf(v);
  const headers = headersFromEnv();
  const api: CompletionApi = v.backend === 'srt' ? 'generate' : 'completions';
  const model = api === 'completions' ? ((v.model as string | null) ?? (await firstModel(root, headers))) : null;
  const numQuestions = Math.min(v.numQuestions as number, items.length);
  const progress = bar(numQuestions);
  const r = await runGsm8k(
    items,
    {
      numShots: v.numShots as number,
      numQuestions,
      maxNewTokens: v.maxNewTokens as number,
      parallel: v.parallel as number,
      temperature: v.temperature as number,
      root,
      api,
      model,
      headers,
    },
    SYSTEM_CLOCK,
    progress.onDone,
  );
  progress.stop();
  for (const line of r.lines) process.stdout.write(line + '\n');
  writeFileSync('tmp_output_gsm8k.txt', r.dump);
  if (v.resultFile) {
    const record = pyJsonDumps({
      task: 'gsm8k',
      backend: v.backend as string,
      num_gpus: 1,
      latency: new PyFloat(Math.round(r.latency * 1000) / 1000),
      accuracy: new PyFloat(Math.round(r.accuracy * 1000) / 1000),
      num_requests: numQuestions,
      other: { num_questions: numQuestions, parallel: v.parallel as number },
    });
    appendFileSync(v.resultFile as string, record + '\n');
  }
  return 0;
}

async function mmluDataDir(dir: string): Promise<string> {
  if (existsSync(join(dir, 'test'))) return dir;
  const cached = join(dataCacheDir(readServerEnv().cacheDir), 'mmlu', 'data');
  if (existsSync(join(cached, 'test'))) return cached;
  const why: string[] = [];
  const tar = await downloadCached(DATA_URLS.mmluTar, join(dataCacheDir(readServerEnv().cacheDir), 'mmlu', 'data.tar'), 10_000, (w) => why.push(w));
  if (tar) {
    makeDirs(join(dataCacheDir(readServerEnv().cacheDir), 'mmlu'));
    const r = spawnSync('tar', ['-xf', tar, '-C', join(dataCacheDir(readServerEnv().cacheDir), 'mmlu')], { stdio: 'inherit' });
    if (r.status === 0 && existsSync(join(cached, 'test'))) return cached;
    why.push('could not untar data.tar');
  }
  throw new InvalidRequestError(
    `MMLU data not found: ${dir}/test is missing and ${describeDownloadFailure(DATA_URLS.mmluTar, why)}. Give --data_dir DIR with dev/<subject>_dev.csv and test/<subject>_test.csv (Hendrycks data.tar, untarred).`,
    'data_dir',
  );
}

async function runMmluCli(argv: string[]): Promise<number> {
  const { values: v, help } = parseFlags(argv, MMLU_FLAGS, 'tsglang eval mmlu');
  if (help) {
    process.stdout.write(formatHelp('tsglang eval mmlu', 'MMLU k-shot (benchmark/mmlu/bench_sglang.py).', MMLU_FLAGS));
    return 0;
  }
  const dataDir = await mmluDataDir(v.dataDir as string);
  const root = rootOf(v);
  const headers = headersFromEnv();
  const api: CompletionApi = v.backend === 'srt' ? 'generate' : 'completions';
  const model = api === 'completions' ? ((v.model as string | null) ?? (await firstModel(root, headers))) : null;
  const r = await runMmlu(
    { ntrain: v.ntrain as number, nsub: v.nsub as number, parallel: v.parallel as number, dataDir, root, api, model, headers, backend: v.backend as string },
    SYSTEM_CLOCK,
  );
  for (const line of r.lines) process.stdout.write(line + '\n');
  appendFileSync(v.resultFile as string, r.resultRecord + '\n');
  return 0;
}

async function runGpqaCli(argv: string[]): Promise<number> {
  const { values: v, help } = parseFlags(argv, GPQA_FLAGS, 'tsglang eval gpqa');
  if (help) {
    process.stdout.write(formatHelp('tsglang eval gpqa', 'GPQA diamond (sglang.test.run_eval --eval-name gpqa).', GPQA_FLAGS));
    return 0;
  }
  const path = await dataFile((v.dataPath as string | null) ?? null, DATA_URLS.gpqaDiamond, 'gpqa_diamond.csv', 'GPQA diamond CSV', '--data-path');
  const rows = loadGpqa(path);
  const root = v.baseUrl ? String(v.baseUrl).replace(/\/+$/, '') : `http://${String(v.host)}:${String(v.port)}`;
  const baseUrl = `${root}/v1`;
  const headers = { Authorization: `Bearer ${process.env.OPENAI_API_KEY ?? 'EMPTY'}` };
  const model = (v.model as string | null) ?? (await firstModel(root, headers));
  if (model === null) throw new InvalidRequestError(`no model: GET ${root}/v1/models failed; give --model`, 'model');
  let kwargs: Record<string, unknown> = {};
  if (v.chatTemplateKwargs) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(v.chatTemplateKwargs as string);
    } catch {
      throw new InvalidRequestError('--chat-template-kwargs: must be a valid JSON object string', 'chat_template_kwargs');
    }
    if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
      throw new InvalidRequestError('--chat-template-kwargs: must be a JSON object', 'chat_template_kwargs');
    }
    kwargs = parsed as Record<string, unknown>;
  }
  const mode = v.thinkingMode as string | null;
  const thinking = mode === null ? {} : mode === 'deepseek-v3' || mode === 'kimi-k2' ? { thinking: true } : { enable_thinking: true };
  const templateKwargs = { ...thinking, ...kwargs };
  const extraBody: Record<string, unknown> = {};
  if (Object.keys(templateKwargs).length > 0) extraBody.chat_template_kwargs = templateKwargs;
  if (v.topK !== null) extraBody.top_k = v.topK;
  if (v.minP !== null) extraBody.min_p = v.minP;
  const numExamples = (v.numExamples as number | null) ?? null;
  const repeat = v.repeat as number;
  const progress = bar((numExamples ?? rows.length) * repeat);
  const r = await runGpqa(
    rows,
    {
      numExamples,
      numThreads: v.numThreads as number,
      repeat,
      baseUrl,
      headers,
      sampler: {
        model,
        maxTokens: v.maxTokens as number,
        temperature: v.temperature as number,
        topP: v.topP as number,
        reasoningEffort: (v.reasoningEffort as string | null) ?? null,
        extraBody,
        api: v.api as 'chat' | 'completion',
      },
    },
    SYSTEM_CLOCK,
    (line) => process.stderr.write(line + '\n'),
    progress.onDone,
  );
  progress.stop();
  for (const line of r.lines) process.stdout.write(line + '\n');
  const stem = `gpqa_${model.replace(/\//g, '_')}`;
  const report = `/tmp/${stem}.html`;
  process.stdout.write(`Writing report to ${report}\n`);
  writeFileSync(report, gpqaReport(r.runs[r.runs.length - 1].score, r.metrics));
  process.stdout.write(pyMetricsRepr(r.metrics) + '\n');
  const resultFile = `/tmp/${stem}.json`;
  writeFileSync(resultFile, JSON.stringify(r.metrics, null, 2));
  process.stdout.write(`Writing results to ${resultFile}\n`);
  return 0;
}

function gpqaReport(score: number, metrics: Record<string, unknown>): string {
  const esc = (s: string): string => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
  const rows = Object.entries(metrics)
    .map(([k, val]) => `<tr><td>${esc(k)}</td><td>${esc(String(val))}</td></tr>`)
    .join('\n');
  return `<!DOCTYPE html>\n<html><body>\n<h1>Metrics</h1>\n<table>\n<tr><th>Metric</th><th>Value</th></tr>\n<tr><td><b>Score</b></td><td>${score.toFixed(3)}</td></tr>\n${rows}\n</table>\n</body></html>\n`;
}

const USAGE = 'usage: tsglang eval gsm8k|mmlu|gpqa [flags]   (`tsglang eval <name> --help` lists the flags)\n';

/** Entry of `tsglang eval`. @returns exit code (0 ok, 1 failure, 2 usage error) */
export async function run(argv: string[]): Promise<number> {
  let [name, ...rest] = argv;
  // run_eval form: `tsglang eval --eval-name gpqa ...`
  if (name !== undefined && name.startsWith('--') && argv.includes('--eval-name')) {
    name = argv[argv.indexOf('--eval-name') + 1];
    rest = argv;
  }
  const table: Record<string, (a: string[]) => Promise<number>> = { gsm8k: runGsm8kCli, mmlu: runMmluCli, gpqa: runGpqaCli };
  if (name === undefined || name === '--help' || name === '-h') {
    process.stdout.write(USAGE);
    return name === undefined ? 2 : 0;
  }
  const fn = table[name];
  if (!fn) {
    process.stderr.write(`tsglang eval: unknown eval '${name}'\n${USAGE}`);
    return 2;
  }
  try {
    return await fn(rest);
  } catch (err) {
    if (err instanceof TsglangError) {
      process.stderr.write(`tsglang eval ${name}: ${err.message}\n`);
      return err instanceof InvalidRequestError && err.message.includes(': error: ') ? 2 : 1;
    }
    throw err;
  }
}
