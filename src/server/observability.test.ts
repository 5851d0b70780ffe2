// TTFT / ITL / E2E histograms measured from request arrival on every route (issue 14 defect 1), the
// --log-requests levels and the uvicorn-style access log (defect 2), against a slow fake engine.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Logger } from '../common/index.js';
import { httpServerSlice, parseServerArgs } from '../config/index.js';
import type { EngineApi, EngineInfo, GenerateOutput, GenerateRequest } from '../engine/index.js';
import { HttpServer } from './http_server.js';
import { JinjaChatPrompt } from './chat_prompt.js';
import { PLAIN_CHAT_OUTPUT } from './chat_output.js';
import { ServerMetrics } from './metrics.js';
import { requestLogMetadata, toStringTruncated, generateReqInput } from './request_logger.js';

const FIRST_DELAY_MS = 120;
const STEP_MS = 15;
const TOKENS = 4;

/** Answers every request with TOKENS tokens "a"; the first comes after FIRST_DELAY_MS (a slow prefill). */
class SlowEngine implements EngineApi {
  readonly info: EngineInfo = {
    modelPath: '/m', tokenizerPath: '/m', architecture: 'Fake', contextLength: 64, vocabSize: 100, eosTokenIds: [1],
    maxTotalNumTokens: 64, maxRunningRequests: 4, maxPrefillTokens: 64, chunkedPrefillSize: 64, pageSize: 1, disableRadixCache: false,
    maxReqInputLen: 60, defaultSamplingParams: {},
  };
  async *generate(req: GenerateRequest): AsyncGenerator<GenerateOutput> {
    await new Promise((r) => setTimeout(r, FIRST_DELAY_MS));
    const out = (i: number, n: number, text: string): GenerateOutput => ({
      rid: req.rid, index: 0, text, outputIds: Array.from({ length: n }, () => 7), finished: i === TOKENS,
      finishReason: i === TOKENS ? { type: 'length', length: TOKENS } : null, promptTokens: 3, completionTokens: i, cachedTokens: 0, numRetractions: 0,
    });
    if (!req.stream) {
      for (let i = 1; i < TOKENS; i++) await new Promise((r) => setTimeout(r, STEP_MS));
      yield out(TOKENS, TOKENS, 'a'.repeat(TOKENS));
      return;
    }
    for (let i = 1; i <= TOKENS; i++) {
      if (i > 1) await new Promise((r) => setTimeout(r, STEP_MS));
      yield out(i, 1, 'a');
    }
  }
  async tokenize(): Promise<number[][]> { return []; }
  abort(): void {}
  abortAll(): void {}
  async flushCache(): Promise<boolean> { return true; }
  async getLoad() { return { numRunningReqs: 0, numQueueReqs: 0, numUsedTokens: 0, tokenUsage: 0, evictableTokens: 0, genThroughput: 0, cacheHitRate: 0, numRetractedReqs: 0 }; }
  async shutdown(): Promise<void> {}
}

async function withServer(flags: string[], fn: (base: string, lines: string[]) => Promise<void>): Promise<void> {
  const lines: string[] = [];
  const logger = new Logger('info', '', (l) => lines.push(l));
  const engine = new SlowEngine();
  const { args } = parseServerArgs(flags);
  const server = new HttpServer({
    engine, tokenizer: null, config: httpServerSlice(args, 'm'), chatPrompt: new JinjaChatPrompt('{% for m in messages %}{{ m.content }}{% endfor %}', { bosToken: null, eosToken: null }),
    chatOutput: PLAIN_CHAT_OUTPUT, modelFacts: { modelType: 'fake', architectures: [] }, serverArgs: {},
    metrics: new ServerMetrics('m', engine), logger, version: 'test',
  });
  const port = await server.listen('127.0.0.1', 0);
  server.setReady(true);
  try { await fn(`http://127.0.0.1:${port}`, lines); } finally { await server.close(); }
}

function histogram(text: string, name: string): { sum: number; count: number } {
  const sum = Number(/^(\S+)_sum\{[^}]*\} (\S+)$/m.exec(text.split('\n').filter((l) => l.startsWith(`${name}_sum`)).join('\n'))?.[2] ?? NaN);
  const count = Number(text.split('\n').find((l) => l.startsWith(`${name}_count`))?.split(' ').pop() ?? NaN);
  return { sum, count };
}

/** POSTs and returns the ms until the first body byte and until the end. */
async function timed(url: string, body: unknown): Promise<{ ttfbMs: number; totalMs: number; status: number }> {
  const t0 = performance.now();
  const r = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const reader = r.body!.getReader();
  let ttfbMs = -1;
  for (;;) {
    const { done, value } = await reader.read();
    if (value && value.length > 0 && ttfbMs < 0) ttfbMs = performance.now() - t0;
    if (done) break;
  }
  return { ttfbMs, totalMs: performance.now() - t0, status: r.status };
}

