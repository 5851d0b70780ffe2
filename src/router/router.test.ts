// Router unit and in-process HTTP tests against scripted workers (node:http servers in this process): flags, policies,
// the cache-aware tree, circuit breaker, backoff, retries on another worker, PD bootstrap injection and logprob merge,
// a decode worker dying mid-stream, API key, payload limit, Prometheus metrics.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Logger } from '../common/index.js';
import { ApproxRadixTree } from './radix_tree.js';
import { CacheAwarePolicy, PowerOfTwoPolicy, RoundRobinPolicy } from './policies.js';
import { parseRouterArgs, type RouterArgs } from './router_args.js';
import { startRouter, type RunningRouter } from './router_server.js';
import { CircuitBreaker, Worker } from './worker.js';
import { backoffMs } from './http_forward.js';
import { injectBootstrap, sequenceCount } from './pd_request.js';

const QUIET = new Logger('error', '', () => undefined);
const CB = { failureThreshold: 10, successThreshold: 3, timeoutMs: 60_000, windowMs: 120_000, disabled: false };

interface Scripted { url: string; hits: { path: string; body: Record<string, unknown> }[]; close(): Promise<void>; server: http.Server }
type Handler = (path: string, body: Record<string, unknown>, res: http.ServerResponse, req: http.IncomingMessage) => void;

