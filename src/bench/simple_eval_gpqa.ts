// `tsglang eval gpqa`: sglang.test.run_eval --eval-name gpqa (simple-evals GPQA) — choices shuffled by
// Python's random.Random(0), one chat request per question, the first `Answer: X` in the reply scored against the
// correct letter; repeats and the printed summary lines of run_eval. Owns prompts, scoring and printing.
// Sources: python/sglang/test/simple_eval_gpqa.py, simple_eval_common.py, run_eval.py; bench-spec.md §4.
import { InvalidRequestError } from '../common/index.js';
import { PythonRandom } from './py_random.js';
import { pyFixed, pyFloatRepr, pyStrListRepr } from './py_format.js';
import { mapWithConcurrency, readCsvTable, sampleChat, type ChatSamplerParams } from './eval_common.js';
import { npMean, npStd } from './metrics.js';
import type { Clock } from './request_funcs.js';

/** One GPQA question with its four answers (columns of simple-evals' gpqa_diamond.csv). */
export interface GpqaRow {
  question: string;
  correct: string;
  incorrect: [string, string, string];
}

/** A question ready to ask: the permutation of [correct, inc1, inc2, inc3] drawn for it. */
export interface GpqaExample extends GpqaRow {
  permutation: number[];
}

/** simple-evals' multiple-choice prompt (QUERY_TEMPLATE_MULTICHOICE). */
export function gpqaPrompt(question: string, choices: readonly string[]): string {
  return (
    "Answer the following multiple choice question. The last line of your response should be of the following format: 'Answer: $LETTER' (without quotes) where LETTER is one of ABCD. Think step by step before answering.\n\n" +
    `${question}\n\nA) ${choices[0]}\nB) ${choices[1]}\nC) ${choices[2]}\nD) ${choices[3]}`
  );
}

/** ANSWER_PATTERN_MULTICHOICE `(?i)Answer\s*:\s*([A-D])`: the first match's letter, or null. */
export function extractGpqaAnswer(response: string): string | null {
  const m = /Answer\s*:\s*([A-D])/i.exec(response);
  return m ? m[1] : null;
}

/**
 * Reads gpqa_diamond.csv (header row; columns `Question`, `Correct Answer`, `Incorrect Answer 1..3`).
 * @throws InvalidRequestError naming a missing column
 */
export function loadGpqa(path: string): GpqaRow[] {
  const { columns, rows } = readCsvTable(path, true);
  const col = (name: string): number => {
    const i = columns.indexOf(name);
    if (i < 0) throw new InvalidRequestError(`${path}: no column '${name}' (expected simple-evals gpqa_diamond.csv)`, 'data_path');
    return i;
  };
  const q = col('Question');
  const c = col('Correct Answer');
  const i1 = col('Incorrect Answer 1');
  const i2 = col('Incorrect Answer 2');
  const i3 = col('Incorrect Answer 3');
  return rows.map((r) => ({ question: r[q], correct: r[c], incorrect: [r[i1], r[i2], r[i3]] }));
}

/**
 * GPQAEval's order: with `numExamples`, `Random(0).sample(rows, n)`; then one `sample(range(4), 4)` permutation
 * per example from the same generator (so n = all rows still reorders, and differs from leaving it unset).
 */
export function gpqaExamples(rows: readonly GpqaRow[], numExamples: number | null): GpqaExample[] {
  const rng = new PythonRandom(0);
  const chosen = numExamples ? rng.sample(rows, numExamples) : [...rows];
  return chosen.map((r) => ({ ...r, permutation: rng.sample([0, 1, 2, 3], 4) }));
}

/** The choices in shown order and the correct letter. */
export function gpqaChoices(ex: GpqaExample): { choices: string[]; correctLetter: string } {
  const base = [ex.correct, ...ex.incorrect];
  const choices = ex.permutation.map((i) => base[i]);
  return { choices, correctLetter: 'ABCD'[choices.indexOf(ex.correct)] };
}

/** Flags of `tsglang eval gpqa` (run_eval's). */
export interface GpqaOptions {
  numExamples: number | null;
  numThreads: number;
  repeat: number;
  /** API root with `/v1`. */
  baseUrl: string;
  sampler: ChatSamplerParams;
  headers: Record<string, string>;
}

