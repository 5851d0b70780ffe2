// Shared pieces of the accuracy evals: pandas-like CSV reading, JSONL reading, a bounded worker pool, and the
// three ways the SGLang eval scripts reach a server (native /generate as the `sgl` frontend sends it,
// /v1/completions, and simple-evals' chat sampler). Knows nothing of any one eval's prompts or scoring.
// Sources: python/sglang/utils.py (read_jsonl, dump_state_text), python/sglang/lang/backend/runtime_endpoint.py,
// python/sglang/test/simple_eval_common.py (ChatCompletionSampler), pandas.read_csv defaults.
import { readFileSync } from 'node:fs';
import { InvalidRequestError } from '../common/index.js';
import { httpRequest } from './http_client.js';
import { pyFloatRepr } from './py_format.js';
import type { Clock } from './request_funcs.js';

/** The strings pandas.read_csv reads as NaN by default (`na_values` + `keep_default_na`). */
export const PANDAS_NA_STRINGS: ReadonlySet<string> = new Set([
  '', '#N/A', '#N/A N/A', '#NA', '-1.#IND', '-1.#QNAN', '-NaN', '-nan', '1.#IND', '1.#QNAN', '<NA>', 'N/A', 'NA', 'NULL',
  'NaN', 'None', 'n/a', 'nan', 'null',
]);

/**
 * Splits CSV text into records (RFC 4180: quoted cells may hold commas, quotes doubled, newlines).
 * Blank lines are skipped (pandas `skip_blank_lines`).
 * @returns rows of raw cell strings
 */
export function parseCsv(text: string): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let cell = '';
  let inQuotes = false;
  let cellQuoted = false;
  const endRow = (): void => {
    row.push(cell);
    if (!(row.length === 1 && row[0] === '' && !cellQuoted)) rows.push(row);
    row = [];
    cell = '';
    cellQuoted = false;
  };
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (inQuotes) {
      if (c === '"') {
        if (text[i + 1] === '"') {
          cell += '"';
          i++;
        } else inQuotes = false;
      } else cell += c;
      continue;
    }
    if (c === '"') {
      inQuotes = true;
      cellQuoted = true;
    } else if (c === ',') {
      row.push(cell);
      cell = '';
      cellQuoted = false;
    } else if (c === '\n' || c === '\r') {
      if (c === '\r' && text[i + 1] === '\n') i++;
      endRow();
    } else cell += c;
  }
  if (cell !== '' || row.length > 0 || cellQuoted) endRow();
  return rows;
}

/**
 * Converts raw CSV columns the way pandas shows them when formatted with `str`/`format`: NA strings become
 * `nan`; a column whose every non-NA cell is an integer prints as ints (as floats `3.0` if it also has NA);
 * a column whose every non-NA cell is a number prints as Python floats (`1.5`, `2.0`); other columns stay text.
 * @param rows [numRows][numCols] raw cells
 * @returns the same shape, as the text pandas would substitute into a prompt
 */
export function pandasCellTexts(rows: string[][]): string[][] {
  const numCols = Math.max(0, ...rows.map((r) => r.length));
  const out = rows.map((r) => [...r]);
  const INT = /^\s*[+-]?\d+\s*$/;
  const FLOAT = /^\s*[+-]?(\d+\.?\d*([eE][+-]?\d+)?|\.\d+([eE][+-]?\d+)?|inf|infinity)\s*$/i;
  for (let c = 0; c < numCols; c++) {
    const cells = rows.map((r) => r[c] ?? '');
    const isNa = cells.map((v) => PANDAS_NA_STRINGS.has(v));
    const vals = cells.filter((_, i) => !isNa[i]);
    const hasNa = isNa.some(Boolean);
    const allInt = vals.length > 0 && vals.every((v) => INT.test(v));
    const allNum = vals.length > 0 && vals.every((v) => FLOAT.test(v));
    for (let i = 0; i < rows.length; i++) {
      if (isNa[i]) out[i][c] = 'nan';
      else if (allInt && !hasNa) out[i][c] = String(BigInt(cells[i].trim()));
      else if (allNum) out[i][c] = pyFloatRepr(Number(cells[i].trim()));
    }
  }
  return out;
}

