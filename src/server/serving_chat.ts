// POST /v1/chat/completions (python/sglang/srt/entrypoints/openai/serving_chat.py): request → chat prompt →
// engine → reasoning/tool-call parsing → one `chat.completion` or a stream of `chat.completion.chunk` events.
import { encodeSseEvent, encodeSseError, SSE_DONE, ChatCompletionRequestSchema, parseWire } from '../protocol/index.js';
import type { ChatCompletionChunk, ChatCompletionResponse, ChatTokenLogprob, UsageInfo, ToolCallWire } from '../protocol/index.js';
import { InvalidRequestError, UnsupportedFeatureError } from '../common/index.js';
import type { GenerateOutput } from '../engine/index.js';
import type { Tokenizer } from '../tokenizer/index.js';
import type { Exchange, ServerDeps } from './context.js';
import type { ChatDelta, ChatParseRequest } from './chat_output.js';
import { abortHttpError, parseOrReply, toHttpError } from './http_errors.js';
import { collectChoices, matchedStop, newRid, nowSeconds, openaiFinishReason, openaiSamplingParams, type ChoiceResult } from './request_utils.js';

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

function usageOf(choices: readonly ChoiceResult[], deps: ServerDeps): UsageInfo {
  const promptTokens = choices.length ? choices[0].promptTokens : 0;
  const completion = choices.reduce((s, c) => s + c.completionTokens, 0);
  const u: UsageInfo = { prompt_tokens: promptTokens, completion_tokens: completion, total_tokens: promptTokens + completion };
  if (deps.config.enableCacheReport) u.prompt_tokens_details = { cached_tokens: choices.length ? choices[0].cachedTokens : 0 };
  return u;
}

/**
 * Handles one chat completion request.
 * @param body parsed JSON body
 * @param rawBody the body text (passed to the prompt builder)
 */
export async function handleChatCompletion(deps: ServerDeps, ex: Exchange, body: unknown, rawBody: string): Promise<void> {
  const req = parseOrReply(ex, () => parseWire(ChatCompletionRequestSchema, body));
  if (req === null) return;
  const rid = req.rid ?? newRid();
  const id = `chatcmpl-${rid}`;
  const created = nowSeconds();
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
    if (req.response_format && req.response_format.type !== 'text') {
      throw new UnsupportedFeatureError(`response_format '${req.response_format.type}' (grammar-constrained decoding) is not supported by tsglang yet`);
    }
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
    if (deps.config.logRequests) deps.logger.info(`Receive: obj=ChatCompletion(rid=${rid}, model=${model}, stream=${req.stream === true}, max_tokens=${samplingParams.maxNewTokens ?? 'None'})`);
    deps.metrics?.onRequestStart();
    iter = deps.engine.generate({
      rid,
      ...(prompt.segments.length > 1 ? { textSegments: prompt.segments } : { text: prompt.text }),
      addSpecialTokens: false,
      samplingParams,
      stream: req.stream === true,
      returnLogprob: wantLogprobs,
      topLogprobsNum: wantLogprobs ? (req.top_logprobs ?? 0) : 0,
    }, ex.signal)[Symbol.asyncIterator]();
    first = await iter.next();
  } catch (err) {
    const e = toHttpError(err);
    ex.sendJson(e.status, e.body);
    return;
  }
  if (req.stream === true) {
    await streamChat(deps, ex, iter, first, { id, created, model, parseReq, includeUsage: req.stream_options?.include_usage === true });
    return;
  }
  // non-streaming: gather every choice
  let choices: ChoiceResult[];
  try {
    const all = (async function* () { if (!first.done) yield first.value; for (;;) { const r = await iter.next(); if (r.done) return; yield r.value; } })();
    choices = await collectChoices(deps.metrics ? deps.metrics.observe(all) : all);
  } catch (err) {
    const e = toHttpError(err);
    ex.sendJson(e.status, e.body);
    return;
  }
  const aborted = choices.find((c) => c.finishReason?.type === 'abort');
  if (aborted && aborted.finishReason?.type === 'abort') {
    if (ex.signal.aborted) return;
    const e = abortHttpError(aborted.finishReason.message, aborted.finishReason.statusCode);
    ex.sendJson(e.status, e.body);
    return;
  }
  const response: ChatCompletionResponse = {
    id,
    object: 'chat.completion',
    created,
    model,
    choices: choices.map((c) => {
      const parsed = deps.chatOutput.parse(c.text, parseReq);
      const toolCalls: ToolCallWire[] | null = parsed.toolCalls && parsed.toolCalls.length ? [...parsed.toolCalls] : null;
      let finish = openaiFinishReason(c.finishReason);
      if (toolCalls && finish === 'stop') finish = 'tool_calls';
      return {
        index: c.index,
        message: { role: 'assistant', content: parsed.content, reasoning_content: parsed.reasoningContent, tool_calls: toolCalls },
        logprobs: req.logprobs ? { content: chatLogprobs(deps.tokenizer, c.outputTokenLogprobs, c.outputTopLogprobs) } : null,
        finish_reason: finish,
        matched_stop: toolCalls ? null : matchedStop(c.finishReason),
      };
    }),
    usage: usageOf(choices, deps),
  };
  if (deps.config.logRequests) deps.logger.info(`Finish: obj=ChatCompletion(rid=${rid}), out=${JSON.stringify(response.choices.map((c) => c.message.content))}`);
  ex.sendJson(200, response);
}

