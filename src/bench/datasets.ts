// Benchmark datasets of sglang.bench_serving: random (ShareGPT text cut to drawn lengths), random-ids,
// sharegpt and generated-shared-prefix. Owns the length draws and their order on numpy's / Python's random
// streams (bench-spec.md §1.3–§1.4); knows nothing of HTTP.
// Sources: python/sglang/benchmark/datasets/{common,random,sharegpt,generated_shared_prefix}.py.
import { closeSync, existsSync, openSync, readSync, statSync } from 'node:fs';
import { InvalidRequestError } from '../common/index.js';
import type { BenchTokenizer } from './bench_tokenizer.js';
import type { NumpyRandomState, PythonRandom } from './py_random.js';

/** One benchmark request before it is sent (SGLang's `DatasetRow`). */
export interface DatasetRow {
  /** Text, or token ids (`--tokenize-prompt`). */
  prompt: string | number[];
  /** Input length counted for the result block: the drawn target (random*) or the tokenized length. */
  promptLen: number;
  /** Requested output tokens (`max_new_tokens`). */
  outputLen: number;
  /** Text part of promptLen (equals promptLen for text datasets). */
  textPromptLen: number;
  /** Vision part of promptLen (0 for text datasets). */
  visionPromptLen: number;
  /** Per-request fields merged over `--extra-request-body`. */
  extraRequestBody: Record<string, unknown>;
}

/** Dataset flags of bench-serving (SGLang names in camelCase). */
export interface DatasetOptions {
  datasetName: string;
  datasetPath: string;
  numPrompts: number;
  randomInputLen: number;
  randomOutputLen: number;
  randomRangeRatio: number;
  sharegptOutputLen: number | null;
  sharegptContextLen: number | null;
  applyChatTemplate: boolean;
  promptSuffix: string;
  tokenizePrompt: boolean;
  gspNumGroups: number;
  gspPromptsPerGroup: number;
  gspSystemPromptLen: number;
  gspQuestionLen: number;
  gspOutputLen: number;
  gspRangeRatio: number;
  gspOrdered: boolean;
}

/** The two seeded random streams of a run: numpy's global RandomState and Python's `random`. */
export interface BenchRandom {
  np: NumpyRandomState;
  py: PythonRandom;
}

/** Where datasets come from and where messages go (injectable for tests). */
export interface DatasetIo {
  /**
   * Returns a local path of the ShareGPT file, downloading it when possible, or null when none can be had
   * (offline). Called only when `--dataset-path` is empty or not a valid file.
   */
  fetchShareGpt(): Promise<string | null>;
  /** Why the last fetchShareGpt() returned null, in words (e.g. describeDownloadFailure); optional. */
  fetchFailure?(): string | null;
  /** Writes one line of console output (SGLang prints `#Input tokens: …` here). */
  print(line: string): void;
  /** Writes one warning line (stderr). */
  warn(line: string): void;
}

/**
 * Uniform integer lengths in [max(⌊fullLen·rangeRatio⌋, 1), fullLen] drawn from numpy's stream; all zeros
 * when fullLen ≤ 0 (SGLang `compute_random_lens`).
 * @param fullLen target length (tokens)
 * @param rangeRatio lower-bound ratio in [0, 1]
 * @param num number of lengths
 * @returns [num] lengths (tokens)
 */
export function computeRandomLens(rng: NumpyRandomState, fullLen: number, rangeRatio: number, num: number): number[] {
  if (fullLen <= 0) return new Array<number>(num).fill(0);
  return rng.randint(Math.max(Math.trunc(fullLen * rangeRatio), 1), fullLen + 1, num);
}

function sum(xs: readonly number[]): number {
  let s = 0;
  for (const x of xs) s += x;
  return s;
}

/**
 * Builds the benchmark rows for `opts.datasetName`.
 * @throws InvalidRequestError for an unknown dataset, a missing sharegpt file, or bad lengths
 */