/** One run over all examples. */
export interface GpqaRun {
  score: number;
  /** {chars, chars:std, score:std} as simple-evals aggregates them. */
  metrics: Record<string, number>;
  latency: number;
  completionTokens: number;
  responses: string[];
  scores: number[];
}

/** All runs plus the printed lines. */
export interface GpqaResult {
  runs: GpqaRun[];
  /** run_eval's final metrics dict (Python repr order). */
  metrics: Record<string, number | string | string[]>;
  lines: string[];
}

async function runOnce(examples: readonly GpqaExample[], opts: GpqaOptions, clock: Clock, log: (l: string) => void, onDone: () => void): Promise<GpqaRun> {
  const tic = clock.now();
  const outs = await mapWithConcurrency(
    examples,
    opts.numThreads,
    async (ex) => {
      const { choices, correctLetter } = gpqaChoices(ex);
      const r = await sampleChat(opts.baseUrl, gpqaPrompt(ex.question, choices), opts.sampler, opts.headers, clock, log);
      return { response: r.text, tokens: r.completionTokens, score: extractGpqaAnswer(r.text) === correctLetter ? 1 : 0 };
    },
    onDone,
  );
  const latency = clock.now() - tic;
  const chars = outs.map((o) => [...o.response].length); // Python len(): code points
  const scores = outs.map((o) => o.score);
  return {
    score: npMean(scores),
    metrics: { chars: npMean(chars), 'chars:std': npStd(chars), 'score:std': npStd(scores) },
    latency,
    completionTokens: outs.reduce((s, o) => s + o.tokens, 0),
    responses: outs.map((o) => o.response),
    scores,
  };
}

/** Python repr of run_eval's metrics dict. */
export function pyMetricsRepr(metrics: Record<string, number | string | string[]>): string {
  const parts = Object.entries(metrics).map(([k, v]) => {
    const val = Array.isArray(v) ? pyStrListRepr(v) : typeof v === 'string' ? `'${v}'` : pyFloatRepr(v);
    return `'${k}': ${val}`;
  });
  return `{${parts.join(', ')}}`;
}

/**
 * Runs `repeat` full passes (in parallel, as run_eval's thread pool does) and formats run_eval's lines.
 * @param log sampler retry messages (stderr)
 */
export async function runGpqa(rows: readonly GpqaRow[], opts: GpqaOptions, clock: Clock, log: (l: string) => void, onDone: () => void = () => {}): Promise<GpqaResult> {
  const examples = gpqaExamples(rows, opts.numExamples);
  const runs = await Promise.all(Array.from({ length: Math.max(1, opts.repeat) }, () => runOnce(examples, opts, clock, log, onDone)));
  const lines: string[] = [];
  const last = runs[runs.length - 1];
  let metrics: Record<string, number | string | string[]>;
  if (runs.length === 1) {
    const r = runs[0];
    metrics = { ...r.metrics, score: r.score, latency: r.latency };
    lines.push(`Total latency: ${pyFixed(r.latency, 3)} s`);
    lines.push(`Score: ${pyFixed(r.score, 3)}`);
    if (r.completionTokens > 0 && r.latency > 0) {
      metrics.output_throughput = r.completionTokens / r.latency;
      lines.push(`Output throughput: ${pyFixed(r.completionTokens / r.latency, 3)} token/s`);
    }
  } else {
    const meanScore = runs.reduce((s, r) => s + r.score, 0) / runs.length;
    const totalLatency = runs.reduce((s, r) => s + r.latency, 0);
    const meanLatency = totalLatency / runs.length;
    const tokens = runs.reduce((s, r) => s + r.completionTokens, 0);
    const scoreTexts = runs.map((r) => pyFixed(r.score, 3));
    lines.push('='.repeat(20));
    lines.push(`Repeat: ${runs.length}, mean: ${pyFixed(meanScore, 3)}`);
    lines.push(`Scores: ${pyStrListRepr(scoreTexts)}`);
    lines.push(`Mean latency: ${pyFixed(meanLatency, 3)} s`);
    lines.push('='.repeat(20));
    metrics = { ...last.metrics, scores: scoreTexts, mean_score: meanScore, latency: meanLatency };
    if (tokens > 0 && totalLatency > 0) {
      metrics.output_throughput = tokens / totalLatency;
      lines.push(`Output throughput: ${pyFixed(tokens / totalLatency, 3)} token/s`);
    }
  }
  return { runs, metrics, lines };
}