async function scripted(handler: Handler): Promise<Scripted> {
  const hits: Scripted['hits'] = [];
  const server = http.createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on('data', (c: Buffer) => parts.push(c));
    req.on('end', () => {
      const path = (req.url ?? '/').split('?')[0];
      if (path === '/health') { res.end('ok'); return; }
      const body = parts.length ? (JSON.parse(Buffer.concat(parts).toString()) as Record<string, unknown>) : {};
      hits.push({ path, body });
      handler(path, body, res, req);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { url, hits, server, close: () => { server.closeAllConnections(); return new Promise((r) => server.close(() => r())); } };
}

const json = (res: http.ServerResponse, status: number, v: unknown): void => {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(v));
};

function args(extra: string[]): RouterArgs {
  const a = parseRouterArgs([...extra, '--host', '127.0.0.1', '--port', '0', '--prometheus-port', '0', '--worker-startup-check-interval', '1', '--retry-initial-backoff-ms', '1']);
  assert.notEqual(a, 'help');
  return a as RouterArgs;
}

async function post(port: number, path: string, body: unknown, headers: Record<string, string> = {}): Promise<{ status: number; text: string; headers: http.IncomingHttpHeaders }> {
  const r = await fetch(`http://127.0.0.1:${port}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: typeof body === 'string' ? body : JSON.stringify(body) });
  return { status: r.status, text: await r.text(), headers: Object.fromEntries(r.headers) };
}

test('flags: SGLang names and defaults, PD --prefill URL PORT|none, errors', () => {
  const a = parseRouterArgs(['--pd-disaggregation', '--prefill', 'http://p:30000', '8998', '--prefill', 'http://p2:30000', 'none', '--decode', 'http://d:30001', '--host', '127.0.0.1', '--port', '30000']) as RouterArgs;
  assert.deepEqual(a.prefill, [['http://p:30000', 8998], ['http://p2:30000', null]]);
  assert.deepEqual(a.decode, ['http://d:30001']);
  assert.equal(a.policy, 'cache_aware');
  assert.equal(a.cacheThreshold, 0.3);
  assert.equal(a.balanceAbsThreshold, 64);
  assert.equal(a.retryMaxRetries, 5);
  assert.equal(a.cbFailureThreshold, 10);
  assert.equal(a.prometheusPort, 29000);
  assert.equal(a.maxPayloadSize, 512 * 1024 * 1024);
  const r = parseRouterArgs(['--worker-urls', 'http://a:1', 'http://b:2', '--policy', 'round_robin']) as RouterArgs;
  assert.deepEqual(r.workerUrls, ['http://a:1', 'http://b:2']);
  assert.throws(() => parseRouterArgs(['--worker-urls', 'http://a:1', '--policy', 'lpm']), /invalid choice: 'lpm'/);
  assert.throws(() => parseRouterArgs(['--pd-disaggregation', '--decode', 'http://d:1']), /at least one --prefill/);
  assert.throws(() => parseRouterArgs(['--worker-urls', 'ftp://x']), /invalid worker URL/);
  assert.throws(() => parseRouterArgs(['--worker-urls', 'http://a:1', '--bogus']), /unrecognized arguments: --bogus/);
  assert.equal(parseRouterArgs(['--help']), 'help');
});

test('radix tree: prefix match, tenant sizes, LRU eviction by size', () => {
  let t = 0;
  const tree = new ApproxRadixTree(() => ++t);
  tree.insert('hello world', 'a');
  tree.insert('hello there', 'b');
  assert.deepEqual(tree.prefixMatch('hello world!'), { matchedChars: 11, tenant: 'a' });
  assert.equal(tree.prefixMatch('hello th').tenant, 'b');
  assert.equal(tree.prefixMatch('hello').matchedChars, 5);
  assert.equal(tree.prefixMatch('xyz').tenant, null);
  assert.equal(tree.tenantSizes().get('a'), 11);
  assert.equal(tree.tenantSizes().get('b'), 11);
  tree.insert('goodbye', 'a');
  tree.evictBySize(11); // a owns 18: its oldest leaf (' world' branch) goes first, then the shared 'hello ' (b keeps its 11)
  assert.equal(tree.tenantSizes().get('a'), 7);
  assert.equal(tree.prefixMatch('hello world', new Set(['a'])).tenant, null);
  assert.equal(tree.prefixMatch('goodbye').tenant, 'a');
  assert.equal(tree.prefixMatch('hello there').matchedChars, 11);
});

test('policies: round_robin cycles, power_of_two takes the lighter, cache_aware sticks to the prefix owner and rebalances', () => {
  const ws = ['http://a', 'http://b', 'http://c'].map((u) => new Worker(u, 'regular', null, CB));
  const rr = new RoundRobinPolicy();
  assert.deepEqual([0, 1, 2, 3].map(() => rr.select(ws)!.worker.url), ['http://a', 'http://b', 'http://c', 'http://a']);
  ws[0].load = 5;
  const p2 = new PowerOfTwoPolicy(() => 0); // draws a then b
  assert.equal(p2.select(ws)!.worker.url, 'http://b');
  ws[0].load = 0;
  const ca = new CacheAwarePolicy({ cacheThreshold: 0.3, balanceAbsThreshold: 64, balanceRelThreshold: 1.5, evictionIntervalSecs: 0, maxTreeSize: 1 << 20 });
  const first = ca.select(ws, 'You are a helpful assistant. Question one')!;
  const again = ca.select(ws, 'You are a helpful assistant. Question two')!;
  assert.equal(again.worker.url, first.worker.url);
  assert.equal(again.cacheHit, true);
  const other = ca.select(ws, 'Completely different text')!;
  assert.notEqual(other.worker.url, first.worker.url); // smallest tenant
  first.worker.load = 200;
  const bal = ca.select(ws, 'You are a helpful assistant. Question three')!;
  assert.equal(bal.balanced, true);
  assert.notEqual(bal.worker.url, first.worker.url);
});

test('circuit breaker: opens after N failures, half-opens after the timeout, closes after M successes; backoff grows with jitter', () => {
  let now = 0;
  const seen: string[] = [];
  const cb = new CircuitBreaker({ ...CB, failureThreshold: 3, successThreshold: 2, timeoutMs: 1000 }, (f, t) => seen.push(`${f}>${t}`), () => now);
  cb.record(false); cb.record(false);
  assert.equal(cb.state, 'closed');
  cb.record(false);
  assert.equal(cb.state, 'open');
  assert.equal(cb.canExecute(), false);
  now = 1500;
  assert.equal(cb.state, 'half_open');
  cb.record(false);
  assert.equal(cb.state, 'open');
  now = 3000;
  cb.record(true); cb.record(true);
  assert.equal(cb.state, 'closed');
  assert.deepEqual(seen, ['closed>open', 'open>half_open', 'half_open>open', 'open>half_open', 'half_open>closed']);
  const r = { maxRetries: 5, initialBackoffMs: 50, maxBackoffMs: 30000, multiplier: 1.5, jitter: 0.2 };
  assert.equal(backoffMs(r, 1, () => 0.5), 50);
  assert.equal(backoffMs(r, 3, () => 0.5), 112.5);
  assert.equal(backoffMs(r, 1, () => 1), 60);
  assert.equal(backoffMs(r, 1, () => 0), 40);
  assert.equal(backoffMs({ ...r, maxBackoffMs: 70 }, 5, () => 0.5), 70);
});

test('bootstrap injection: scalar for one sequence, arrays for batches and n > 1', () => {
  const one = injectBootstrap('/generate', { text: 'hi' }, '10.0.0.1', 8998);
  assert.equal(one['bootstrap_host'], '10.0.0.1');
  assert.equal(one['bootstrap_port'], 8998);
  assert.ok(Number.isSafeInteger(one['bootstrap_room']) && (one['bootstrap_room'] as number) >= 0);
  assert.equal(sequenceCount('/generate', { text: ['a', 'b'], sampling_params: { n: 3 } }), 6);
  assert.equal(sequenceCount('/v1/chat/completions', { messages: [], n: 2 }), 2);
  const b = injectBootstrap('/v1/completions', { prompt: ['a', 'b', 'c'] }, 'h', null);
  assert.deepEqual(b['bootstrap_port'], [null, null, null]);
  assert.equal(new Set(b['bootstrap_room'] as number[]).size, 3);
});

test('regular mode over HTTP: round robin spreads, a 503 is retried on the other worker, metrics, request id, api key, payload limit', async (t) => {
  const okW = await scripted((path, body, res) => json(res, 200, { text: 'ok', echo: body }));
  let busyHits = 0;
  const busyW = await scripted((path, body, res) => { busyHits++; json(res, 503, { error: 'busy' }); });
  let router: RunningRouter | null = null;
  t.after(async () => { await router?.close(); await okW.close(); await busyW.close(); });
  router = await startRouter(args(['--worker-urls', busyW.url, okW.url, '--policy', 'round_robin', '--api-key', 'sk-1', '--max-payload-size', '2000']), QUIET);
  const auth = { authorization: 'Bearer sk-1' };
  for (let i = 0; i < 4; i++) {
    const r = await post(router.port, '/generate', { text: `q${i}` }, { ...auth, 'x-request-id': `rid-${i}` });
    assert.equal(r.status, 200, r.text);
    assert.equal(JSON.parse(r.text).text, 'ok');
    assert.equal(r.headers['x-request-id'], `rid-${i}`);
  }
  assert.equal(okW.hits.length, 4);
  assert.ok(busyHits >= 2, `the busy worker was tried (${busyHits})`);
  const unauth = await post(router.port, '/generate', { text: 'x' });
  assert.equal(unauth.status, 401);
  assert.equal(JSON.parse(unauth.text).error.code, 'unauthorized');
  const big = await post(router.port, '/generate', { text: 'x'.repeat(5000) }, auth);
  assert.equal(big.status, 413);
  assert.deepEqual(Object.keys(JSON.parse(big.text).error), ['type', 'code', 'message']);
  const m = await (await fetch(`http://127.0.0.1:${router.prometheusPort}/metrics`)).text();
  assert.match(m, /sgl_router_requests_total\{route="\/generate"\} 6/);
  assert.match(m, /sgl_router_retries_total\{route="\/generate"\} [1-9]/);
  assert.match(m, new RegExp(`sgl_router_processed_requests_total\\{worker="${okW.url}"\\} 4`));
  assert.match(m, /sgl_router_cb_state\{worker=".*"\} 0/);
});

test('PD mode over HTTP: same body to both with bootstrap fields, decode answer returned with prefill logprobs merged; decode dying mid-stream cuts the client and marks it unhealthy', async (t) => {
  const prefill = await scripted((path, body, res) => json(res, 200, { text: '', meta_info: { input_token_logprobs: [[null, 1, null], [-0.5, 2, null]] } }));
  const decode = await scripted((path, body, res) => {
    if (body['stream'] === true) {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: {"text":"a"}\n\n');
      setTimeout(() => res.socket?.destroy(), 30); // dies mid-stream
      return;
    }
    json(res, 200, { text: 'decoded', meta_info: { input_token_logprobs: [], output_token_logprobs: [[-0.1, 7, null]] } });
  });
  let router: RunningRouter | null = null;
  t.after(async () => { await router?.close(); await prefill.close(); await decode.close(); });
  router = await startRouter(args(['--pd-disaggregation', '--prefill', prefill.url, '8998', '--decode', decode.url]), QUIET);
  const r = await post(router.port, '/generate', { text: 'hello', return_logprob: true, sampling_params: { max_new_tokens: 4 } });
  assert.equal(r.status, 200, r.text);
  const out = JSON.parse(r.text);
  assert.equal(out.text, 'decoded');
  assert.deepEqual(out.meta_info.input_token_logprobs, [[null, 1, null], [-0.5, 2, null]]);
  const pb = prefill.hits[0].body;
  const db = decode.hits[0].body;
  assert.deepEqual(pb, db);
  assert.equal(pb['bootstrap_host'], '127.0.0.1');
  assert.equal(pb['bootstrap_port'], 8998);
  assert.equal(typeof pb['bootstrap_room'], 'number');
  // streaming through a decode worker that dies: the client's stream breaks (no hang), the worker is unhealthy
  const resp = await fetch(`http://127.0.0.1:${router.port}/generate`, { method: 'POST', body: JSON.stringify({ text: 'x', stream: true }) });
  assert.equal(resp.status, 200);
  await assert.rejects(resp.text());
  assert.equal(router.workers.find((w) => w.role === 'decode')!.healthy, false);
  const none = await post(router.port, '/generate', { text: 'y' });
  assert.equal(none.status, 503);
  assert.deepEqual(JSON.parse(none.text).error, { type: 'Service Unavailable', code: 'server_selection_failed', message: 'No available prefill/decode workers (all circuits open or unhealthy)' });
});
