// SamplingParams: the per-request sampling settings, normalized and validated as SGLang does
// (python/sglang/srt/sampling/sampling_params.py). Plain data; never sees a tokenizer (stop strings stay strings).
import { InvalidRequestError } from '../common/index.js';

/** top_k meaning "whole vocabulary" (SGLang TOP_K_ALL = 2^30). */
export const TOP_K_ALL = 1 << 30;
/** Temperatures below this are greedy (SGLang _SAMPLING_EPS). */
export const SAMPLING_EPS = 1e-6;

/** Sampling parameters as a caller gives them (camelCase of SGLang's `sampling_params`); all optional, null = default. */
export interface SamplingParamsInput {
  readonly maxNewTokens?: number | null;
  readonly minNewTokens?: number | null;
  readonly temperature?: number | null;
  readonly topP?: number | null;
  readonly topK?: number | null;
  readonly minP?: number | null;
  readonly frequencyPenalty?: number | null;
  readonly presencePenalty?: number | null;
  readonly repetitionPenalty?: number | null;
  readonly stop?: string | readonly string[] | null;
  readonly stopTokenIds?: readonly number[] | null;
  readonly ignoreEos?: boolean | null;
  readonly skipSpecialTokens?: boolean | null;
  readonly spacesBetweenSpecialTokens?: boolean | null;
  readonly noStopTrim?: boolean | null;
  readonly n?: number | null;
  /** Per-request seed (SGLang `sampling_seed`; OpenAI `seed`). */
  readonly seed?: number | null;
  /** {tokenId: bias} added to the logits. */
  readonly logitBias?: Readonly<Record<string, number>> | null;
  /** SGLang's grammar constraints (JSON texts / patterns); at most one may be set. */
  readonly jsonSchema?: string | null;
  readonly regex?: string | null;
  readonly ebnf?: string | null;
  readonly structuralTag?: string | null;
}

/** A grammar constraint as SGLang keys it (grammar_manager.py): `json` for json_schema (and json_object). */
export interface GrammarSpec {
  readonly kind: 'json' | 'regex' | 'ebnf' | 'structural_tag';
  readonly source: string;
}

/** Normalized sampling parameters (every field set; greedy encoded as topK 1, temperature 1, as SGLang). */
export interface SamplingParams {
  /** null = unlimited (clamped later by the context length). */
  readonly maxNewTokens: number | null;
  readonly minNewTokens: number;
  readonly temperature: number;
  readonly topP: number;
  /** 1 = greedy; TOP_K_ALL = whole vocabulary. */
  readonly topK: number;
  readonly minP: number;
  readonly frequencyPenalty: number;
  readonly presencePenalty: number;
  readonly repetitionPenalty: number;
  readonly stopStrs: readonly string[];
  readonly stopTokenIds: readonly number[];
  readonly ignoreEos: boolean;
  readonly skipSpecialTokens: boolean;
  readonly spacesBetweenSpecialTokens: boolean;
  readonly noStopTrim: boolean;
  readonly n: number;
  readonly seed: number | null;
  /** [tokenId, bias] pairs. */
  readonly logitBias: readonly (readonly [number, number])[];
  /** The request's grammar constraint, or null. */
  readonly grammar: GrammarSpec | null;
}

/** SGLang's default `max_new_tokens` for the native API. */
export const DEFAULT_MAX_NEW_TOKENS = 128;

function num(v: number | null | undefined, dflt: number, field: string): number {
  if (v === null || v === undefined) return dflt;
  if (typeof v !== 'number' || Number.isNaN(v)) throw new InvalidRequestError(`${field} must be a number, got ${String(v)}.`, field);
  return v;
}

function bool(v: boolean | null | undefined, dflt: boolean): boolean {
  return v === null || v === undefined ? dflt : Boolean(v);
}

/**
 * The most samples (`n`) one request may ask for, and, at the HTTP edge, the most engine requests one HTTP request
 * may fan out to (prompts × n). SGLang has no limit; tsglang's keeps a single request from filling the server's
 * memory and queue (`n: 100000` took 1.6 GB and ~20 s of engine time after its client left).
 */
export const MAX_SAMPLES_PER_REQUEST = 4096;

/**
 * Fills defaults, folds greedy (temperature < 1e-6 → temperature 1, topK 1) and topK −1 → TOP_K_ALL, then validates
 * with SGLang's messages (`SamplingParams.__post_init__` + `verify`).
 * @param input caller's params (may be undefined)
 * @param vocabSize model vocabulary (for logitBias and stopTokenIds range checks)
 * @throws InvalidRequestError naming the field when a value is out of range
 */
