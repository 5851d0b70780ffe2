// Helpers shared by the serving_* handlers: request ids, wire→engine sampling params, aggregation of engine
// outputs per choice, logprob conversion. No HTTP here.
import { randomUUID } from 'node:crypto';
import { setMaxListeners } from 'node:events';
import { InvalidRequestError } from '../common/index.js';
import type { FinishReason, GenerateOutput, SamplingParamsInput } from '../engine/index.js';
import { usageInfo } from '../protocol/index.js';
import { MAX_SAMPLES_PER_REQUEST } from '../sampling/index.js';
import type { OpenAIFinishReason, UsageInfo, WireFinishReason } from '../protocol/index.js';

/**
 * The weight version the server reports (SGLang's `--weight-version`, default "default"; tsglang has no weight
 * updates): /model_info, /generate `meta_info.weight_version`, and the `metadata` of OpenAI responses.
 */
export const WEIGHT_VERSION = 'default';

/** A request id as SGLang makes them (uuid4 hex). */
export function newRid(): string {
  return randomUUID().replace(/-/g, '');
}

/**
 * The ids of one prompt's samples, as SGLang's `meta_info.id` reports them: the request's own id for a single
 * sample; with n > 1 the tokenizer manager sends every sample with a fresh uuid hex (io_struct `regenerate_rid`),
 * whatever rid the request gave.
 * @param rid the request's id (given or generated)
 * @param n samples of the prompt
 * @returns a function from sample index to id
 */
export function sampleIds(rid: string, n: number): (index: number) => string {
  if (n <= 1) return () => rid;
  const ids = Array.from({ length: n }, () => newRid());
  return (index) => ids[index] ?? rid;
}

/** Seconds since the epoch (OpenAI `created`). */
export function nowSeconds(): number {
  return Math.floor(Date.now() / 1000);
}

/** Sampling fields common to the OpenAI chat and completion requests (snake_case, as parsed). */
export interface OpenAISamplingFields {
  temperature?: number | null;
  top_p?: number | null;
  top_k?: number | null;
  min_p?: number | null;
  repetition_penalty?: number | null;
  frequency_penalty?: number | null;
  presence_penalty?: number | null;
  n?: number | null;
  stop?: string | string[] | null;
  stop_token_ids?: number[] | null;
  seed?: number | null;
  ignore_eos?: boolean | null;
  no_stop_trim?: boolean | null;
  skip_special_tokens?: boolean | null;
  min_tokens?: number | null;
  logit_bias?: Record<string, number> | null;
  response_format?: { type: string; json_schema?: { schema?: unknown } | null } | null;
  json_schema?: string | null;
  regex?: string | null;
  ebnf?: string | null;
}

/**
 * The grammar fields of an OpenAI request (SGLang protocol.py to_sampling_params): `regex` / `ebnf` as given,
 * `response_format` json_schema → its schema as JSON text, json_object → `{"type": "object"}`, structural_tag → the
 * whole response_format object as JSON text; `text` (or none) → no constraint.
 * @throws InvalidRequestError for an unknown response_format type or a json_schema without `json_schema.schema`
 */
export function openaiGrammarFields(r: OpenAISamplingFields): Pick<SamplingParamsInput, 'jsonSchema' | 'regex' | 'ebnf' | 'structuralTag'> {
  const out: { jsonSchema?: string; regex?: string; ebnf?: string; structuralTag?: string } = {};
  if (r.regex !== null && r.regex !== undefined) out.regex = r.regex;
  if (r.ebnf !== null && r.ebnf !== undefined) out.ebnf = r.ebnf;
  if (r.json_schema !== null && r.json_schema !== undefined) out.jsonSchema = r.json_schema;
  const rf = r.response_format;
  if (rf && rf.type !== 'text') {
    if (rf.type === 'json_schema') {
      if (!rf.json_schema || rf.json_schema.schema === undefined) {
        throw new InvalidRequestError('response_format.json_schema.schema is required when response_format.type is "json_schema"', 'response_format');
      }
      out.jsonSchema = JSON.stringify(rf.json_schema.schema);
    } else if (rf.type === 'json_object') out.jsonSchema = '{"type": "object"}';
    else if (rf.type === 'structural_tag') out.structuralTag = JSON.stringify(rf);
    else throw new InvalidRequestError(`Invalid response_format type: '${rf.type}' (expected text, json_object, json_schema or structural_tag)`, 'response_format');
  }
  return out;
}

/**
 * OpenAI request fields → engine sampling params (`to_sampling_params` in SGLang's protocol.py). Unset
 * temperature/top_p/top_k/min_p/repetition_penalty take the model's generation_config values when
 * `modelDefaults` is given (--sampling-defaults model), else the engine's SGLang defaults.
 * @param maxNewTokens max_completion_tokens ?? max_tokens (null = unlimited, clamped by the engine)
 */