export async function getDataset(
  opts: DatasetOptions,
  tokenizer: BenchTokenizer,
  rand: BenchRandom,
  io: DatasetIo,
): Promise<DatasetRow[]> {
  const name = opts.datasetName;
  if (name === 'random') return sampleRandomRequests(opts, tokenizer, rand, io, true);
  if (name === 'random-ids' || name.startsWith('random')) return sampleRandomRequests(opts, tokenizer, rand, io, false);
  if (name === 'sharegpt') return sampleShareGptRequests(opts, tokenizer, rand, io);
  if (name === 'generated-shared-prefix') return sampleGeneratedSharedPrefixRequests(opts, tokenizer, rand, io);
  throw new InvalidRequestError(
    `--dataset-name ${name} is not supported by tsglang (use random, random-ids, sharegpt or generated-shared-prefix)`,
    'dataset_name',
  );
}

function row(prompt: string | number[], promptLen: number, outputLen: number): DatasetRow {
  return { prompt, promptLen, outputLen, textPromptLen: promptLen, visionPromptLen: 0, extraRequestBody: {} };
}

/**
 * `random` / `random-ids`: lengths drawn first (all inputs, then all outputs); `random` fills each prompt with
 * ShareGPT token ids repeated / cut to the drawn length, `random-ids` (and `random` without a ShareGPT file)
 * with consecutive ids from a random offset. promptLen is the drawn length, not a re-tokenized count.
 */
async function sampleRandomRequests(
  opts: DatasetOptions,
  tokenizer: BenchTokenizer,
  rand: BenchRandom,
  io: DatasetIo,
  fromShareGpt: boolean,
): Promise<DatasetRow[]> {
  const n = opts.numPrompts;
  const inputLens = computeRandomLens(rand.np, opts.randomInputLen, opts.randomRangeRatio, n);
  const outputLens = computeRandomLens(rand.np, opts.randomOutputLen, opts.randomRangeRatio, n);
  const returnText = !opts.tokenizePrompt;
  const rows: DatasetRow[] = [];
  let conversations: [string, string][] | null = null;
  if (fromShareGpt) {
    const path = await resolveShareGptPath(opts.datasetPath, io);
    if (path === null) {
      io.warn(
        `No ShareGPT file for --dataset-name random: ${io.fetchFailure?.() ?? 'the download failed'}. Prompts are random token ids with the same `
          + 'length draws (give --dataset-path ShareGPT_V3_unfiltered_cleaned_split.json for ShareGPT text, as SGLang uses).',
      );
    } else {
      conversations = loadShareGptPairs(path);
      rand.py.shuffle(conversations);
    }
  }
  if (conversations !== null) {
    for (const [prompt] of conversations) {
      const i = rows.length;
      if (i === n) break;
      const ids = tokenizer.encode(prompt, true);
      if (ids.length === 0) continue;
      const target = inputLens[i];
      let inputIds: number[];
      if (ids.length > target) {
        inputIds = ids.slice(0, target);
      } else {
        const ratio = Math.floor((target + ids.length - 1) / ids.length);
        inputIds = [];
        for (let r = 0; r < ratio; r++) inputIds.push(...ids);
        inputIds.length = target;
      }
      rows.push(row(returnText ? tokenizer.decode(inputIds) : inputIds, target, outputLens[i]));
    }
  } else {
    const vocab = tokenizer.vocabSize;
    const offsets = rand.np.randint(0, vocab, n);
    for (let i = 0; i < n; i++) {
      const ids = new Array<number>(inputLens[i]);
      for (let j = 0; j < inputLens[i]; j++) ids[j] = (offsets[i] + i + j) % vocab;
      rows.push(row(returnText ? tokenizer.decode(ids) : ids, inputLens[i], outputLens[i]));
    }
  }
  io.print(`#Input tokens: ${sum(inputLens)}`);
  io.print(`#Output tokens: ${sum(outputLens)}`);
  return rows;
}

/**
 * `sharegpt`: real conversations (first user turn → prompt, first reply → output length), shuffled, pruned
 * (prompt or output < 2 tokens, or over `--sharegpt-context-len`).
 */
