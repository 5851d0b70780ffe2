// `tsglang eval mmlu`: benchmark/mmlu/bench_sglang.py — Hendrycks MMLU CSVs (data/dev, data/test), k-shot
// prompts capped at 1536 cl100k tokens, one generated token, first character compared with the answer letter.
// Owns prompts, scoring and the printed lines. Source: benchmark/mmlu/bench_sglang.py; bench-spec.md §3.
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { Tiktoken } from 'js-tiktoken/lite';
import cl100kBase from 'js-tiktoken/ranks/cl100k_base';
import { InvalidRequestError } from '../common/index.js';
import { PyFloat, pyFixed, pyJsonDumps } from './py_format.js';
import { completeRaw, mapWithConcurrency, readCsvTable, type CompletionApi } from './eval_common.js';
import type { Clock } from './request_funcs.js';

const CHOICES = ['A', 'B', 'C', 'D'];

let cl100k: Tiktoken | null = null;

/** Token count under tiktoken's cl100k_base (`tiktoken.encoding_for_model("gpt-3.5-turbo")`). */
export function cl100kCount(text: string): number {
  cl100k ??= new Tiktoken(cl100kBase);
  return cl100k.encode(text).length;
}

/** One MMLU row as prompt text: question, choices, answer letter (pandas display text). */
export type MmluRow = string[];

/** `" " + subject words`: `abstract_algebra` → ` abstract algebra`. */
export function formatSubject(subject: string): string {
  return subject
    .split('_')
    .map((w) => ' ' + w)
    .join('');
}

/**
 * One example: the question, `\n{L}. {choice}` per choice column, `\nAnswer:`, and ` {answer}\n\n` for a shot.
 * @param row [question, choice…, answer] (columns between the first and last are choices)
 */
export function mmluExample(row: MmluRow, includeAnswer: boolean): string {
  const k = row.length - 2;
  let s = row[0];
  for (let j = 0; j < k; j++) s += `\n${CHOICES[j]}. ${row[j + 1]}`;
  s += '\nAnswer:';
  if (includeAnswer) s += ` ${row[k + 1]}\n\n`;
  return s;
}

/** The header line plus the first k dev rows as shots. */
export function mmluFewShot(dev: readonly MmluRow[], subject: string, k: number): string {
  let s = `The following are multiple choice questions (with answers) about${formatSubject(subject)}.\n\n`;
  for (let i = 0; i < k; i++) s += mmluExample(dev[i], true);
  return s;
}

/** Flags of `tsglang eval mmlu`. */
export interface MmluOptions {
  ntrain: number;
  nsub: number;
  parallel: number;
  dataDir: string;
  root: string;
  api: CompletionApi;
  model: string | null;
  headers: Record<string, string>;
  backend: string;
}

/** What the run measured. */
export interface MmluResult {
  subjects: { subject: string; numQuestions: number; accuracy: number }[];
  accuracy: number;
  latency: number;
  preds: string[];
  labels: string[];
  lines: string[];
  /** The record bench_sglang.py appends to --result-file. */
  resultRecord: string;
}

/**
 * Subjects of `dataDir/test` (`<subject>_test.csv`), sorted.
 * @throws InvalidRequestError naming the folder to provide when it is missing
 */
export function mmluSubjects(dataDir: string): string[] {
  const testDir = join(dataDir, 'test');
  if (!existsSync(testDir)) {
    throw new InvalidRequestError(
      `MMLU data not found: ${testDir} is missing. Give --data_dir DIR holding dev/<subject>_dev.csv and test/<subject>_test.csv (Hendrycks data.tar: https://people.eecs.berkeley.edu/~hendrycks/data.tar)`,
      'data_dir',
    );
  }
  return readdirSync(testDir)
    .filter((f) => f.includes('_test.csv'))
    .map((f) => f.split('_test.csv')[0])
    .sort();
}

/**
 * Runs the eval and formats the per-subject and total lines.
 * @throws InvalidRequestError for missing data files; server failures reject
 */
export async function runMmlu(opts: MmluOptions, clock: Clock, onDone: () => void = () => {}): Promise<MmluResult> {
  const subjects = mmluSubjects(opts.dataDir).slice(0, opts.nsub);
  const prompts: string[] = [];
  const labels: string[] = [];
  const counts: number[] = [];
  for (const subject of subjects) {
    const devPath = join(opts.dataDir, 'dev', `${subject}_dev.csv`);
    if (!existsSync(devPath)) throw new InvalidRequestError(`MMLU data not found: ${devPath} is missing`, 'data_dir');
    const dev = readCsvTable(devPath, false).rows.slice(0, opts.ntrain);
    const test = readCsvTable(join(opts.dataDir, 'test', `${subject}_test.csv`), false).rows;
    counts.push(test.length);
    let k = Math.min(opts.ntrain, dev.length);
    let fewShot = mmluFewShot(dev, subject, k);
    while (cl100kCount(fewShot) > 1536) {
      k--;
      fewShot = mmluFewShot(dev, subject, k);
    }
    for (const row of test) {
      prompts.push(fewShot + mmluExample(row, false));
      labels.push(row[row.length - 1]);
    }
  }
  const tic = clock.now();
  const outs = await mapWithConcurrency(
    prompts,
    opts.parallel,
    (p) => completeRaw(opts.root, opts.api, p, { maxNewTokens: 1, stop: [], temperature: 0 }, opts.model, opts.headers),
    onDone,
  );
  const preds = outs.map((o) => {
    const s = o.text.trim();
    return s.length > 0 ? String.fromCodePoint(s.codePointAt(0)!) : '';
  });
  const latency = clock.now() - tic;
  const cors = preds.map((p, i) => p === labels[i]);
  const lines: string[] = [];
  const perSubject: MmluResult['subjects'] = [];
  let pt = 0;
  subjects.forEach((subject, si) => {
    const n = counts[si];
    const acc = cors.slice(pt, pt + n).filter(Boolean).length / n;
    perSubject.push({ subject, numQuestions: n, accuracy: acc });
    lines.push(`subject: ${subject}, #q:${n}, acc: ${pyFixed(acc, 3)}`);
    pt += n;
  });
  const accuracy = cors.filter(Boolean).length / cors.length;
  lines.push(`Total latency: ${pyFixed(latency, 3)}`);
  lines.push(`Average accuracy: ${pyFixed(accuracy, 3)}`);
  const resultRecord = pyJsonDumps({
    task: 'mmlu',
    backend: opts.backend,
    num_gpus: 1,
    latency: new PyFloat(Math.round(latency * 1000) / 1000),
    accuracy: new PyFloat(Math.round(accuracy * 1000) / 1000),
    num_requests: prompts.length,
    other: { nsub: opts.nsub, parallel: opts.parallel },
  });
  return { subjects: perSubject, accuracy, latency, preds, labels, lines, resultRecord };
}
