// POST /v1/completions (python/sglang/srt/entrypoints/openai/serving_completions.py): prompt (text, ids, or a
// batch of either) → engine → `text_completion` response or stream.
import { encodeSseEvent, encodeSseError, SSE_DONE, CompletionRequestSchema, parseWire } from '../protocol/index.js';
import type { CompletionResponse, UsageInfo } from '../protocol/index.js';
import { InvalidRequestError } from '../common/index.js';
import type { GenerateOutput } from '../engine/index.js';
import type { Tokenizer } from '../tokenizer/index.js';
import type { Exchange, ServerDeps } from './context.js';
import { abortHttpError, parseOrReply, toHttpError } from './http_errors.js';
import { emptyChoice, accumulate, childAbortController, matchedStop, mergeAsync, newRid, nowSeconds, openaiFinishReason, openaiSamplingParams, type ChoiceResult } from './request_utils.js';

type CompletionLogprobs = NonNullable<CompletionResponse['choices'][0]['logprobs']>;

/** Prompt-token logprobs of an echoed prompt: [logprob (null for the first token), id] and the alternatives per position. */
interface EchoLogprobs {
  readonly tokenLps: readonly (readonly [number | null, number])[];
  readonly topLps: readonly ((readonly (readonly [number, number])[]) | null)[] | null;
}

/**
 * Legacy completion logprobs from engine pairs (SGLang to_openai_style_logprobs): the echoed prompt's tokens first
 * (when given), then the output tokens; text_offset is -1 throughout, as in SGLang.
 * @param tokenLps [numTokens] sampled token [logprob, id]
 * @param topLps [numTokens][k] alternatives
 * @param echo prompt positions (with `echo` and `logprobs` > 0, SGLang requests them from position 0)
 */
export function completionLogprobs(tok: Tokenizer | null, tokenLps: readonly (readonly [number, number])[], topLps: readonly (readonly (readonly [number, number])[])[], echo: EchoLogprobs | null = null): CompletionLogprobs {
  const text = (id: number) => (tok ? Buffer.from(tok.tokenBytes(id)).toString('utf8') : String(id));
  const top = (alts: readonly (readonly [number, number])[] | null | undefined) => (alts ? Object.fromEntries(alts.map(([lp, id]) => [text(id), lp])) : null);
  const inLps = echo?.tokenLps ?? [];
  return {
    tokens: [...inLps.map(([, id]) => text(id)), ...tokenLps.map(([, id]) => text(id))],
    token_logprobs: [...inLps.map(([lp]) => lp), ...tokenLps.map(([lp]) => lp)],
    top_logprobs: [...inLps.map((_, i) => top(echo?.topLps?.[i])), ...tokenLps.map((_, i) => top(topLps[i]))],
    text_offset: [...inLps.map(() => -1), ...tokenLps.map(() => -1)],
  };
}

