// Reliability against a spawned `tsglang serve` (embedded default model, one compute thread): one request must not
// take the server down or stall the others (issue 15). Each test reproduces one defect: a 20,000-prompt /generate
// batch and `n: 100000` are refused with a 400 before any work; a departed client's n fan-out stops; a slow one-word
// prompt does not hold up small prompts' tokenization; an /abort_request during tokenization answers 200 with
// finish_reason abort (never 499); the OpenAI routes compare the Content-Type's media type; /abort_request validates
// its body; /v1/tokenize takes SGLang's TokenizeRequest; SIGTERM refuses new requests on kept-alive connections with a
// 503 + Connection: close while every accepted stream ends with [DONE].
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { request as httpRequest, Agent } from 'node:http';
import { mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TSGLANG_BIN } from '../helpers/paths.js';
import { freePort } from '../../bench/serve_child.js';

const HOME = join(tmpdir(), 'tsglang-e2e-home');

interface Served { child: ChildProcess; base: string; port: number; stderr: () => string }

async function startServer(extra: string[] = []): Promise<Served> {
  mkdirSync(HOME, { recursive: true });
  const port = await freePort();
  const child = spawn(process.execPath, [TSGLANG_BIN, 'serve', '--port', String(port), '--num-threads', '1', ...extra], {
    env: { ...process.env, HOME, TSGLANG_CACHE_DIR: join(HOME, '.cache', 'tsglang') },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let err = '';
  child.stderr!.setEncoding('utf8');
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start in time:\n${err}`)), 300_000);
    child.stderr!.on('data', (d: string) => {
      err += d;
      if (err.includes('The server is fired up and ready to roll!')) { clearTimeout(timer); resolve(); }
    });
    child.once('exit', (code) => { clearTimeout(timer); reject(new Error(`server exited with ${code}:\n${err}`)); });
  });
  return { child, base: `http://127.0.0.1:${port}`, port, stderr: () => err };
}

async function stopServer(s: Served | undefined): Promise<void> {
  if (s && s.child.exitCode === null && s.child.signalCode === null) {
    const exited = new Promise((r) => s.child.once('exit', r));
    s.child.kill('SIGTERM');
    await exited;
  }
}

let srv: Served;
before(async () => { srv = await startServer(['--enable-metrics']); });
after(async () => { await stopServer(srv); });

const JSON_HEADERS = { 'content-type': 'application/json' };
const post = (path: string, body: unknown, headers: Record<string, string> = JSON_HEADERS, signal?: AbortSignal) =>
  fetch(srv.base + path, { method: 'POST', headers, body: typeof body === 'string' ? body : JSON.stringify(body), ...(signal ? { signal } : {}) });

async function load(): Promise<{ num_running_reqs: number; num_queue_reqs: number }> {
  const info = await (await fetch(`${srv.base}/get_server_info`)).json() as { internal_states: { num_running_reqs: number; num_queue_reqs: number }[] };
  return info.internal_states[0];
}

async function waitIdle(limitMs = 30_000): Promise<{ num_running_reqs: number; num_queue_reqs: number }> {
  const end = Date.now() + limitMs;
  let l = await load();
  while ((l.num_running_reqs > 0 || l.num_queue_reqs > 0) && Date.now() < end) {
    await new Promise((r) => setTimeout(r, 100));
    l = await load();
  }
  return l;
}

test('a /generate batch of 20,000 prompts is refused with a 400 before any work, the server stays healthy', async () => {
  const r = await post('/generate', { text: Array(20_000).fill('hi'), sampling_params: { max_new_tokens: 1 } }, JSON_HEADERS, AbortSignal.timeout(30_000));
  assert.equal(r.status, 400);
  const body = await r.json() as { error: { message: string } };
  assert.match(body.error.message, /20000 prompts × n=1 = 20000 samples; tsglang serves at most 4096 samples per request/);
  assert.equal((await fetch(`${srv.base}/health`)).status, 200);
  // /v1/completions takes a prompt list too
  const c = await post('/v1/completions', { model: 'm', prompt: Array(5000).fill('hi'), max_tokens: 1 });
  assert.equal(c.status, 400);
  assert.match((await c.json() as { message: string }).message, /5000 prompts × n=1/);
  assert.deepEqual(await waitIdle(), { ...(await load()), num_running_reqs: 0, num_queue_reqs: 0 });
});

test('a batch of 24 prompts (over Node\'s 10 listeners per signal) answers every prompt without a MaxListenersExceededWarning', async () => {
  const r = await post('/generate', { text: Array.from({ length: 24 }, (_, i) => `prompt ${i}`), sampling_params: { max_new_tokens: 2, temperature: 0 } });
  assert.equal(r.status, 200);
  const out = await r.json() as { output_ids: number[] }[];
  assert.equal(out.length, 24);
  for (const o of out) assert.equal(o.output_ids.length, 2);
  assert.doesNotMatch(srv.stderr(), /MaxListenersExceededWarning/);
});

test('n above the limit (100000) is refused with a 400 on chat, completions and /generate; a departed client\'s n fan-out stops', async () => {
  const chat = await post('/v1/chat/completions', { model: 'm', messages: [{ role: 'user', content: 'hi' }], n: 100_000, max_tokens: 1 }, JSON_HEADERS, AbortSignal.timeout(30_000));
  assert.equal(chat.status, 400);
  assert.match((await chat.json() as { message: string }).message, /n=100000 samples; tsglang serves at most 4096 samples per request/);
  const gen = await post('/generate', { text: 'hi', sampling_params: { n: 100_000, max_new_tokens: 1 } });
  assert.equal(gen.status, 400);
  const comp = await post('/v1/completions', { model: 'm', prompt: 'hi', n: 5000, max_tokens: 1 });
  assert.equal(comp.status, 400);
  // 256 long samples; the client leaves after the first bytes: every sample is aborted
  const ac = new AbortController();
  const r = await post('/v1/chat/completions', { model: 'm', messages: [{ role: 'user', content: 'hi' }], n: 256, max_tokens: 3000, ignore_eos: true, stream: true }, JSON_HEADERS, ac.signal);
  const reader = r.body!.getReader();
  await reader.read();
  ac.abort();
  await reader.cancel().catch(() => {});
  const l = await waitIdle();
  assert.equal(l.num_running_reqs, 0);
  assert.equal(l.num_queue_reqs, 0);
});

test('a slow 200 KB one-word prompt does not hold up small prompts: they are tokenized and answered before it', async () => {
  const order: string[] = [];
  const big = post('/v1/tokenize', { prompt: 'x'.repeat(200_000) }).then(async (r) => { order.push('big'); return r; });
  await new Promise((r) => setTimeout(r, 200));
  for (let i = 0; i < 5; i++) {
    const r = await post('/v1/tokenize', { prompt: `hello ${i}` });
    assert.equal(r.status, 200);
    order.push(`small ${i}`);
  }
  const b = await big;
  assert.equal(b.status, 200);
  assert.equal((await b.json() as { count: number }).count, 25_000);
  assert.deepEqual(order, ['small 0', 'small 1', 'small 2', 'small 3', 'small 4', 'big']);
});

test('/abort_request during tokenization: the request answers 200 with finish_reason abort (never 499)', async () => {
  // one 32,000-letter word: ~0.5 s of BPE on the tokenizer worker, 4000 tokens (fits the 4096 context)
  // An attempt whose abort lands after the tokenizer finished (a loaded machine) says nothing about tokenization:
  // it must still end well ('Abort in running' or done), and the next attempt tries again.
  let aborted = 0;
  for (let attempt = 0; attempt < 5 && aborted === 0; attempt++) {
    const rid = `slow-${attempt}`;
    const pending = post('/generate', { rid, text: 'x'.repeat(32_000), sampling_params: { max_new_tokens: 2, temperature: 0 } });
    await new Promise((r) => setTimeout(r, 100));
    const a = await post('/abort_request', { rid });
    assert.equal(a.status, 200);
    const r = await pending;
    assert.equal(r.status, 200, `status ${r.status}: ${await r.clone().text()}`);
    const body = await r.json() as { output_ids: number[]; meta_info: { finish_reason: { type: string; message?: string } } };
    const fr = body.meta_info.finish_reason;
    if (fr.type === 'abort' && fr.message === 'Abort in waiting queue') {
      aborted++;
      assert.deepEqual(fr, { type: 'abort', message: 'Abort in waiting queue' });
      assert.deepEqual(body.output_ids, []);
    } else if (fr.type === 'abort') assert.equal(fr.message, 'Abort in running');
    else assert.equal(fr.type, 'length');
  }
  assert.equal(aborted, 1, 'one abort landed while the prompt was being tokenized');
});

test('OpenAI routes compare the Content-Type\'s media type (SGLang validate_json_request)', async () => {
  const body = { model: 'm', prompt: 'hi', max_tokens: 1 };
  for (const ct of ['text/plain; application/json', 'application/jsonp', 'application/json-patch+json', 'text/plain', 'application/json ; charset=utf-8']) {
    for (const path of ['/v1/completions', '/v1/chat/completions']) {
      const r = await post(path, path.includes('chat') ? { model: 'm', messages: [{ role: 'user', content: 'hi' }], max_tokens: 1 } : body, { 'content-type': ct });
      assert.equal(r.status, 400, `${path} with ${ct}`);
      const e = await r.json() as { type: string; message: string; code: number };
      assert.equal(e.type, 'Bad Request');
      assert.match(e.message, /Unsupported Media Type: Only 'application\/json' is allowed/);
    }
  }
  for (const ct of ['application/json', 'Application/JSON; charset=utf-8', 'application/json;charset=UTF-8']) {
    assert.equal((await post('/v1/completions', body, { 'content-type': ct })).status, 200, ct);
  }
});

test('/abort_request validates its body as AbortReqInput: 400 for anything but an object with the right field types', async () => {
  for (const raw of ['[1]', '"x"', '7', 'null', '', 'true', '{"rid": 5}', '{"abort_all": "yes"}']) {
    const r = await post('/abort_request', raw);
    assert.equal(r.status, 400, `body ${JSON.stringify(raw)}`);
    const e = await r.json() as { object?: string; code?: number };
    assert.equal(e.code, 400);
  }
  for (const raw of ['{}', '{"rid": "no-such-rid"}', '{"abort_all": false}', '{"rid": "x", "extra": 1}']) {
    assert.equal((await post('/abort_request', raw)).status, 200, raw);
  }
});

test('/v1/tokenize takes SGLang\'s TokenizeRequest (prompt, no messages): a messages body is a 400 validation error', async () => {
  const r = await post('/v1/tokenize', { messages: [{ role: 'user', content: 'hi' }] });
  assert.equal(r.status, 400);
  const e = await r.json() as { type: string; message: string };
  assert.equal(e.type, 'Bad Request');
  assert.equal(e.message, '1 validation error: prompt: Field required');
  const ok = await post('/v1/tokenize', { prompt: ['a b', 'c'], add_special_tokens: false });
  assert.equal(ok.status, 200);
  assert.equal((await ok.json() as { count: number[] }).count.length, 2);
});

/** One HTTP/1.1 request on `agent` (kept-alive sockets): status, headers, body text. */
function rawRequest(port: number, agent: Agent, path: string, body: unknown): Promise<{ status: number; headers: Record<string, unknown>; text: string }> {
  return new Promise((resolve, reject) => {
    const data = JSON.stringify(body);
    const req = httpRequest({ host: '127.0.0.1', port, path, method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => { text += d; });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(data);
  });
}

test('SIGTERM: new requests on kept-alive connections get 503 + Connection: close; every accepted stream ends with [DONE]; a prompt being tokenized is answered as aborted', async () => {
  const s = await startServer();
  try {
    const agent = new Agent({ keepAlive: true, maxSockets: 16 });
    // warm the agent: 8 kept-alive sockets, idle after their answers
    await Promise.all(Array.from({ length: 8 }, () => rawRequest(s.port, agent, '/generate', { input_ids: [1, 2], sampling_params: { max_new_tokens: 1 } })));
    // 6 long streams under way
    const streams = Array.from({ length: 6 }, (_, i) => rawRequest(s.port, agent, '/v1/chat/completions', {
      model: 'm', messages: [{ role: 'user', content: `stream ${i}` }], max_tokens: 3000, ignore_eos: true, stream: true,
    }));
    // a long prompt still being tokenized when the signal comes (a 520 K-letter word: seconds of BPE): answered at
    // once as aborted in the queue, never cut
    let x = 1;
    const word = Array.from({ length: 520_000 }, () => 'abcdefghij'[(x = (x * 48271) % 2147483647) % 10]).join('');
    const tokenizing = rawRequest(s.port, agent, '/generate', { text: word, sampling_params: { max_new_tokens: 2 } });
    await new Promise((r) => setTimeout(r, 1500));
    s.child.kill('SIGTERM');
    // as each stream ends, its kept-alive socket is free again: a new request goes out on it at once (the case that
    // was accepted, streamed and cut), and two more on the agent's idle sockets
    const late = [...streams.map((p, i) => p.then(() => rawRequest(s.port, agent, '/v1/chat/completions', {
      model: 'm', messages: [{ role: 'user', content: `late ${i}` }], max_tokens: 50, stream: true,
    }))), ...[0, 1].map((i) => new Promise((r) => setTimeout(r, 20)).then(() => rawRequest(s.port, agent, '/generate', { text: `late idle ${i}`, sampling_params: { max_new_tokens: 4 } })))]
      .map((p) => p.catch((e: Error) => ({ status: -1, headers: {} as Record<string, unknown>, text: e.message })));
    const lateAnswers = await Promise.all(late);
    let refused = 0;
    for (const r of lateAnswers) {
      // refused cleanly, or (the server was gone by then) no connection: never accepted and then cut
      if (r.status === -1) { assert.match(r.text, /ECONNREFUSED|ECONNRESET|socket hang up/); continue; }
      refused++;
      assert.equal(r.status, 503, r.text);
      assert.equal(r.headers.connection, 'close');
      assert.deepEqual(JSON.parse(r.text), { object: 'error', message: 'The server is shutting down.', type: 'ServiceUnavailableError', param: null, code: 503 });
    }
    assert.ok(refused >= 1, JSON.stringify(lateAnswers));
    const t = await tokenizing;
    assert.equal(t.status, 200, t.text.slice(0, 300));
    assert.deepEqual(JSON.parse(t.text).meta_info.finish_reason, { type: 'abort', message: 'Abort in waiting queue' });
    const done = await Promise.all(streams);
    for (const d of done) {
      assert.equal(d.status, 200);
      assert.ok(d.text.trimEnd().endsWith('data: [DONE]'), `stream cut without [DONE]: ...${d.text.slice(-200)}`);
      assert.match(d.text, /"finish_reason":"(abort|length)"/);
    }
    const code = await new Promise<number | null>((r) => { if (s.child.exitCode !== null) r(s.child.exitCode); else s.child.once('exit', (c) => r(c)); });
    assert.equal(code, 0);
    agent.destroy();
  } finally {
    await stopServer(s);
  }
});

test('the KV pool\'s commitment is visible: start-up line, /get_server_info kv_cache_max_bytes, /metrics committed bytes', async () => {
  const line = srv.stderr().split('\n').find((l) => l.includes('KV Cache is allocated.')) ?? '';
  const m = /committed as it fills, up to ([\d.]+) GB/.exec(line);
  assert.ok(m, line);
  const info = await (await fetch(`${srv.base}/get_server_info`)).json() as { kv_cache_max_bytes: number; internal_states: { kv_cache_committed_bytes: number }[] };
  assert.ok(info.kv_cache_max_bytes > 0);
  assert.equal((info.kv_cache_max_bytes / 1024 ** 3).toFixed(2), m[1]);
  const committed = info.internal_states[0].kv_cache_committed_bytes;
  assert.ok(committed > 0 && committed <= info.kv_cache_max_bytes, String(committed));
  const metrics = await (await fetch(`${srv.base}/metrics`)).text();
  const g = /^sglang:kv_cache_committed_bytes\{[^}]*\} (\d+)/m.exec(metrics);
  assert.ok(g, metrics.slice(0, 300));
  assert.ok(Number(g[1]) >= committed);
});
