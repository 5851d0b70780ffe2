// POST /v1/chat/completions (python/sglang/srt/entrypoints/openai/serving_chat.py): request → chat prompt →
// engine → reasoning/tool-call parsing → one `chat.completion` or a stream of `chat.completion.chunk` events.
import { bootstrapSlice, dataParallelRankOf, dpSizeOf } from './bootstrap_fields.js';
import {
  encodeSseEvent, encodeOpenAISseError, SSE_DONE, ChatCompletionRequestSchema, parseWire, deltaMessage, toolCallWire, usageInfo,
} from '../protocol/index.js';
import type {
  ChatCompletionChunk, ChatCompletionResponse, ChatCompletionStreamChoice, ChatTokenLogprob, DeltaMessage, OpenAIFinishReason, UsageInfo,
  ToolCallWire,
} from '../protocol/index.js';
import { InvalidRequestError, UnsupportedFeatureError } from '../common/index.js';
import type { FinishReason, GenerateOutput } from '../engine/index.js';
import type { Tokenizer } from '../tokenizer/index.js';
import type { Exchange, ServerDeps } from './context.js';
import type { ChatDelta, ChatParseRequest } from './chat_output.js';
import { abortHttpError, parseOrReply, toHttpError } from './http_errors.js';
import {
  WEIGHT_VERSION, checkFanout, collectChoices, matchedStop, newRid, nowSeconds, openaiFinishReason, openaiSamplingParams, sampleIds, usageOfChoices,
  type ChoiceResult,
} from './request_utils.js';

/** The most alternatives per position `top_logprobs` may ask for (OpenAI's chat API: an integer in 0..20). */
export const MAX_TOP_LOGPROBS = 20;

/**
 * OpenAI chat logprobs from engine [logprob, id] pairs.
 * @param tokenLps [numTokens] sampled token logprobs
 * @param topLps [numTokens][k] alternatives
 */
export function chatLogprobs(tok: Tokenizer | null, tokenLps: readonly (readonly [number, number])[], topLps: readonly (readonly (readonly [number, number])[])[]): ChatTokenLogprob[] {
  const entry = (id: number) => {
    const bytes = tok ? [...tok.tokenBytes(id)] : [];
    return { token: tok ? Buffer.from(bytes).toString('utf8') : String(id), bytes };
  };
  return tokenLps.map(([lp, id], i) => ({
    ...entry(id),
    logprob: lp,
    top_logprobs: (topLps[i] ?? []).map(([tlp, tid]) => ({ ...entry(tid), logprob: tlp })),
  }));
}

/**
 * Handles one chat completion request.
 * @param body parsed JSON body
 * @param rawBody the body text (passed to the prompt builder)
 */