async function sampleShareGptRequests(
  opts: DatasetOptions,
  tokenizer: BenchTokenizer,
  rand: BenchRandom,
  io: DatasetIo,
): Promise<DatasetRow[]> {
  if (opts.sharegptOutputLen !== null && opts.sharegptOutputLen < 4) {
    throw new InvalidRequestError('--sharegpt-output-len must be at least 4', 'sharegpt_output_len');
  }
  const path = await resolveShareGptPath(opts.datasetPath, io);
  if (path === null) {
    throw new InvalidRequestError(
      `no ShareGPT file for --dataset-name sharegpt (bench_serving's default): ${io.fetchFailure?.() ?? 'the download failed'}. `
        + 'Give --dataset-path with a local ShareGPT_V3_unfiltered_cleaned_split.json, or run offline with --dataset-name random '
        + '(--random-input-len / --random-output-len; random token ids when no ShareGPT file is at hand)',
      'dataset_path',
    );
  }
  const pairs = loadShareGptPairs(path);
  rand.py.shuffle(pairs);
  const rows: DatasetRow[] = [];
  for (const [rawPrompt, completion] of pairs) {
    if (rows.length === opts.numPrompts) break;
    let prompt = rawPrompt;
    if (opts.promptSuffix) {
      const assistant = 'Assistant:';
      prompt = (prompt.endsWith(assistant) ? prompt.slice(0, -assistant.length) : prompt) + opts.promptSuffix + assistant;
    }
    if (opts.applyChatTemplate) {
      prompt = tokenizer.applyChatTemplate([{ role: 'user', content: prompt }]);
      const bos = tokenizer.bosToken;
      if (bos) prompt = prompt.split(bos).join('');
    }
    const promptLen = tokenizer.encode(prompt, true).length;
    const outputLen = opts.sharegptOutputLen ?? tokenizer.encode(completion, true).length;
    if (promptLen < 2 || outputLen < 2) continue;
    if (opts.sharegptContextLen && promptLen + outputLen > opts.sharegptContextLen) continue;
    rows.push(row(prompt, promptLen, outputLen));
  }
  io.print(`#Input tokens: ${sum(rows.map((r) => r.promptLen))}`);
  io.print(`#Output tokens: ${sum(rows.map((r) => r.outputLen))}`);
  return rows;
}

/**
 * `generated-shared-prefix`: `gspNumGroups` system prompts of random vocabulary tokens, each shared by
 * `gspPromptsPerGroup` questions; prompt = system + "\n\n" + question; rows shuffled unless `--gsp-ordered`.
 */
function sampleGeneratedSharedPrefixRequests(
  opts: DatasetOptions,
  tokenizer: BenchTokenizer,
  rand: BenchRandom,
  io: DatasetIo,
): DatasetRow[] {
  const groups = opts.gspNumGroups;
  const perGroup = opts.gspPromptsPerGroup;
  const systemLens = computeRandomLens(rand.np, opts.gspSystemPromptLen, opts.gspRangeRatio, groups);
  const questionLens = computeRandomLens(rand.np, opts.gspQuestionLen, opts.gspRangeRatio, groups * perGroup);
  const outputLens = computeRandomLens(rand.np, opts.gspOutputLen, opts.gspRangeRatio, groups * perGroup);
  const vocabIds = tokenizer.vocabIds();
  const genPrompt = (len: number): string => tokenizer.decode(rand.py.choices(vocabIds, len));
  const systemPrompts = systemLens.map((len) => genPrompt(len));
  const questions = questionLens.map((len) => genPrompt(len));
  const rows: DatasetRow[] = [];
  let totalIn = 0;
  let totalOut = 0;
  for (let g = 0; g < groups; g++) {
    for (let p = 0; p < perGroup; p++) {
      const prompt = `${systemPrompts[g]}\n\n${questions[g * perGroup + p]}`;
      const promptLen = tokenizer.encode(prompt, true).length;
      const outputLen = outputLens[g * perGroup + p];
      rows.push(row(prompt, promptLen, outputLen));
      totalIn += promptLen;
      totalOut += outputLen;
    }
  }
  if (!opts.gspOrdered) rand.py.shuffle(rows);
  io.print('');
  io.print('Generated shared prefix dataset statistics:');
  io.print(`Number of groups: ${groups}`);
  io.print(`Prompts per group: ${perGroup}`);
  io.print(`Total prompts: ${rows.length}`);
  io.print(`Total input tokens: ${totalIn}`);
  io.print(`Total output tokens: ${totalOut}`);
  return rows;
}

