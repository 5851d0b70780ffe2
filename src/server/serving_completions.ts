// POST /v1/completions (python/sglang/srt/entrypoints/openai/serving_completions.py): prompt (text, ids, or a
// batch of either) → engine → `text_completion` response or stream.
import { bootstrapSlice, dataParallelRankOf, dpSizeOf } from './bootstrap_fields.js';
import { encodeSseEvent, encodeOpenAISseError, excludeNone, SSE_DONE, CompletionRequestSchema, parseWire, usageInfo } from '../protocol/index.js';
import type { CompletionChoice, CompletionLogprobs, CompletionRequest, CompletionResponse, CompletionStreamResponse } from '../protocol/index.js';
import { InvalidRequestError } from '../common/index.js';
import type { GenerateOutput } from '../engine/index.js';
import type { Tokenizer } from '../tokenizer/index.js';
import type { Exchange, ServerDeps } from './context.js';
import { abortHttpError, parseOrReply, toHttpError } from './http_errors.js';
import {
  WEIGHT_VERSION, emptyChoice, accumulate, checkFanout, childAbortController, matchedStop, mergeAsync, newRid, nowSeconds, openaiFinishReason,
  openaiSamplingParams, usageOfChoices, type ChoiceResult,
} from './request_utils.js';

/** Prompt-token logprobs of an echoed prompt: [logprob (null for the first token), id] and the alternatives per position. */
interface EchoLogprobs {
  readonly tokenLps: readonly (readonly [number | null, number])[];
  readonly topLps: readonly ((readonly (readonly [number, number])[]) | null)[] | null;
}

/**
 * Legacy completion logprobs from engine pairs (SGLang to_openai_style_logprobs): the echoed prompt's tokens first
 * (when given), then the output tokens; text_offset is -1 throughout, as in SGLang. Keys in SGLang's LogProbs field
 * order (text_offset, token_logprobs, tokens, top_logprobs).
 * @param tokenLps [numTokens] sampled token [logprob, id]
 * @param topLps [numTokens][k] alternatives; null when the request asked for none (`logprobs: 0`): meta_info then has
 *   no output_top_logprobs and SGLang's top_logprobs list stays empty
 * @param echo prompt positions (with `echo` and `logprobs` > 0, SGLang requests them from position 0)
 */
export function completionLogprobs(tok: Tokenizer | null, tokenLps: readonly (readonly [number, number])[], topLps: readonly (readonly (readonly [number, number])[])[] | null, echo: EchoLogprobs | null = null): CompletionLogprobs {
  const text = (id: number) => (tok ? Buffer.from(tok.tokenBytes(id)).toString('utf8') : String(id));
  const top = (alts: readonly (readonly [number, number])[] | null | undefined) => (alts ? Object.fromEntries(alts.map(([lp, id]) => [text(id), lp])) : null);
  const inLps = echo?.tokenLps ?? [];
  return {
    text_offset: [...inLps.map(() => -1), ...tokenLps.map(() => -1)],
    token_logprobs: [...inLps.map(([lp]) => lp), ...tokenLps.map(([lp]) => lp)],
    tokens: [...inLps.map(([, id]) => text(id)), ...tokenLps.map(([, id]) => text(id))],
    top_logprobs: topLps === null ? [] : [...inLps.map((_, i) => top(echo?.topLps?.[i])), ...tokenLps.map((_, i) => top(topLps[i]))],
  };
}

/**
 * serving_completions.py `_validate_request`: a prompt that is empty, or a list whose items are all empty (falsy in
 * Python: "", [] and the token id 0).
 */
export function isEmptyPrompt(prompt: CompletionRequest['prompt']): boolean {
  if (prompt.length === 0) return true;
  if (typeof prompt === 'string') return false;
  return (prompt as (string | number | number[])[]).every((p) => (typeof p === 'number' ? p === 0 : p.length === 0));
}