export async function handleChatCompletion(deps: ServerDeps, ex: Exchange, body: unknown, rawBody: string): Promise<void> {
  const req = parseOrReply(ex, () => parseWire(ChatCompletionRequestSchema, body));
  if (req === null) return;
  // the response id is the engine request's id (SGLang's meta_info.id: the rid, a bare uuid hex unless given)
  const rid = req.rid ?? newRid();
  const n = req.n ?? 1;
  if (parseOrReply(ex, () => { checkFanout(1, n); return true; }, (err) => toHttpError(err)) === null) return; // before any per-sample work
  const idOf = sampleIds(rid, n);
  const model = req.model;
  const parseReq: ChatParseRequest = {
    tools: req.tools ?? null,
    toolChoice: req.tool_choice ?? (req.tools && req.tools.length ? 'auto' : 'none'),
    separateReasoning: req.separate_reasoning ?? true,
    streamReasoning: req.stream_reasoning ?? true,
    chatTemplateKwargs: req.chat_template_kwargs ?? null,
  };
  let iter: AsyncIterator<GenerateOutput>;
  let first: IteratorResult<GenerateOutput>;
  try {
    // serving_chat.py _validate_request: SGLang's text, 400 BadRequestError, param null
    if (req.messages.length === 0) throw new InvalidRequestError('Messages cannot be empty.');
    const topLogprobs = req.top_logprobs;
    if (topLogprobs !== null && topLogprobs !== undefined && (topLogprobs < 0 || topLogprobs > MAX_TOP_LOGPROBS)) {
      throw new InvalidRequestError(`top_logprobs must be in [0, ${MAX_TOP_LOGPROBS}], got ${topLogprobs}.`, 'top_logprobs');
    }
    if (!deps.chatPrompt) throw new InvalidRequestError('this model has no chat template; pass --chat-template FILE or use /v1/completions', 'messages');
    const prompt = deps.chatPrompt.build(body as Record<string, unknown>, rawBody);
    const modelDefaults = deps.config.samplingDefaults === 'model' ? deps.engine.info.defaultSamplingParams : null;
    let samplingParams = openaiSamplingParams(req, req.max_completion_tokens ?? req.max_tokens ?? null, modelDefaults);
    // serving_chat.py _process_messages: with tools offered (tool_choice != "none") special tokens are kept in the
    // output text, whatever the request says, so tool-call markers that are special tokens in the real tokenizer
    // (e.g. DeepSeek's <｜tool▁calls▁begin｜>) reach the tool-call parser.
    if (req.tools && req.tools.length > 0 && parseReq.toolChoice !== 'none') samplingParams = { ...samplingParams, skipSpecialTokens: false };
    const wantLogprobs = req.logprobs === true;
    // serving_chat.py: the tool choice's constraint, unless the request already has one.
    const toolC = deps.chatOutput.toolConstraint?.(parseReq, req.parallel_tool_calls ?? true) ?? null;
    if (toolC) {
      const given = samplingParams.jsonSchema ?? samplingParams.regex ?? samplingParams.ebnf ?? samplingParams.structuralTag;
      if (given !== undefined && given !== null) deps.logger.warning('Constrained decoding is not compatible with tool calls.');
      else samplingParams = { ...samplingParams, ...toolC };
    }
    const requireReasoning = deps.chatOutput.requiresReasoning?.(parseReq) ?? false;
    deps.metrics?.onRequestStart();
    iter = deps.engine.generate({
      rid,
      ...(prompt.segments.length > 1 ? { textSegments: prompt.segments } : { text: prompt.text }),
      addSpecialTokens: false,
      samplingParams,
      stream: req.stream === true,
      returnLogprob: wantLogprobs,
      topLogprobsNum: wantLogprobs ? (req.top_logprobs ?? 0) : 0,
      ...(requireReasoning ? { requireReasoning: true } : {}),
      ...bootstrapSlice(req, 0, req.n ?? 1),
      ...dataParallelRankOf(req, dpSizeOf(deps)),
    }, ex.signal)[Symbol.asyncIterator]();
    first = await iter.next();
  } catch (err) {
    const e = toHttpError(err);
    ex.sendJson(e.status, e.body);
    return;
  }
  if (req.stream === true) {
    await streamChat(deps, ex, iter, first, {
      idOf, model, n, parseReq,
      includeUsage: req.stream_options?.include_usage === true,
      continuousUsage: req.stream_options?.continuous_usage_stats === true,
    });
    return;
  }
  // non-streaming: gather every choice
  let choices: ChoiceResult[];
  try {
    const all = (async function* () { if (!first.done) yield first.value; for (;;) { const r = await iter.next(); if (r.done) return; yield r.value; } })();
    choices = await collectChoices(deps.metrics ? deps.metrics.observe(all, ex.arrivalMs) : all);
  } catch (err) {
    const e = toHttpError(err);
    ex.sendJson(e.status, e.body);
    return;
  }
  // SGLang's _handle_abort_finish_reason: an abort with a status code (400 validation, 503 timeout, 500) is an error
  // response; one without (/abort_request) is a normal finish, 200 with the partial output
  if (ex.signal.aborted) return;
  const aborted = choices.find((c) => c.finishReason?.type === 'abort' && c.finishReason.statusCode !== undefined);
  if (aborted && aborted.finishReason?.type === 'abort') {
    const e = abortHttpError(aborted.finishReason.message, aborted.finishReason.statusCode);
    ex.sendJson(e.status, e.body);
    return;
  }
  const response: ChatCompletionResponse = {
    id: idOf(0),
    object: 'chat.completion',
    created: nowSeconds(),
    model,
    choices: choices.map((c) => {
      const parsed = deps.chatOutput.parse(c.text, parseReq);
      const toolCalls: ToolCallWire[] | null = parsed.toolCalls && parsed.toolCalls.length ? [...parsed.toolCalls] : null;
      let finish = openaiFinishReason(c.finishReason);
      if (toolCalls && finish === 'stop') finish = 'tool_calls';
      return {
        index: c.index,
        // v0.5.x: empty content and reasoning are null
        message: { role: 'assistant', content: parsed.content || null, reasoning_content: parsed.reasoningContent || null, tool_calls: toolCalls },
        logprobs: req.logprobs ? { content: chatLogprobs(deps.tokenizer, c.outputTokenLogprobs, c.outputTopLogprobs) } : null,
        finish_reason: finish,
        matched_stop: toolCalls ? null : matchedStop(c.finishReason),
      };
    }),
    usage: usageOfChoices(choices, n, deps.config.enableCacheReport),
    metadata: { weight_version: WEIGHT_VERSION },
  };
  ex.sendJson(200, response);
}

interface StreamCtx {
  /** meta_info.id of each choice */
  idOf: (index: number) => string;
  model: string;
  /** the request's n (samples of the prompt) */
  n: number;
  parseReq: ChatParseRequest;
  /** stream_options.include_usage: a last chunk with empty choices and the usage */
  includeUsage: boolean;
  /** stream_options.continuous_usage_stats: every content / reasoning / tool-call chunk carries its choice's usage */
  continuousUsage: boolean;
}