export function openaiSamplingParams(
  r: OpenAISamplingFields,
  maxNewTokens: number | null,
  modelDefaults: Readonly<Record<string, number>> | null,
): SamplingParamsInput {
  const d = modelDefaults ?? {};
  return {
    maxNewTokens,
    minNewTokens: r.min_tokens ?? null,
    temperature: r.temperature ?? d.temperature ?? null,
    topP: r.top_p ?? d.topP ?? null,
    topK: r.top_k ?? d.topK ?? null,
    minP: r.min_p ?? d.minP ?? null,
    repetitionPenalty: r.repetition_penalty ?? d.repetitionPenalty ?? null,
    frequencyPenalty: r.frequency_penalty ?? null,
    presencePenalty: r.presence_penalty ?? null,
    n: r.n ?? null,
    stop: r.stop ?? null,
    stopTokenIds: r.stop_token_ids ?? null,
    seed: r.seed ?? null,
    ignoreEos: r.ignore_eos ?? null,
    noStopTrim: r.no_stop_trim ?? null,
    skipSpecialTokens: r.skip_special_tokens ?? null,
    logitBias: r.logit_bias ?? null,
    ...openaiGrammarFields(r),
  };
}

/** Everything one choice produced, accumulated over its outputs. */
export interface ChoiceResult {
  index: number;
  text: string;
  outputIds: number[];
  finishReason: FinishReason | null;
  promptTokens: number;
  completionTokens: number;
  cachedTokens: number;
  numRetractions: number;
  /** Speculative counters (when on). */
  spec?: { verifyCt: number; acceptedTokens: number; numDraftTokens: number };
  e2eLatencyS: number | undefined;
  outputTokenLogprobs: [number, number][];
  outputTopLogprobs: [number, number][][];
  inputTokenLogprobs: [number | null, number][] | null;
  inputTopLogprobs: ([number, number][] | null)[] | null;
}

/** A fresh accumulator for choice `index`. */
export function emptyChoice(index: number): ChoiceResult {
  return {
    index, text: '', outputIds: [], finishReason: null, promptTokens: 0, completionTokens: 0, cachedTokens: 0,
    numRetractions: 0, e2eLatencyS: undefined, outputTokenLogprobs: [], outputTopLogprobs: [], inputTokenLogprobs: null,
    inputTopLogprobs: null,
  };
}

/** Adds one engine output (a delta when streaming, everything otherwise) to its choice accumulator. */
export function accumulate(c: ChoiceResult, o: GenerateOutput): void {
  c.text += o.text;
  for (const id of o.outputIds) c.outputIds.push(id);
  c.promptTokens = o.promptTokens;
  c.completionTokens = o.completionTokens;
  c.cachedTokens = o.cachedTokens;
  c.numRetractions = o.numRetractions;
  if (o.spec) c.spec = { ...o.spec };
  if (o.finished) { c.finishReason = o.finishReason; c.e2eLatencyS = o.e2eLatencyS; }
  const lp = o.logprobs;
  if (lp) {
    for (const e of lp.outputTokenLogprobs) c.outputTokenLogprobs.push([e[0], e[1]]);
    for (const t of lp.outputTopLogprobs) c.outputTopLogprobs.push(t.map((e) => [e[0], e[1]]));
    if (lp.inputTokenLogprobs) c.inputTokenLogprobs = lp.inputTokenLogprobs.map((e) => [e[0], e[1]]);
    if (lp.inputTopLogprobs) c.inputTopLogprobs = lp.inputTopLogprobs.map((t) => (t ? t.map((e) => [e[0], e[1]]) : null));
  }
}

/**
 * Drains a non-streaming engine iterator into one accumulator per choice, ordered by index.
 * @throws whatever the engine throws (validation errors reject the first next())
 */
export async function collectChoices(outputs: AsyncIterable<GenerateOutput>): Promise<ChoiceResult[]> {
  const byIndex = new Map<number, ChoiceResult>();
  for await (const o of outputs) {
    let c = byIndex.get(o.index);
    if (!c) { c = emptyChoice(o.index); byIndex.set(o.index, c); }
    accumulate(c, o);
  }
  return [...byIndex.values()].sort((a, b) => a.index - b.index);
}

/** What an OpenAI `usage` is computed from, per choice. */
export interface ChoiceTokens {
  readonly index: number;
  readonly promptTokens: number;
  readonly completionTokens: number;
  readonly cachedTokens: number;
}

/**
 * `usage` over the choices of a response (SGLang v0.5.x UsageProcessor): prompt tokens once per prompt (the
 * choices whose index is a multiple of n), completion tokens of every choice, and with --enable-cache-report the
 * cached tokens of every choice (reported only when some were cached).
 * @param n samples per prompt (the request's n)
 * @param cacheReport --enable-cache-report
 */
export function usageOfChoices(choices: Iterable<ChoiceTokens>, n: number, cacheReport: boolean): UsageInfo {
  let prompt = 0;
  let completion = 0;
  let cached = 0;
  for (const c of choices) {
    if (c.index % Math.max(n, 1) === 0) prompt += c.promptTokens;
    completion += c.completionTokens;
    cached += c.cachedTokens;
  }
  return usageInfo(prompt, completion, cacheReport ? cached : null);
}