async function resolveShareGptPath(datasetPath: string, io: DatasetIo): Promise<string | null> {
  if (datasetPath && isJsonArrayFile(datasetPath)) return datasetPath;
  if (datasetPath) io.warn(`--dataset-path ${datasetPath} is not a readable JSON file; trying the ShareGPT download`);
  return io.fetchShareGpt();
}

function isJsonArrayFile(path: string): boolean {
  try {
    if (!existsSync(path) || !statSync(path).isFile()) return false;
    const fd = openSync(path, 'r');
    try {
      const buf = Buffer.alloc(64);
      const n = readSync(fd, buf, 0, 64, 0);
      return buf.subarray(0, n).toString('utf8').trimStart().startsWith('[');
    } finally {
      closeSync(fd);
    }
  } catch {
    return false;
  }
}

interface ShareGptEntry {
  conversations?: { value?: unknown }[];
  conversation?: { value?: unknown }[];
}

/**
 * Reads a ShareGPT-format JSON file (`[{id, conversations: [{from, value}, ...]}, ...]`; key `conversation`
 * also accepted) and keeps (first turn, second turn) of entries with at least two turns.
 * @throws InvalidRequestError if the file is not a JSON array of objects
 */
export function loadShareGptPairs(path: string): [string, string][] {
  const pairs: [string, string][] = [];
  forEachJsonArrayElement(path, (text) => {
    let entry: ShareGptEntry;
    try {
      entry = JSON.parse(text) as ShareGptEntry;
    } catch (err) {
      throw new InvalidRequestError(`${path}: bad JSON element (${(err as Error).message})`, 'dataset_path');
    }
    const turns = entry.conversations ?? entry.conversation ?? [];
    if (!Array.isArray(turns) || turns.length < 2) return;
    pairs.push([String(turns[0]?.value ?? ''), String(turns[1]?.value ?? '')]);
  });
  return pairs;
}

/**
 * Calls `onElement` with the JSON text of each element of a top-level JSON array, reading the file in 1 MiB
 * pieces (ShareGPT V3 is larger than V8's maximum string length, so it cannot be parsed in one go).
 * @throws InvalidRequestError if the file does not start with '[' or ends inside an element
 */
export function forEachJsonArrayElement(path: string, onElement: (json: string) => void): void {
  const fd = openSync(path, 'r');
  const chunk = Buffer.alloc(1 << 20);
  const decoder = new TextDecoder('utf-8');
  let started = false;
  let depth = 0;
  let inString = false;
  let escaped = false;
  let current = '';
  try {
    for (;;) {
      const n = readSync(fd, chunk, 0, chunk.length, null);
      if (n === 0) break;
      const text = decoder.decode(chunk.subarray(0, n), { stream: true });
      let segStart = depth > 0 ? 0 : -1;
      for (let i = 0; i < text.length; i++) {
        const c = text.charCodeAt(i);
        if (!started) {
          if (c === 0x5b /* [ */) started = true;
          else if (c > 0x20 && c !== 0xfeff) throw new InvalidRequestError(`${path}: not a JSON array`, 'dataset_path');
          continue;
        }
        if (depth === 0) {
          if (c === 0x7b /* { */ || c === 0x5b) {
            depth = 1;
            segStart = i;
            current = '';
          } else if (c === 0x5d /* ] */) {
            return;
          }
          continue;
        }
        if (inString) {
          if (escaped) escaped = false;
          else if (c === 0x5c) escaped = true;
          else if (c === 0x22) inString = false;
          continue;
        }
        if (c === 0x22) inString = true;
        else if (c === 0x7b || c === 0x5b) depth++;
        else if (c === 0x7d || c === 0x5d) {
          depth--;
          if (depth === 0) {
            onElement(current + text.slice(segStart, i + 1));
            current = '';
            segStart = -1;
          }
        }
      }
      if (depth > 0) {
        current += text.slice(segStart);
      }
    }
  } finally {
    closeSync(fd);
  }
  if (!started || depth > 0) throw new InvalidRequestError(`${path}: truncated JSON array`, 'dataset_path');
}