/**
 * Reads a CSV file as pandas would for these evals.
 * @param header true: the first row names the columns (simple-evals CSVs); false: `header=None` (MMLU)
 * @returns the column names (or indices as text) and the rows as records of display text
 * @throws InvalidRequestError if the file cannot be read
 */
export function readCsvTable(path: string, header: boolean): { columns: string[]; rows: string[][] } {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new InvalidRequestError(`cannot read ${path}: ${(err as Error).message}`, 'data_path');
  }
  if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
  const all = parseCsv(text);
  const columns = header ? (all.shift() ?? []) : (all[0] ?? []).map((_, i) => String(i));
  return { columns, rows: pandasCellTexts(all) };
}

/**
 * SGLang `read_jsonl`: one JSON object per line, lines starting with `#` skipped.
 * @throws InvalidRequestError naming the file and line on bad JSON
 */
export function readJsonl(path: string): Record<string, unknown>[] {
  const out: Record<string, unknown>[] = [];
  const lines = readFileSync(path, 'utf8').split('\n');
  lines.forEach((line, i) => {
    if (line.startsWith('#') || line.trim() === '') return;
    try {
      out.push(JSON.parse(line) as Record<string, unknown>);
    } catch (err) {
      throw new InvalidRequestError(`${path}:${i + 1}: bad JSON (${(err as Error).message})`, 'data_path');
    }
  });
  return out;
}

/**
 * Runs `fn` over `items` with at most `parallel` calls in flight; results keep the input order.
 * @param onDone called after each item completes (progress)
 */
export async function mapWithConcurrency<T, R>(
  items: readonly T[],
  parallel: number,
  fn: (item: T, index: number) => Promise<R>,
  onDone: () => void = () => {},
): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const i = next++;
      results[i] = await fn(items[i], i);
      onDone();
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(parallel, items.length)) }, worker));
  return results;
}

/** SGLang `dump_state_text`: each state framed by `=` rules with its index. */
export function formatStateDump(states: readonly string[]): string {
  return states.map((s, i) => `${'='.repeat(40)} ${i} ${'='.repeat(40)}\n${s}\n${'='.repeat(80)}\n\n`).join('');
}

/** One completion as the evals use it. */
export interface CompletionResult {
  text: string;
  completionTokens: number;
}

/** Sampling settings of a raw-prompt completion. */
export interface CompletionParams {
  maxNewTokens: number;
  stop: string[];
  temperature: number;
}

/** Which API raw-prompt evals use: SGLang native `/generate` (the `srt` backend) or OpenAI `/v1/completions`. */
export type CompletionApi = 'generate' | 'completions';

/**
 * Sends one raw prompt (no chat template). `/generate` carries the neutral sampling values the `sgl` frontend
 * sends explicitly (so server-side model defaults do not apply); `/v1/completions` the OpenAI equivalents.
 * @param root server root (`http://127.0.0.1:30000`)
 * @throws Error on a transport failure or a non-200 answer (the message has the status and body)
 */