/** A streamed choice in SGLang's field order. */
function streamChoice(index: number, delta: DeltaMessage, logprobs: ChatCompletionStreamChoice['logprobs'] = null,
  finishReason: OpenAIFinishReason | null = null, matchedStop: number | string | null = null): ChatCompletionStreamChoice {
  return { index, delta, logprobs, finish_reason: finishReason, matched_stop: matchedStop };
}

/** A parser delta as SGLang's DeltaMessage: one field set, the others null; tool calls with id and name null after their first item. */
function deltaToWire(d: ChatDelta): DeltaMessage {
  if ('reasoningContent' in d) return deltaMessage({ reasoning_content: d.reasoningContent });
  if ('content' in d) return deltaMessage({ content: d.content });
  const t = d.toolCall;
  return deltaMessage({ tool_calls: [toolCallWire(t.id, t.index, t.name, t.arguments)] });
}

/**
 * The chunks of a streamed chat completion, in SGLang v0.5.x's order (serving_chat.py `_generate_chat_stream`): per
 * choice a role chunk, then its reasoning / content / tool-call deltas as they come (an abort with an error status
 * instead gives one error event and ends the choices); the finish chunk of every choice once all choices are done
 * (in the order they finished); then the usage chunk. Each chunk carries its choice's id and the time it was
 * written; the finish and usage chunks carry the id of the last output.
 */
async function streamChat(deps: ServerDeps, ex: Exchange, iter: AsyncIterator<GenerateOutput>, first: IteratorResult<GenerateOutput>, s: StreamCtx): Promise<void> {
  ex.startSse();
  const chunk = (id: string, choices: ChatCompletionStreamChoice[], usage: UsageInfo | null = null): string =>
    encodeSseEvent({ id, object: 'chat.completion.chunk', created: nowSeconds(), model: s.model, choices, usage } satisfies ChatCompletionChunk);
  const parsers = new Map<number, ReturnType<ServerDeps['chatOutput']['stream']>>();
  const state = new Map<number, ChoiceResult>();
  const finished = new Map<number, { reason: FinishReason | null; hasToolCalls: boolean }>();
  let lastId = s.idOf(0);
  const outputs = (async function* () { if (!first.done) yield first.value; for (;;) { const r = await iter.next(); if (r.done) return; yield r.value; } })();
  try {
    for await (const o of deps.metrics ? deps.metrics.observe(outputs, ex.arrivalMs) : outputs) {
      const f = o.finished ? o.finishReason : null;
      // an abort with an error status (invalid grammar, timeout, OOM; not a client's own abort) is an error event,
      // written before any role chunk of its choice, and it ends the stream's choices (serving_chat.py checks the
      // finish reason first and breaks out of its output loop)
      if (f?.type === 'abort' && f.statusCode !== undefined && f.statusCode !== 499) {
        ex.writeSse(encodeOpenAISseError(f.message, 'BadRequestError', f.statusCode));
        break;
      }
      const id = s.idOf(o.index);
      lastId = id;
      let p = parsers.get(o.index);
      if (!p) {
        p = deps.chatOutput.stream(s.parseReq);
        parsers.set(o.index, p);
        state.set(o.index, { index: o.index } as ChoiceResult);
        ex.writeSse(chunk(id, [streamChoice(o.index, deltaMessage({ role: 'assistant', content: '' }))]));
      }
      const st = state.get(o.index)!;
      st.promptTokens = o.promptTokens;
      st.completionTokens = o.completionTokens;
      st.cachedTokens = o.cachedTokens;
      const running = s.continuousUsage ? usageInfo(o.promptTokens, o.completionTokens) : null;
      const lp = o.logprobs ? { content: chatLogprobs(deps.tokenizer, o.logprobs.outputTokenLogprobs, o.logprobs.outputTopLogprobs) } : null;
      const deltas = o.text ? p.push(o.text) : [];
      if (o.finished) deltas.push(...p.finish());
      deltas.forEach((d, i) => ex.writeSse(chunk(id, [streamChoice(o.index, deltaToWire(d), i === 0 ? lp : null)], running)));
      if (deltas.length === 0 && lp && lp.content.length) ex.writeSse(chunk(id, [streamChoice(o.index, deltaMessage(), lp)], running));
      if (o.finished) finished.set(o.index, { reason: f, hasToolCalls: p.hasToolCalls });
    }
    for (const [index, { reason, hasToolCalls }] of finished) {
      let finish = openaiFinishReason(reason);
      if (hasToolCalls && finish === 'stop') finish = 'tool_calls';
      ex.writeSse(chunk(lastId, [streamChoice(index, deltaMessage(), null, finish, matchedStop(reason))]));
    }
    if (s.includeUsage) ex.writeSse(chunk(lastId, [], usageOfChoices(state.values(), s.n, deps.config.enableCacheReport)));
  } catch (err) {
    const e = toHttpError(err);
    const body = e.body as { message?: string; type?: string };
    ex.writeSse(encodeOpenAISseError(body.message ?? 'error', body.type, e.status));
  }
  ex.writeSse(SSE_DONE);
  ex.end();
}