interface StreamCtx {
  id: string;
  created: number;
  model: string;
  parseReq: ChatParseRequest;
  includeUsage: boolean;
}

async function streamChat(deps: ServerDeps, ex: Exchange, iter: AsyncIterator<GenerateOutput>, first: IteratorResult<GenerateOutput>, s: StreamCtx): Promise<void> {
  ex.startSse();
  const chunk = (index: number, delta: ChatCompletionChunk['choices'][0]['delta'], extra: Partial<ChatCompletionChunk['choices'][0]> = {}): string =>
    encodeSseEvent({ id: s.id, object: 'chat.completion.chunk', created: s.created, model: s.model, choices: [{ index, delta, logprobs: null, finish_reason: null, ...extra }] } satisfies ChatCompletionChunk);
  const parsers = new Map<number, ReturnType<ServerDeps['chatOutput']['stream']>>();
  const state = new Map<number, ChoiceResult>();
  const deltaToWire = (d: ChatDelta): ChatCompletionChunk['choices'][0]['delta'] => {
    if ('reasoningContent' in d) return { reasoning_content: d.reasoningContent };
    if ('content' in d) return { content: d.content };
    const t = d.toolCall;
    return { tool_calls: [{ index: t.index, ...(t.id ? { id: t.id, type: 'function' as const } : {}), function: { ...(t.name !== null ? { name: t.name } : {}), arguments: t.arguments } }] };
  };
  const outputs = (async function* () { if (!first.done) yield first.value; for (;;) { const r = await iter.next(); if (r.done) return; yield r.value; } })();
  try {
    for await (const o of deps.metrics ? deps.metrics.observe(outputs) : outputs) {
      let p = parsers.get(o.index);
      if (!p) {
        p = deps.chatOutput.stream(s.parseReq);
        parsers.set(o.index, p);
        state.set(o.index, { index: o.index } as ChoiceResult);
        ex.writeSse(chunk(o.index, { role: 'assistant', content: '' }));
      }
      const st = state.get(o.index)!;
      st.promptTokens = o.promptTokens;
      st.completionTokens = o.completionTokens;
      st.cachedTokens = o.cachedTokens;
      const lp = o.logprobs ? { content: chatLogprobs(deps.tokenizer, o.logprobs.outputTokenLogprobs, o.logprobs.outputTopLogprobs) } : null;
      const deltas = o.text ? p.push(o.text) : [];
      if (o.finished) deltas.push(...p.finish());
      deltas.forEach((d, i) => ex.writeSse(chunk(o.index, deltaToWire(d), i === 0 && lp ? { logprobs: lp } : {})));
      if (deltas.length === 0 && lp && lp.content.length) ex.writeSse(chunk(o.index, {}, { logprobs: lp }));
      if (o.finished) {
        const f = o.finishReason;
        if (f?.type === 'abort' && f.statusCode !== undefined && f.statusCode !== 499) {
          ex.writeSse(encodeSseError(f.message, { type: 'BadRequestError', code: f.statusCode }));
          continue;
        }
        let finish = openaiFinishReason(f);
        if (p.hasToolCalls && finish === 'stop') finish = 'tool_calls';
        ex.writeSse(chunk(o.index, {}, { finish_reason: finish, matched_stop: matchedStop(f) }));
      }
    }
    if (s.includeUsage) {
      const choices = [...state.values()];
      const promptTokens = choices.length ? choices[0].promptTokens : 0;
      const completion = choices.reduce((a, c) => a + c.completionTokens, 0);
      const usage: UsageInfo = { prompt_tokens: promptTokens, completion_tokens: completion, total_tokens: promptTokens + completion };
      if (deps.config.enableCacheReport) usage.prompt_tokens_details = { cached_tokens: choices.length ? choices[0].cachedTokens : 0 };
      ex.writeSse(encodeSseEvent({ id: s.id, object: 'chat.completion.chunk', created: s.created, model: s.model, choices: [], usage }));
    }
  } catch (err) {
    const e = toHttpError(err);
    ex.writeSse(encodeSseError((e.body as { message?: string }).message ?? 'error', { type: (e.body as { type?: string }).type, code: e.status }));
  }
  ex.writeSse(SSE_DONE);
  ex.end();
}