/** Handles one completion request. */
export async function handleCompletion(deps: ServerDeps, ex: Exchange, body: unknown): Promise<void> {
  const req = parseOrReply(ex, () => parseWire(CompletionRequestSchema, body));
  if (req === null) return;
  const rid = req.rid ?? newRid();
  const id = `cmpl-${rid}`;
  const created = nowSeconds();
  const model = req.model;
  // one engine request per prompt; choice index = promptIdx * n + choiceIdx
  const p = req.prompt;
  const prompts: ({ text: string } | { inputIds: number[] })[] =
    typeof p === 'string' ? [{ text: p }]
      : p.length > 0 && typeof p[0] === 'number' ? [{ inputIds: p as number[] }]
        : (p as (string | number[])[]).map((x) => (typeof x === 'string' ? { text: x } : { inputIds: x }));
  const n = req.n ?? 1;
  let iter: AsyncIterator<GenerateOutput>;
  let first: IteratorResult<GenerateOutput>;
  const batchAbort = childAbortController(ex.signal);
  try {
    if (prompts.length === 0 || ('inputIds' in prompts[0] && prompts[0].inputIds.length === 0 && prompts.length === 1)) {
      throw new InvalidRequestError('prompt must not be empty', 'prompt');
    }
    if (req.max_tokens !== null && req.max_tokens !== undefined && req.max_tokens <= 0) {
      throw new InvalidRequestError(`max_tokens must be positive, got ${req.max_tokens}`, 'max_tokens');
    }
    const modelDefaults = deps.config.samplingDefaults === 'model' ? deps.engine.info.defaultSamplingParams : null;
    const samplingParams = openaiSamplingParams(req, req.max_tokens ?? null, modelDefaults);
    const wantLogprobs = req.logprobs !== null && req.logprobs !== undefined;
    // SGLang serving_completions: echo with logprobs > 0 asks for the prompt's logprobs too (logprob_start_len 0)
    const echoLogprobs = req.echo === true && (req.logprobs ?? 0) > 0;
    if (deps.config.logRequests) deps.logger.info(`Receive: obj=Completion(rid=${rid}, model=${model}, prompts=${prompts.length}, stream=${req.stream === true})`);
    deps.metrics?.onRequestStart();
    const sources = prompts.map((pr, i) => {
      const sub = prompts.length === 1 ? rid : `${rid}_${i}`;
      const gen = deps.engine.generate({ rid: sub, ...pr, samplingParams, stream: req.stream === true, returnLogprob: wantLogprobs, topLogprobsNum: wantLogprobs ? (req.logprobs ?? 0) : 0, ...(echoLogprobs ? { logprobStartLen: 0 } : {}) }, batchAbort.signal);
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
    ? deps.metrics.observe((async function* () { if (!first.done) yield first.value; for (;;) { const r = await iter.next(); if (r.done) return; yield r.value; } })())
    : (async function* () { if (!first.done) yield first.value; for (;;) { const r = await iter.next(); if (r.done) return; yield r.value; } })();
  const state = new Map<number, ChoiceResult>();
  const usage = (): UsageInfo => {
    const cs = [...state.values()];
    let promptTokens = 0;
    for (const c of cs) if (c.index % n === 0) promptTokens += c.promptTokens;
    const completion = cs.reduce((s, c) => s + c.completionTokens, 0);
    const u: UsageInfo = { prompt_tokens: promptTokens, completion_tokens: completion, total_tokens: promptTokens + completion };
    if (deps.config.enableCacheReport) u.prompt_tokens_details = { cached_tokens: cs.reduce((s, c) => s + (c.index % n === 0 ? c.cachedTokens : 0), 0) };
    return u;
  };
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
    const aborted = choices.find((c) => c.finishReason?.type === 'abort');
    if (aborted && aborted.finishReason?.type === 'abort') {
      if (ex.signal.aborted) return;
      const e = abortHttpError(aborted.finishReason.message, aborted.finishReason.statusCode);
      ex.sendJson(e.status, e.body);
      return;
    }
    const response: CompletionResponse = {
      id, object: 'text_completion', created, model,
      choices: choices.map((c) => ({
        index: c.index,
        text: echoText(c.index) + c.text,
        logprobs: req.logprobs !== null && req.logprobs !== undefined
          ? completionLogprobs(deps.tokenizer, c.outputTokenLogprobs, c.outputTopLogprobs, req.echo && c.inputTokenLogprobs ? { tokenLps: c.inputTokenLogprobs, topLps: c.inputTopLogprobs } : null)
          : null,
        finish_reason: openaiFinishReason(c.finishReason),
        matched_stop: matchedStop(c.finishReason),
      })),
      usage: usage(),
    };
    ex.sendJson(200, response);
    return;
  }
  ex.startSse();
  const event = (choice: CompletionResponse['choices'][0]) => encodeSseEvent({ id, object: 'text_completion', created, model, choices: [choice] });
  try {
    for await (const o of outputs) {
      let c = state.get(o.index);
      const isFirst = !c;
      if (!c) { c = emptyChoice(o.index); state.set(o.index, c); }
      accumulate(c, o);
      const text = (isFirst ? echoText(o.index) : '') + o.text;
      const inLps = isFirst && req.echo && o.logprobs?.inputTokenLogprobs ? { tokenLps: o.logprobs.inputTokenLogprobs, topLps: o.logprobs.inputTopLogprobs ?? null } : null;
      const lp = o.logprobs && req.logprobs !== null && req.logprobs !== undefined ? completionLogprobs(deps.tokenizer, o.logprobs.outputTokenLogprobs, o.logprobs.outputTopLogprobs, inLps) : null;
      if (text || lp) ex.writeSse(event({ index: o.index, text, logprobs: lp, finish_reason: null, matched_stop: null }));
      if (o.finished) {
        const f = o.finishReason;
        if (f?.type === 'abort' && f.statusCode !== undefined) { ex.writeSse(encodeSseError(f.message, { code: f.statusCode })); continue; }
        ex.writeSse(event({ index: o.index, text: '', logprobs: null, finish_reason: openaiFinishReason(f), matched_stop: matchedStop(f) }));
      }
    }
    if (req.stream_options?.include_usage) ex.writeSse(encodeSseEvent({ id, object: 'text_completion', created, model, choices: [], usage: usage() }));
  } catch (err) {
    const e = toHttpError(err);
    ex.writeSse(encodeSseError((e.body as { message?: string }).message ?? 'error', { code: e.status }));
  }
  ex.writeSse(SSE_DONE);
  ex.end();
}