const ROUTES: Array<[string, string, (stream: boolean) => unknown]> = [
  ['chat', '/v1/chat/completions', (stream) => ({ model: 'm', messages: [{ role: 'user', content: 'hi' }], stream })],
  ['completions', '/v1/completions', (stream) => ({ model: 'm', prompt: 'hi', stream })],
  ['generate', '/generate', (stream) => ({ text: 'hi', stream })],
];

for (const [name, path, body] of ROUTES) {
  for (const stream of [false, true]) {
    test(`TTFT / E2E histograms of ${name} (stream=${stream}) measured from arrival: close to the client's time to first byte`, async () => {
      await withServer(['--enable-metrics'], async (base) => {
        const t = await timed(base + path, body(stream));
        assert.equal(t.status, 200);
        const m = await (await fetch(`${base}/metrics`)).text();
        const ttft = histogram(m, 'sglang:time_to_first_token_seconds');
        const e2e = histogram(m, 'sglang:e2e_request_latency_seconds');
        const itl = histogram(m, 'sglang:inter_token_latency_seconds');
        assert.equal(ttft.count, 1);
        // the server saw the first output FIRST_DELAY_MS after arrival; the client can only see it later
        assert.ok(ttft.sum * 1000 >= FIRST_DELAY_MS * 0.9, `TTFT ${ttft.sum * 1000} ms < ${FIRST_DELAY_MS} ms engine delay`);
        assert.ok(ttft.sum * 1000 <= t.ttfbMs + 5, `TTFT ${ttft.sum * 1000} ms > client TTFB ${t.ttfbMs} ms`);
        assert.equal(e2e.count, 1);
        assert.ok(e2e.sum * 1000 >= FIRST_DELAY_MS + (TOKENS - 1) * STEP_MS * 0.8 && e2e.sum * 1000 <= t.totalMs + 5, `E2E ${e2e.sum * 1000} ms vs client ${t.totalMs} ms`);
        if (stream) {
          assert.equal(itl.count, TOKENS - 1);
          assert.ok(itl.sum * 1000 >= (TOKENS - 1) * STEP_MS * 0.8, `ITL sum ${itl.sum * 1000} ms`);
        }
      });
    });
  }
}

test('--log-requests: Receive/Finish lines at each level (SGLang RequestLogger fields and truncation)', async () => {
  for (const level of [0, 1, 2, 3]) {
    await withServer(['--log-requests', '--log-requests-level', String(level)], async (base, lines) => {
      await timed(`${base}/generate`, { text: 'hello world', sampling_params: { max_new_tokens: 4, temperature: 0 }, rid: 'r1' });
      const recv = lines.find((l) => l.includes('Receive: obj=GenerateReqInput('));
      const fin = lines.find((l) => l.includes('Finish: obj=GenerateReqInput('));
      assert.ok(recv && fin, `level ${level}: ${lines.join('')}`);
      assert.match(recv, /rid='r1'/);
      assert.equal(recv.includes("text='hello world'"), level >= 2, `level ${level} text`);
      assert.equal(recv.includes("sampling_params={"), level >= 1, `level ${level} sampling params: ${recv}`);
      if (level >= 1) assert.match(recv, /sampling_params=\{[^}]*'max_new_tokens': 4/);
      assert.equal(fin.includes("'text': 'aaaa'"), level >= 2);
      assert.match(fin, /'meta_info': \{'id': 'r1', 'finish_reason': \{'type': 'length', 'length': 4\}, 'prompt_tokens': 3, 'completion_tokens': 4/);
    });
  }
  // level 2 cuts strings and lists over 2048 as SGLang does: repr(head 1024) ... repr(tail 1024)
  const meta = requestLogMetadata(2);
  const long = 'x'.repeat(1500) + 'y'.repeat(1500);
  const s = toStringTruncated(generateReqInput({ rid: 'a', text: long }), meta.maxLength, meta.skipNames);
  assert.ok(s.includes(`text='${'x'.repeat(1024)}' ... '${'y'.repeat(1024)}'`));
  assert.ok(toStringTruncated(Array.from({ length: 3000 }, (_, i) => i), 2048).startsWith('[0, 1, 2'));
  assert.ok(toStringTruncated(Array.from({ length: 3000 }, (_, i) => i), 2048).includes('1023] ... [1976, '));
  assert.throws(() => requestLogMetadata(4), /Invalid --log-requests-level/);
});

test('access log: one uvicorn-style line per HTTP request at info level', async () => {
  await withServer([], async (base, lines) => {
    await timed(`${base}/v1/chat/completions`, { model: 'm', messages: [{ role: 'user', content: 'hi' }] });
    await fetch(`${base}/health`);
    await fetch(`${base}/nope`);
    await new Promise((r) => setTimeout(r, 20));
    const access = lines.filter((l) => / - "/.test(l));
    assert.equal(access.length, 3, access.join(''));
    assert.match(access[0], /\] 127\.0\.0\.1:\d+ - "POST \/v1\/chat\/completions HTTP\/1\.1" 200 OK\n$/);
    assert.match(access[1], /"GET \/health HTTP\/1\.1" 200 OK/);
    assert.match(access[2], /"GET \/nope HTTP\/1\.1" 404 Not Found/);
  });
});