/** Engine finish reason → OpenAI finish_reason (stop / length / abort). */
export function openaiFinishReason(f: FinishReason | null): OpenAIFinishReason | null {
  if (f === null) return null;
  return f.type;
}

/** The `matched_stop` of an OpenAI choice: the stop token id or string, else null. */
export function matchedStop(f: FinishReason | null): number | string | null {
  return f !== null && f.type === 'stop' ? f.matched : null;
}

/** Engine finish reason → `meta_info.finish_reason` JSON. */
export function wireFinishReason(f: FinishReason | null): WireFinishReason {
  if (f === null) return null;
  switch (f.type) {
    case 'stop': return { type: 'stop', matched: f.matched };
    case 'length': return { type: 'length', length: f.length };
    case 'abort': return { type: 'abort', message: f.message, ...(f.statusCode !== undefined ? { status_code: f.statusCode } : {}), ...(f.errType !== undefined ? { err_type: f.errType } : {}) };
  }
}

/**
 * The most engine requests one HTTP request may fan out to: prompts of a batch × `n` samples each (/generate,
 * /v1/completions, and `n` of /v1/chat/completions). SGLang has no such limit; tsglang's keeps one request from
 * taking the server's memory and queue (a 20,000-prompt batch, or `n: 100000`): past it the request is refused
 * with a 400 before any work starts (sampling/MAX_SAMPLES_PER_REQUEST, 4096, also bounds `n` in the engine).
 */
export const MAX_REQUEST_FANOUT = MAX_SAMPLES_PER_REQUEST;

/**
 * Refuses a request that would fan out to more than {@link MAX_REQUEST_FANOUT} engine requests.
 * @param numPrompts prompts in the batch (1 for a single prompt)
 * @param n samples per prompt (the largest when they differ)
 * @throws InvalidRequestError (400) naming both counts
 */
export function checkFanout(numPrompts: number, n: number): void {
  if (numPrompts * n > MAX_REQUEST_FANOUT) {
    const what = numPrompts > 1 ? `${numPrompts} prompts × n=${n} = ${numPrompts * n} samples` : `n=${n} samples`;
    throw new InvalidRequestError(`The request asks for ${what}; tsglang serves at most ${MAX_REQUEST_FANOUT} samples per request (prompts × n). Split the batch into several requests.`, numPrompts > 1 ? 'text' : 'n');
  }
}

/**
 * An AbortController that also aborts when `signal` does (the client disconnects). A batch handler gives its signal
 * to every prompt's request and to mergeAsync, which aborts it when one prompt fails, so the others stop instead of
 * running on for a response that is already an error. Its signal takes any number of listeners (one per prompt of
 * a batch) without Node's MaxListenersExceededWarning.
 */
export function childAbortController(signal: AbortSignal): AbortController {
  const child = new AbortController();
  setMaxListeners(0, child.signal);
  if (signal.aborted) child.abort();
  else signal.addEventListener('abort', () => child.abort(), { once: true });
  return child;
}

/**
 * Merges several async iterables, yielding items as they arrive (for batch prompts fanned out to the engine).
 * Each source has at most one `next()` in flight; a settled one is queued for the consumer, so every item costs O(1)
 * whatever the number of sources (no Promise.race over all of them, which leaves a reaction on every pending source
 * per item: quadratic memory for a large batch). An error of any source ends the merge with that error.
 * @param cancel aborted when the merge ends early (a source threw, whenever that happens, or the consumer stopped
 *   iterating), so a batch's other prompts stop instead of running on for a response that is already an error
 */
export async function* mergeAsync<T>(sources: readonly AsyncIterable<T>[], cancel?: AbortController): AsyncGenerator<T> {
  const iters = sources.map((s) => s[Symbol.asyncIterator]());
  type Settled = { i: number; r: IteratorResult<T> } | { i: number; err: unknown };
  const ready: Settled[] = [];
  let head = 0;
  let wake: (() => void) | null = null;
  const settle = (s: Settled): void => {
    ready.push(s);
    const w = wake;
    wake = null;
    w?.();
  };
  const pull = (i: number): void => {
    iters[i].next().then((r) => settle({ i, r }), (err: unknown) => settle({ i, err }));
  };
  iters.forEach((_, i) => pull(i));
  let active = iters.length;
  let drained = false;
  try {
    while (active > 0) {
      if (head === ready.length) {
        await new Promise<void>((resolve) => { wake = resolve; });
        continue;
      }
      const s = ready[head++];
      if (head > 1024 && head * 2 > ready.length) { ready.splice(0, head); head = 0; }
      if ('err' in s) throw s.err;
      if (s.r.done) { active--; continue; }
      pull(s.i);
      yield s.r.value;
    }
    drained = true;
  } finally {
    if (!drained) cancel?.abort(); // a source threw or the consumer stopped: the other sources' requests stop too
  }
}