export function normalizeSamplingParams(input: SamplingParamsInput | undefined, vocabSize: number): SamplingParams {
  const p = input ?? {};
  let temperature = num(p.temperature, 1.0, 'temperature');
  let topK = Math.trunc(num(p.topK, -1, 'top_k'));
  if (!Number.isFinite(temperature) || temperature < 0) {
    throw new InvalidRequestError(`temperature must be a non-negative finite number, got ${temperature}.`, 'temperature');
  }
  if (temperature < SAMPLING_EPS) {
    temperature = 1.0;
    topK = 1;
  }
  if (topK === -1) topK = TOP_K_ALL;
  const topP = num(p.topP, 1.0, 'top_p');
  const minP = num(p.minP, 0.0, 'min_p');
  const frequencyPenalty = num(p.frequencyPenalty, 0.0, 'frequency_penalty');
  const presencePenalty = num(p.presencePenalty, 0.0, 'presence_penalty');
  const repetitionPenalty = num(p.repetitionPenalty, 1.0, 'repetition_penalty');
  const minNewTokens = Math.trunc(num(p.minNewTokens, 0, 'min_new_tokens'));
  const maxNewTokens = p.maxNewTokens === null ? null : Math.trunc(num(p.maxNewTokens, DEFAULT_MAX_NEW_TOKENS, 'max_new_tokens'));
  const n = Math.trunc(num(p.n, 1, 'n'));

  if (!(topP > 0 && topP <= 1)) throw new InvalidRequestError(`top_p must be in (0, 1], got ${topP}.`, 'top_p');
  if (!(minP >= 0 && minP <= 1)) throw new InvalidRequestError(`min_p must be in [0, 1], got ${minP}.`, 'min_p');
  if (topK < 1) throw new InvalidRequestError(`top_k must be -1 (disable) or at least 1, got ${topK}.`, 'top_k');
  if (!(frequencyPenalty >= -2 && frequencyPenalty <= 2)) {
    throw new InvalidRequestError(`frequency_penalty must be in [-2, 2], got ${frequencyPenalty}.`, 'frequency_penalty');
  }
  if (!(presencePenalty >= -2 && presencePenalty <= 2)) {
    throw new InvalidRequestError(`presence_penalty must be in [-2, 2], got ${presencePenalty}.`, 'presence_penalty');
  }
  if (!(repetitionPenalty > 0 && repetitionPenalty <= 2)) {
    throw new InvalidRequestError(
      `repetition_penalty must be in (0, 2] (1.0 = no penalty), got ${repetitionPenalty}.`,
      'repetition_penalty',
    );
  }
  if (minNewTokens < 0) throw new InvalidRequestError(`min_new_tokens must be in [0, max_new_tokens], got ${minNewTokens}.`, 'min_new_tokens');
  if (maxNewTokens !== null) {
    if (maxNewTokens < 0) throw new InvalidRequestError(`max_new_tokens must be at least 0, got ${maxNewTokens}.`, 'max_new_tokens');
    if (minNewTokens > maxNewTokens) {
      throw new InvalidRequestError(
        `min_new_tokens must be in [0, max_new_tokens(${maxNewTokens})], got ${minNewTokens}.`,
        'min_new_tokens',
      );
    }
  }
  if (n < 1) throw new InvalidRequestError(`n must be at least 1, got ${n}.`, 'n');
  if (n > MAX_SAMPLES_PER_REQUEST) {
    throw new InvalidRequestError(`n must be at most ${MAX_SAMPLES_PER_REQUEST} (tsglang's limit of samples per request), got ${n}.`, 'n');
  }

  const logitBias: [number, number][] = [];
  for (const [k, v] of Object.entries(p.logitBias ?? {})) {
    const id = Number(k);
    if (!Number.isInteger(id) || id < 0 || id >= vocabSize) {
      throw new InvalidRequestError(`logit_bias must has keys in [0, ${vocabSize - 1}], got ${k}.`, 'logit_bias');
    }
    logitBias.push([id, num(v, 0, 'logit_bias')]);
  }
  const stopTokenIds: number[] = [];
  for (const id of p.stopTokenIds ?? []) {
    if (id === null || id === undefined) continue;
    if (!Number.isInteger(id)) throw new InvalidRequestError(`stop_token_ids must be integers, got ${String(id)}.`, 'stop_token_ids');
    if (!stopTokenIds.includes(id)) stopTokenIds.push(id);
  }
  const stop = p.stop ?? [];
  const stopStrs = (typeof stop === 'string' ? [stop] : [...stop]).filter((s) => s.length > 0);
  const seed = p.seed === null || p.seed === undefined ? null : Math.trunc(num(p.seed, 0, 'seed'));
  const grammar = grammarOf(p);

  return {
    maxNewTokens,
    minNewTokens,
    temperature,
    topP,
    topK,
    minP,
    frequencyPenalty,
    presencePenalty,
    repetitionPenalty,
    stopStrs,
    stopTokenIds,
    ignoreEos: bool(p.ignoreEos, false),
    skipSpecialTokens: bool(p.skipSpecialTokens, true),
    spacesBetweenSpecialTokens: bool(p.spacesBetweenSpecialTokens, true),
    noStopTrim: bool(p.noStopTrim, false),
    n,
    seed,
    logitBias,
    grammar,
  };
}

/**
 * The grammar constraint of the params (SGLang order of precedence: json_schema, regex, ebnf, structural_tag).
 * @throws InvalidRequestError when more than one is set (SGLang SamplingParams.verify's message)
 */
function grammarOf(p: SamplingParamsInput): GrammarSpec | null {
  const given: GrammarSpec[] = [];
  const add = (kind: GrammarSpec['kind'], v: string | null | undefined): void => {
    if (v === null || v === undefined) return;
    if (typeof v !== 'string') throw new InvalidRequestError(`${kind === 'json' ? 'json_schema' : kind} must be a string.`, kind === 'json' ? 'json_schema' : kind);
    given.push({ kind, source: v });
  };
  add('json', p.jsonSchema);
  add('regex', p.regex);
  add('ebnf', p.ebnf);
  add('structural_tag', p.structuralTag);
  if (given.length > 1) throw new InvalidRequestError('Only one of regex, json_schema, or ebnf can be set.', null);
  return given[0] ?? null;
}

/** True when the params sample greedily (argmax). */
export function isGreedy(p: SamplingParams): boolean {
  return p.topK === 1;
}
