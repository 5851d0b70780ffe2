// End to end: `tsglang serve` as a child process on a free loopback port (embedded default model, generated into
// a temporary HOME's cache, one compute thread, prompts tokenized in its tokenizer worker), driven with the openai
// npm client and fetch.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { TSGLANG_BIN } from '../helpers/paths.js';
import { loadTokenizer, ChatPromptBuilder } from '../../src/tokenizer/index.js';
import type { Tokenizer } from '../../src/tokenizer/index.js';
import { iterateSseData } from '../../src/protocol/index.js';
import { freePort } from '../../bench/serve_child.js';

// A stable HOME so the embedded model is generated once per machine, not once per run (content is deterministic).
const HOME = join(tmpdir(), 'tsglang-e2e-home');
const MODEL_DIR = join(HOME, '.cache', 'tsglang', 'tiny-minimax-m2-v3');
const API_KEY = 'sk-e2e';
const CONTEXT_LEN = 4096;

let child: ChildProcess;
let base: string;
let stderr = '';
let tok: Tokenizer;
let client: OpenAI;

// eslint-disable-next-line @typescript-eslint/no-explicit-any
const json = async (r: Promise<Response> | Response): Promise<any> => (await r).json();
const headers = { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json' };
const post = (path: string, body: unknown, h: Record<string, string> = headers) =>
  fetch(base + path, { method: 'POST', headers: h, body: typeof body === 'string' ? body : JSON.stringify(body) });

before(async () => {
  mkdirSync(HOME, { recursive: true });
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  child = spawn(process.execPath, [TSGLANG_BIN, 'serve', '--port', String(port), '--num-threads', '1', '--api-key', API_KEY, '--enable-metrics'], {
    env: { ...process.env, HOME, TSGLANG_CACHE_DIR: join(HOME, '.cache', 'tsglang') },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  child.stderr!.setEncoding('utf8');
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start in time:\n${stderr}`)), 300_000);
    child.stderr!.on('data', (d: string) => {
      stderr += d;
      if (stderr.includes('The server is fired up and ready to roll!')) { clearTimeout(timer); resolve(); }
    });
    child.once('exit', (code) => { clearTimeout(timer); reject(new Error(`server exited with ${code}:\n${stderr}`)); });
  });
  tok = loadTokenizer(MODEL_DIR);
  client = new OpenAI({ baseURL: `${base}/v1`, apiKey: API_KEY });
});

after(async () => {
  if (child && child.exitCode === null) {
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    await exited;
  }
});

async function assertHealthy(): Promise<void> {
  assert.equal((await fetch(`${base}/health`)).status, 200);
  const r = await json(post('/generate', { input_ids: [1, 2, 3], sampling_params: { max_new_tokens: 1, temperature: 0 } }));
  assert.equal(r.output_ids.length, 1);
}

test('start-up prints the KV token capacity and the ready line; /get_model_info reports the local path', async () => {
  assert.match(stderr, /max_total_num_tokens=\d+/);
  assert.match(stderr, /The server is fired up and ready to roll!/);
  const info = await json(fetch(`${base}/get_model_info`, { headers }));
  assert.equal(info.model_path, MODEL_DIR);
  assert.equal(info.tokenizer_path, MODEL_DIR);
  assert.deepEqual(info.architectures, ['MiniMaxM2ForCausalLM']);
  const models = await json(fetch(`${base}/v1/models`, { headers }));
  assert.equal(models.data[0].id, MODEL_DIR);
  assert.equal(models.data[0].max_model_len, CONTEXT_LEN);
  assert.equal(models.data[0].owned_by, 'sglang');
});

test('the seed chat completion (system + user as text parts), another model name served anyway', async () => {
  const messages = [
    { role: 'system' as const, content: [{ type: 'text' as const, text: 'You are a helpful assistant.' }] },
    { role: 'user' as const, content: [{ type: 'text' as const, text: 'Who won the world series in 2020?' }] },
  ];
  const r = await client.chat.completions.create({ model: 'MiniMaxAI/MiniMax-M2.7', messages, max_tokens: 12, temperature: 0 });
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.model, 'MiniMaxAI/MiniMax-M2.7');
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.equal(typeof r.choices[0].message.content, 'string');
  const prompt = ChatPromptBuilder.fromModelDir(MODEL_DIR).build({ messages });
  assert.ok(prompt.text.startsWith(']~!b[]~b]system\nYou are a helpful assistant.[e~[\n]~b]user\nWho won the world series in 2020?[e~[\n]~b]ai\n<think>\n'));
  const promptTokens = tok.encode(prompt.text, { addSpecialTokens: false }).length;
  assert.equal(JSON.stringify(r.usage), JSON.stringify({ prompt_tokens: promptTokens, total_tokens: promptTokens + 12, completion_tokens: 12, prompt_tokens_details: null, reasoning_tokens: 0 }));
  // the same request through /generate with the same prompt ids gives the same greedy text
  const g = await json(post('/generate', { input_ids: tok.encode(prompt.text, { addSpecialTokens: false }), sampling_params: { max_new_tokens: 12, temperature: 0 } }));
  assert.equal(r.choices[0].message.content, g.text);
  await assertHealthy();
});

test('the seed streaming example: deltas add up to the non-streaming greedy answer; usage chunk', async () => {
  const messages = [{ role: 'user' as const, content: 'Solve this problem step by step: What is 15% of 240?' }];
  const stream = await client.chat.completions.create({ model: 'MiniMaxAI/MiniMax-M2.7', messages, max_tokens: 10, temperature: 0, stream: true, stream_options: { include_usage: true } });
  let text = '';
  let finish: string | null = null;
  let usage: { completion_tokens: number } | null = null;
  let chunks = 0;
  for await (const chunk of stream) {
    chunks++;
    if (chunk.usage) usage = chunk.usage;
    if (!chunk.choices.length) continue;
    if (chunk.choices[0].delta.content) text += chunk.choices[0].delta.content;
    if (chunk.choices[0].finish_reason) finish = chunk.choices[0].finish_reason;
  }
  assert.ok(chunks >= 3);
  assert.equal(finish, 'length');
  assert.equal(usage?.completion_tokens, 10);
  const once = await client.chat.completions.create({ model: 'x', messages, max_tokens: 10, temperature: 0 });
  assert.equal(text, once.choices[0].message.content);
});

test('/generate: text and input_ids agree, output text decodes the ids, streaming is cumulative', async () => {
  const text = 'The capital city of France is';
  const a = await json(post('/generate', { text, sampling_params: { max_new_tokens: 8, temperature: 0 } }));
  assert.equal(a.output_ids.length, 8);
  assert.equal(a.text, tok.decode(a.output_ids));
  assert.deepEqual(a.meta_info.finish_reason, { type: 'length', length: 8 });
  assert.equal(a.meta_info.prompt_tokens, tok.encode(text).length);
  const b = await json(post('/generate', { input_ids: tok.encode(text), sampling_params: { max_new_tokens: 8, temperature: 0 }, return_logprob: true, top_logprobs_num: 2 }));
  assert.deepEqual(b.output_ids, a.output_ids);
  assert.equal(b.meta_info.output_token_logprobs.length, 8);
  assert.equal(b.meta_info.output_token_logprobs[0][1], a.output_ids[0]);
  assert.equal(b.meta_info.output_top_logprobs[0].length, 2);
  // greedy: the sampled token is the top-1 alternative
  assert.equal(b.meta_info.output_top_logprobs[0][0][1], a.output_ids[0]);
  const res = await post('/generate', { text, sampling_params: { max_new_tokens: 4, temperature: 0 }, stream: true });
  const events = [];
  for await (const d of iterateSseData(res.body as AsyncIterable<Uint8Array>)) events.push(JSON.parse(d));
  const last = events[events.length - 1];
  assert.deepEqual(last.output_ids, a.output_ids.slice(0, 4));
  assert.equal(last.text, tok.decode(a.output_ids.slice(0, 4)));
});

test('/v1/completions with the seed-style prompt', async () => {
  const r = await client.completions.create({ model: 'default', prompt: 'Say this is a test', max_tokens: 5, temperature: 0 });
  assert.equal(r.object, 'text_completion');
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.equal(r.usage?.completion_tokens, 5);
});

test('bad requests → SGLang status and error body; the server stays healthy after each', async () => {
  const expectError = async (res: Response, status: number, re: RegExp) => {
    assert.equal(res.status, status);
    const b = await json(res);
    assert.deepEqual(Object.keys(b).sort(), ['code', 'message', 'object', 'param', 'type']);
    assert.equal(b.object, 'error');
    assert.equal(b.code, status);
    assert.match(b.message, re);
    await assertHealthy();
  };
  await expectError(await post('/v1/chat/completions', '{"model": "x", "messages": [{"role": "user", "content": "hi"}'), 400, /JSON decode error/);
  await expectError(await post('/v1/chat/completions', { messages: [{ role: 'user', content: 'hi' }], max_tokens: 'ten' }), 400, /max_tokens/);
  await expectError(await post('/v1/chat/completions', { messages: 'hello' }), 400, /messages/);
  await expectError(await post('/v1/chat/completions', { messages: [{ role: 'user', content: 'hi' }], top_p: 5 }), 400, /top_p/);
  const longPrompt = 'hello '.repeat(CONTEXT_LEN + 10);
  await expectError(await post('/v1/completions', { prompt: longPrompt, max_tokens: 4 }), 400, /context length/);
  await expectError(await post('/v1/chat/completions', { messages: [{ role: 'user', content: 'hi' }], max_tokens: CONTEXT_LEN + 100 }), 400, /maximum context length of 4096 tokens/);
  const unauthorized = await post('/v1/chat/completions', { messages: [{ role: 'user', content: 'hi' }] }, { authorization: 'Bearer wrong', 'content-type': 'application/json' });
  assert.equal(unauthorized.status, 401);
  assert.deepEqual(await json(unauthorized), { error: 'Unauthorized' });
  await assertHealthy();
  const metrics = await (await fetch(`${base}/metrics`)).text();
  assert.match(metrics, /sglang:num_requests_total\{model_name="[^"]+"\} \d+/);
  assert.match(metrics, /sglang:num_running_reqs\{model_name="[^"]+",tp_rank="0"\} 0/);
});

test('huge prompts are refused before tokenization on every route (SGLang\'s over-length 400), the server stays responsive', async () => {
  // 30 MB of one letter: the BPE of that single word used to run the heap out after ~5 minutes
  const huge = 'a'.repeat(30_000_000);
  const atLeast = (n: number) => `The input (at least ${n} tokens) is longer than the model's context length (${CONTEXT_LEN} tokens).`;
  const openaiError = (n: number) => ({ object: 'error', message: atLeast(n), type: 'BadRequestError', param: null, code: 400 });
  const completion = post('/v1/completions', { prompt: huge, max_tokens: 1 });
  // /health answers while the huge body is being handled (nothing blocks the event loop for long)
  assert.equal((await fetch(`${base}/health`)).status, 200);
  let res = await completion;
  assert.equal(res.status, 400);
  assert.deepEqual(await json(res), openaiError(234375));
  const mb = 'a'.repeat(1_000_000);
  res = await post('/v1/completions', { prompt: ['hello', mb], max_tokens: 1 });
  assert.deepEqual([res.status, await json(res)], [400, openaiError(7813)]);
  res = await post('/v1/chat/completions', { messages: [{ role: 'user', content: mb }] });
  assert.equal(res.status, 400);
  assert.match((await json(res)).message, /^The input \(at least 78\d\d tokens\) is longer than the model's context length \(4096 tokens\)\.$/);
  for (const text of [mb, ['hello', mb]]) {
    res = await post('/generate', { text, sampling_params: { max_new_tokens: 1 } });
    assert.deepEqual([res.status, await json(res)], [400, { error: { message: atLeast(7813) } }]);
  }
  res = await post('/v1/tokenize', { prompt: mb });
  assert.deepEqual([res.status, await json(res)], [400, openaiError(7813)]);
  await assertHealthy();
});

test('a slow single-word prompt under the bound is tokenized off the HTTP thread: /health answers meanwhile, then the exact 400', async () => {
  // 200 KB of one letter: at least 1563 tokens by the bound (< 4096), so it is tokenized, and this BPE takes
  // seconds on one long word (25000 "aaaaaaaa" tokens in the end); the server tokenizes in its tokenizer worker, so
  // /health is answered in the meantime
  const word = 'a'.repeat(200_000);
  let generateDone = false;
  const generate = post('/generate', { text: word, sampling_params: { max_new_tokens: 1 } }).then((r) => { generateDone = true; return r; });
  await new Promise((r) => setTimeout(r, 200));
  const t0 = performance.now();
  assert.equal((await fetch(`${base}/health`)).status, 200);
  const healthMs = performance.now() - t0;
  assert.equal(generateDone, false, '/health was answered only once the word was tokenized');
  assert.ok(healthMs < 2_000, `/health took ${healthMs.toFixed(0)} ms while a prompt was being tokenized`);
  const res = await generate;
  assert.deepEqual([res.status, await json(res)], [400, { error: { message: `The input (25000 tokens) is longer than the model's context length (${CONTEXT_LEN} tokens).` } }]);
  await assertHealthy();
});

test('logprob counts and token ids out of range → 400 with SGLang\'s bodies; the server stays healthy', async () => {
  let res = await post('/v1/chat/completions', { messages: [{ role: 'user', content: 'hi' }], logprobs: true, top_logprobs: 30 });
  assert.deepEqual([res.status, await json(res)], [400, { object: 'error', message: 'top_logprobs must be in [0, 20], got 30.', type: 'BadRequestError', param: null, code: 400 }]);
  res = await post('/v1/completions', { prompt: 'hi', max_tokens: 1, logprobs: -1 });
  assert.equal(res.status, 400);
  const lp = await json(res);
  assert.match(lp.message, /^top_logprobs_num must be in \[0, \d+\], got -1\.$/);
  assert.deepEqual([lp.type, lp.param], ['BadRequestError', null]);
  res = await post('/v1/completions', { prompt: 'hi', max_tokens: 1, logprobs: 999999 });
  assert.match((await json(res)).message, /^top_logprobs_num must be in \[0, \d+\], got 999999\.$/);
  res = await post('/generate', { text: 'hi', return_logprob: true, top_logprobs_num: -1, sampling_params: { max_new_tokens: 1 } });
  assert.equal(res.status, 400);
  assert.match((await json(res)).error.message, /^top_logprobs_num must be in \[0, \d+\], got -1\.$/);
  for (const input_ids of [[1, -2], [[1, 2], [3, -4]]]) {
    res = await post('/generate', { input_ids, sampling_params: { max_new_tokens: 1 } });
    assert.equal(res.status, 400);
    assert.match((await json(res)).error.message, /^input_ids must be integers in \[0, \d+\], got -[24]\.$/);
  }
  res = await post('/v1/completions', { prompt: [1, -2], max_tokens: 1 });
  assert.deepEqual([res.status, (await json(res)).param], [400, null]);
  res = await post('/v1/completions', { prompt: [1, 2.5], max_tokens: 1 });
  assert.equal(res.status, 400);
  res = await post('/v1/detokenize', { tokens: [99999999] });
  assert.equal(res.status, 400);
  assert.equal((await json(res)).type, 'DecodeError');
  await assertHealthy();
});

test('a client that disconnects aborts its request (the engine has nothing running afterwards)', async () => {
  const ac = new AbortController();
  const res = await fetch(`${base}/generate`, {
    method: 'POST', headers, signal: ac.signal,
    body: JSON.stringify({ text: 'Hello', sampling_params: { max_new_tokens: 3000, ignore_eos: true }, stream: true }),
  });
  const reader = (res.body as ReadableStream<Uint8Array>).getReader();
  await reader.read();
  ac.abort();
  let running = -1;
  for (let i = 0; i < 100; i++) {
    running = (await json(fetch(`${base}/get_server_info`, { headers }))).internal_states[0].num_running_reqs;
    if (running === 0) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.equal(running, 0);
  await assertHealthy();
});

test('flags whose feature is not built stop start-up with a clear message', () => {
  for (const [flags, re] of [
    [['--pp-size', '2', '--dp-size', '2'], /pipeline parallelism with data parallelism \(--pp-size 2 with --dp-size 2/],
    [['--speculative-algorithm', 'EAGLE3'], /speculative algorithm EAGLE3/],
  ] as [string[], RegExp][]) {
    const r = spawnSync(process.execPath, [TSGLANG_BIN, 'serve', ...flags], { env: { ...process.env, HOME }, encoding: 'utf8' });
    assert.notEqual(r.status, 0);
    assert.match(r.stderr, re);
    assert.match(r.stderr, /not supported by tsglang yet/);
  }
});