/** Handles one completion request. */
export async function handleCompletion(deps: ServerDeps, ex: Exchange, body: unknown): Promise<void> {
  const req = parseOrReply(ex, () => {
    const r = parseWire(CompletionRequestSchema, body);
    // a pydantic field validator of CompletionRequest: a request-validation error (type "Bad Request")
    if (r.max_tokens !== null && r.max_tokens !== undefined && r.max_tokens <= 0) {
      throw new InvalidRequestError('1 validation error: max_tokens: Value error, max_tokens must be positive', 'max_tokens');
    }
    return r;
  });
  if (req === null) return;
  const model = req.model;
  // one engine request per prompt; choice index = promptIdx * n + choiceIdx
  const p = req.prompt;
  const prompts: ({ text: string } | { inputIds: number[] })[] =
    typeof p === 'string' ? [{ text: p }]
      : p.length > 0 && typeof p[0] === 'number' ? [{ inputIds: p as number[] }]
        : (p as (string | number[])[]).map((x) => (typeof x === 'string' ? { text: x } : { inputIds: x }));
  const n = req.n ?? 1;
  // Engine request ids and the ids SGLang reports (meta_info.id, the response id): one prompt → the request's rid (a
  // uuid hex unless given); a batch → rid_i, or a fresh uuid each without a rid (io_struct _normalize_rid); with
  // n > 1 every sample gets a fresh uuid (regenerate_rid).
  const base = req.rid ?? newRid();
  const promptRid = (i: number): string => (prompts.length === 1 ? base : req.rid ? `${req.rid}_${i}` : newRid());
  const rids = prompts.map((_, i) => promptRid(i));
  const sampleId = new Map<number, string>();
  const idOf = (index: number): string => {
    if (n <= 1) return rids[index] ?? base;
    let id = sampleId.get(index);
    if (id === undefined) { id = newRid(); sampleId.set(index, id); }
    return id;
  };
  const wantLogprobs = req.logprobs !== null && req.logprobs !== undefined;
  const withTop = (req.logprobs ?? 0) > 0;
  let iter: AsyncIterator<GenerateOutput>;
  let first: IteratorResult<GenerateOutput>;
  const batchAbort = childAbortController(ex.signal);
  try {
    if (isEmptyPrompt(p)) throw new InvalidRequestError('Prompt cannot be empty', 'prompt');
    checkFanout(prompts.length, n);
    const modelDefaults = deps.config.samplingDefaults === 'model' ? deps.engine.info.defaultSamplingParams : null;
    const samplingParams = openaiSamplingParams(req, req.max_tokens ?? null, modelDefaults);
    // SGLang serving_completions: echo with logprobs > 0 asks for the prompt's logprobs too (logprob_start_len 0)
    const echoLogprobs = req.echo === true && (req.logprobs ?? 0) > 0;
    deps.metrics?.onRequestStart();
    const sources = prompts.map((pr, i) => {
      const gen = deps.engine.generate({ rid: rids[i], ...pr, samplingParams, stream: req.stream === true, returnLogprob: wantLogprobs, topLogprobsNum: wantLogprobs ? (req.logprobs ?? 0) : 0, ...(echoLogprobs ? { logprobStartLen: 0 } : {}), ...bootstrapSlice(req, i * n, n), ...dataParallelRankOf(req, dpSizeOf(deps)) }, batchAbort.signal);
      return (async function* () { for await (const o of gen) yield { ...o, index: i * n + o.index }; })();
    });
    iter = (sources.length === 1 ? sources[0] : mergeAsync(sources, batchAbort))[Symbol.asyncIterator]();
    first = await iter.next();
  } catch (err) {
    const e = toHttpError(err);
    ex.sendJson(e.status, e.body);
    return;
  }
  const echoText = (index: number): string => {
    if (!req.echo) return '';
    const pr = prompts[Math.floor(index / n)];
    return 'text' in pr ? pr.text : deps.tokenizer ? deps.tokenizer.decode(pr.inputIds) : '';
  };
  const outputs = deps.metrics
    ? deps.metrics.observe((async function* () { if (!first.done) yield first.value; for (;;) { const r = await iter.next(); if (r.done) return; yield r.value; } })(), ex.arrivalMs)
    : (async function* () { if (!first.done) yield first.value; for (;;) { const r = await iter.next(); if (r.done) return; yield r.value; } })();
  const state = new Map<number, ChoiceResult>();
  const usage = () => usageOfChoices(state.values(), n, deps.config.enableCacheReport);
  if (req.stream !== true) {
    try {
      for await (const o of outputs) {
        let c = state.get(o.index);
        if (!c) { c = emptyChoice(o.index); state.set(o.index, c); }
        accumulate(c, o);
      }
    } catch (err) {
      const e = toHttpError(err);
      ex.sendJson(e.status, e.body);
      return;
    }
    const choices = [...state.values()].sort((a, b) => a.index - b.index);
    // SGLang's _handle_abort_finish_reason: an abort with a status code (400 validation, 503 timeout, 500) is an error
    // response; one without (/abort_request) is a normal finish, 200 with the partial output
    if (ex.signal.aborted) return;
    const aborted = choices.find((c) => c.finishReason?.type === 'abort' && c.finishReason.statusCode !== undefined);
    if (aborted && aborted.finishReason?.type === 'abort') {
      const e = abortHttpError(aborted.finishReason.message, aborted.finishReason.statusCode);
      ex.sendJson(e.status, e.body);
      return;
    }
    const response: CompletionResponse = {
      id: idOf(choices[0]?.index ?? 0), object: 'text_completion', created: nowSeconds(), model,
      choices: choices.map((c): CompletionChoice => ({
        index: c.index,
        text: echoText(c.index) + c.text,
        logprobs: wantLogprobs
          ? completionLogprobs(deps.tokenizer, c.outputTokenLogprobs, withTop ? c.outputTopLogprobs : null, req.echo && c.inputTokenLogprobs ? { tokenLps: c.inputTokenLogprobs, topLps: c.inputTopLogprobs } : null)
          : null,
        finish_reason: openaiFinishReason(c.finishReason),
        matched_stop: matchedStop(c.finishReason),
      })),
      usage: usage(),
      metadata: { weight_version: WEIGHT_VERSION },
    };
    ex.sendJson(200, response);
    return;
  }
  // Streaming (serving_completions.py `_generate_completion_stream`): one event per engine output, empty text
  // included, the last one of a choice carrying its finish_reason; `created` fixed for the whole stream.
  ex.startSse();
  const created = nowSeconds();
  const continuousUsage = req.stream_options?.continuous_usage_stats === true;
  let lastId = idOf(0);
  try {
    for await (const o of outputs) {
      let c = state.get(o.index);
      const isFirst = !c;
      if (!c) { c = emptyChoice(o.index); state.set(o.index, c); }
      accumulate(c, o);
      const f = o.finished ? o.finishReason : null;
      if (f?.type === 'abort' && f.statusCode !== undefined && f.statusCode !== 499) { ex.writeSse(encodeOpenAISseError(f.message, 'BadRequestError', f.statusCode)); break; }
      lastId = idOf(o.index);
      const inLps = isFirst && req.echo && o.logprobs?.inputTokenLogprobs ? { tokenLps: o.logprobs.inputTokenLogprobs, topLps: o.logprobs.inputTopLogprobs ?? null } : null;
      const lp = wantLogprobs
        ? completionLogprobs(deps.tokenizer, o.logprobs?.outputTokenLogprobs ?? [], withTop ? o.logprobs?.outputTopLogprobs ?? [] : null, inLps)
        : null;
      const choice: CompletionChoice = {
        index: o.index, text: (isFirst ? echoText(o.index) : '') + o.text, logprobs: lp, finish_reason: openaiFinishReason(f), matched_stop: matchedStop(f),
      };
      const event: CompletionStreamResponse = {
        id: lastId, object: 'text_completion', created, model, choices: [choice], usage: continuousUsage ? usageInfo(o.promptTokens, o.completionTokens) : null,
      };
      ex.writeSse(encodeSseEvent(event));
    }
    if (req.stream_options?.include_usage) {
      // SGLang writes this event with exclude_none: no null prompt_tokens_details
      const event: CompletionStreamResponse = { id: lastId, object: 'text_completion', created, model, choices: [], usage: usage() };
      ex.writeSse(encodeSseEvent(excludeNone(event)));
    }
  } catch (err) {
    const e = toHttpError(err);
    const body = e.body as { message?: string; type?: string };
    ex.writeSse(encodeOpenAISseError(body.message ?? 'error', body.type, e.status));
  }
  ex.writeSse(SSE_DONE);
  ex.end();
}
