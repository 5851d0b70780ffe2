// `tsglang eval gsm8k`: few-shot GSM8K as sglang.test.few_shot_gsm8k / benchmark/gsm8k/bench_sglang.py run
// it — the first k test questions (with answers) as shots, raw completion, stop at "Question", last number of
// the output compared with the label. Owns prompts, extraction and the printed lines; HTTP via eval_common.
// Source: python/sglang/test/few_shot_gsm8k.py; bench-spec.md §2.
import { InvalidRequestError } from '../common/index.js';
import { pyFixed } from './py_format.js';
import { completeRaw, formatStateDump, mapWithConcurrency, readJsonl, type CompletionApi } from './eval_common.js';
import type { Clock } from './request_funcs.js';

/** The value SGLang uses for "no number found / not an integer literal". */
export const INVALID_ANSWER = '-9999999';

/** One GSM8K item (`{"question", "answer"}` of grade_school_math/data/test.jsonl). */
export interface Gsm8kItem {
  question: string;
  answer: string;
}

/**
 * `"Question: " + question + "\nAnswer:"`, plus `" " + answer` for a shot.
 */
export function gsm8kExample(item: Gsm8kItem, includeAnswer: boolean): string {
  return `Question: ${item.question}\nAnswer:` + (includeAnswer ? ` ${item.answer}` : '');
}

/** The few-shot block: the first k items with answers, each followed by a blank line. */
export function gsm8kFewShot(items: readonly Gsm8kItem[], k: number): string {
  let s = '';
  for (let i = 0; i < k; i++) s += gsm8kExample(items[i], true) + '\n\n';
  return s;
}

/**
 * SGLang's `get_answer_value`: drop commas, take the last run of decimal digits (Unicode digits count, as
 * Python's `\d`), read it as a Python integer literal: all-zero runs are 0, other runs with a leading zero
 * (`007`) and runs with non-ASCII digits are syntax errors → INVALID. Signs and decimal points are not seen:
 * `-5` → 5, `18.00` → 0.
 * @returns the integer as canonical decimal text, or INVALID_ANSWER
 */
export function gsm8kAnswerValue(text: string): string {
  const runs = text.replace(/,/g, '').match(/\p{Nd}+/gu);
  if (!runs || runs.length === 0) return INVALID_ANSWER;
  const last = runs[runs.length - 1];
  if (!/^[0-9]+$/.test(last)) return INVALID_ANSWER;
  if (/^0+$/.test(last)) return '0';
  if (last.startsWith('0')) return INVALID_ANSWER;
  return last;
}

/** Flags of `tsglang eval gsm8k`. */
export interface Gsm8kOptions {
  numShots: number;
  numQuestions: number;
  maxNewTokens: number;
  parallel: number;
  temperature: number;
  /** Server root, e.g. `http://127.0.0.1:30000`. */
  root: string;
  api: CompletionApi;
  model: string | null;
  headers: Record<string, string>;
}

/** What the run measured. */
export interface Gsm8kResult {
  accuracy: number;
  invalid: number;
  /** Seconds for the whole batch. */
  latency: number;
  outputThroughput: number;
  preds: string[];
  labels: string[];
  /** The printed lines. */
  lines: string[];
  /** `tmp_output_gsm8k.txt` contents (prompt + answer per question). */
  dump: string;
}

/**
 * Loads the GSM8K JSONL.
 * @throws InvalidRequestError if an item lacks question/answer
 */
export function loadGsm8k(path: string): Gsm8kItem[] {
  return readJsonl(path).map((o, i) => {
    if (typeof o.question !== 'string' || typeof o.answer !== 'string') {
      throw new InvalidRequestError(`${path}: item ${i} has no "question"/"answer" strings`, 'data_path');
    }
    return { question: o.question, answer: o.answer };
  });
}

/**
 * Runs the eval and formats SGLang's four result lines.
 * @throws InvalidRequestError for more shots than items; any server failure rejects (as run_batch raises)
 */
export async function runGsm8k(items: readonly Gsm8kItem[], opts: Gsm8kOptions, clock: Clock, onDone: () => void = () => {}): Promise<Gsm8kResult> {
  if (opts.numShots > items.length) throw new InvalidRequestError(`--num-shots ${opts.numShots} exceeds the ${items.length} items`, 'num_shots');
  const fewShot = gsm8kFewShot(items, opts.numShots);
  const selected = items.slice(0, opts.numQuestions);
  const labels = selected.map((it) => gsm8kAnswerValue(it.answer));
  const bad = labels.findIndex((l) => l === INVALID_ANSWER);
  if (bad >= 0) throw new InvalidRequestError(`item ${bad}: the reference answer has no integer`, 'data_path');
  const prompts = selected.map((it) => fewShot + gsm8kExample(it, false));
  const tic = clock.now();
  const outs = await mapWithConcurrency(
    prompts,
    opts.parallel,
    (prompt) =>
      completeRaw(opts.root, opts.api, prompt, { maxNewTokens: opts.maxNewTokens, stop: ['Question', 'Assistant:', '<|separator|>'], temperature: opts.temperature }, opts.model, opts.headers),
    onDone,
  );
  const latency = clock.now() - tic;
  const preds = outs.map((o) => gsm8kAnswerValue(o.text));
  const n = preds.length;
  const accuracy = preds.filter((p, i) => p === labels[i]).length / n;
  const invalid = preds.filter((p) => p === INVALID_ANSWER).length / n;
  const tokens = outs.reduce((s, o) => s + o.completionTokens, 0);
  const outputThroughput = tokens / latency;
  const lines = [
    `Accuracy: ${pyFixed(accuracy, 3)}`,
    `Invalid: ${pyFixed(invalid, 3)}`,
    `Latency: ${pyFixed(latency, 3)} s`,
    `Output throughput: ${pyFixed(outputThroughput, 3)} token/s`,
  ];
  const dump = formatStateDump(prompts.map((p, i) => p + outs[i].text));
  return { accuracy, invalid, latency, outputThroughput, preds, labels, lines, dump };
}