export async function completeRaw(
  root: string,
  api: CompletionApi,
  prompt: string,
  params: CompletionParams,
  model: string | null,
  headers: Record<string, string>,
): Promise<CompletionResult> {
  if (api === 'generate') {
    const res = await httpRequest(`${root}/generate`, {
      headers,
      json: {
        text: prompt,
        sampling_params: {
          max_new_tokens: params.maxNewTokens,
          stop: params.stop,
          temperature: params.temperature,
          top_p: 1.0,
          top_k: -1,
          min_p: 0.0,
          frequency_penalty: 0.0,
          presence_penalty: 0.0,
          ignore_eos: false,
          skip_special_tokens: true,
          spaces_between_special_tokens: true,
        },
      },
    });
    const body = await res.text();
    if (res.status !== 200) throw new Error(`POST /generate: HTTP ${res.status}: ${body.slice(0, 500)}`);
    const out = JSON.parse(body) as { text?: string; meta_info?: { completion_tokens?: number } };
    return { text: out.text ?? '', completionTokens: out.meta_info?.completion_tokens ?? 0 };
  }
  const res = await httpRequest(`${root}/v1/completions`, {
    headers,
    json: {
      model: model ?? 'default',
      prompt,
      max_tokens: params.maxNewTokens,
      stop: params.stop.length > 0 ? params.stop : undefined,
      temperature: params.temperature,
      top_p: 1.0,
    },
  });
  const body = await res.text();
  if (res.status !== 200) throw new Error(`POST /v1/completions: HTTP ${res.status}: ${body.slice(0, 500)}`);
  const out = JSON.parse(body) as { choices?: { text?: string }[]; usage?: { completion_tokens?: number } };
  return { text: out.choices?.[0]?.text ?? '', completionTokens: out.usage?.completion_tokens ?? 0 };
}

/** Settings of simple-evals' chat sampler (run_eval flags). */
export interface ChatSamplerParams {
  model: string;
  maxTokens: number;
  temperature: number;
  topP: number;
  reasoningEffort: string | null;
  /** Extra body fields (chat_template_kwargs, top_k, min_p), merged at the top level as the openai client does. */
  extraBody: Record<string, unknown>;
  /** `/v1/completions` with the user text and stops [Question, Assistant:, <|separator|>] (run_eval --api completion). */
  api: 'chat' | 'completion';
}

/**
 * simple-evals' sampler: one non-streamed request; a 400 answer gives '' (no retry); other failures are
 * retried after 1, 2, 4, 8, 16, 32 s, then give ''. `message.content` only (reasoning is dropped).
 * @param baseUrl API root including `/v1`
 * @param clock sleeps between retries
 * @returns the text and completion tokens (0 when the server reports none)
 */
export async function sampleChat(
  baseUrl: string,
  userText: string,
  p: ChatSamplerParams,
  headers: Record<string, string>,
  clock: Clock,
  log: (line: string) => void,
): Promise<CompletionResult> {
  for (let trial = 0; ; trial++) {
    try {
      const body: Record<string, unknown> =
        p.api === 'chat'
          ? { model: p.model, messages: [{ role: 'user', content: userText }], temperature: p.temperature, top_p: p.topP, max_tokens: p.maxTokens }
          : { model: p.model, prompt: userText, temperature: p.temperature, top_p: p.topP, max_tokens: p.maxTokens, stop: ['Question', 'Assistant:', '<|separator|>'] };
      if (p.reasoningEffort !== null && p.api === 'chat') body.reasoning_effort = p.reasoningEffort;
      Object.assign(body, p.extraBody);
      const res = await httpRequest(`${baseUrl}/${p.api === 'chat' ? 'chat/completions' : 'completions'}`, { headers, json: body });
      const text = await res.text();
      if (res.status === 400) {
        log(`Bad Request Error ${text.slice(0, 300)}`);
        return { text: '', completionTokens: 0 };
      }
      if (res.status !== 200) throw new Error(`HTTP ${res.status}: ${text.slice(0, 300)}`);
      const out = JSON.parse(text) as {
        choices?: { message?: { content?: string | null }; text?: string }[];
        usage?: { completion_tokens?: number };
      };
      const choice = out.choices?.[0];
      const content = p.api === 'chat' ? (choice?.message?.content ?? '') : (choice?.text ?? '');
      return { text: content, completionTokens: out.usage?.completion_tokens ?? 0 };
    } catch (err) {
      if (trial >= 6) {
        log(`giving up after ${trial} retries: ${(err as Error).message}`);
        return { text: '', completionTokens: 0 };
      }
      const backoff = 2 ** trial;
      log(`Rate limit exception so wait and retry ${trial} after ${backoff} sec ${(err as Error).message}`);
      await clock.sleep(backoff);
    }
  }
}
