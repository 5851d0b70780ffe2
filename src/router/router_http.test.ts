// The router over HTTP in regular mode against scripted workers: spreading and retries, request ids, API-key scoping
// (public routes open, generation and admin routes closed), the payload limit, metrics, the manual policy's header,
// --dp-aware expansion with data_parallel_rank, CORS, and the admin surface (/workers, /add_worker, /remove_worker,
// /list_workers, /flush_cache, /get_loads, /readiness, /health_generate, pass-through GETs).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { call, json, post, scripted, testRouter, type Scripted } from './scripted_worker.case.js';
import type { RunningRouter } from './router_server.js';

const ok = (name: string) => (path: string, body: Record<string, unknown>, res: import('node:http').ServerResponse) => {
  if (path === '/get_server_info') return json(res, 200, { name, dp_size: 1 });
  if (path === '/get_model_info') return json(res, 200, { model_path: name });
  if (path === '/health_generate') return json(res, 200, {});
  if (path === '/flush_cache') return json(res, 200, {});
  if (path === '/get_load') return json(res, 200, [{ dp_rank: 0, num_reqs: 0, num_waiting_reqs: 0, num_tokens: 7 }]);
  json(res, 200, { text: name, echo: body });
};

test('regular mode: round robin spreads, a 503 is retried on the other worker, request ids, api-key scoping, payload limit, metrics', async (t) => {
  const okW = await scripted(ok('ok'));
  let busyHits = 0;
  const busyW = await scripted((path, body, res) => {
    if (path !== '/generate') return ok('busy')(path, body, res);
    busyHits++;
    json(res, 503, { error: 'busy' });
  });
  let router: RunningRouter | null = null;
  t.after(async () => { await router?.close(); await okW.close(); await busyW.close(); });
  router = await testRouter(['--worker-urls', busyW.url, okW.url, '--policy', 'round_robin', '--api-key', 'sk-1', '--max-payload-size', '2000']);
  const auth = { authorization: 'Bearer sk-1' };
  for (let i = 0; i < 4; i++) {
    const r = await post(router.port, '/generate', { text: `q${i}` }, { ...auth, 'x-request-id': `rid-${i}` });
    assert.equal(r.status, 200, r.text);
    assert.equal(JSON.parse(r.text).text, 'ok');
    assert.equal(r.headers['x-request-id'], `rid-${i}`);
  }
  assert.equal(okW.on('/generate').length, 4);
  assert.ok(busyHits >= 2, `the busy worker was tried (${busyHits})`);
  assert.equal(okW.on('/generate')[0].headers['authorization'], 'Bearer sk-1', 'the router sends its key to workers');
  const gen = await post(router.port, '/v1/chat/completions', { messages: [{ role: 'user', content: 'hi' }] }, auth);
  assert.match(gen.headers['x-request-id'], /^chatcmpl-[A-Za-z0-9]{24}$/);
  // public routes need no key; generation and admin routes do
  assert.equal((await call(router.port, 'GET', '/health')).text, 'OK');
  assert.equal((await call(router.port, 'GET', '/liveness')).status, 200);
  assert.equal(JSON.parse((await call(router.port, 'GET', '/get_model_info')).text).model_path, 'busy', 'the first healthy worker answers');
  const unauth = await post(router.port, '/generate', { text: 'x' });
  assert.equal(unauth.status, 401);
  assert.deepEqual(Object.keys(JSON.parse(unauth.text).error), ['type', 'code', 'message']);
  assert.equal((await call(router.port, 'GET', '/list_workers')).status, 401);
  const big = await post(router.port, '/generate', { text: 'x'.repeat(5000) }, auth);
  assert.equal(big.status, 413);
  assert.equal(JSON.parse(big.text).error.code, 'payload_too_large');
  const m = await (await fetch(`http://127.0.0.1:${router.prometheusPort}/metrics`)).text();
  assert.match(m, /sgl_router_requests_total\{route="\/generate"\} 6/);
  assert.match(m, /sgl_router_retries_total\{route="\/generate"\} [1-9]/);
  assert.match(m, new RegExp(`sgl_router_processed_requests_total\\{worker="${okW.url}"\\} 4`));
  assert.match(m, /sgl_router_cb_state\{worker=".*"\} 0/);
});

test('admin surface: /readiness, /health_generate, /workers CRUD, /add_worker + /list_workers + /remove_worker, /flush_cache (200 and 206), /get_loads', async (t) => {
  const a = await scripted(ok('a'));
  const b = await scripted(ok('b'));
  let router: RunningRouter | null = null;
  t.after(async () => { await router?.close(); await a.close(); await b.close(); });
  router = await testRouter(['--worker-urls', a.url, '--policy', 'round_robin']);
  const p = router.port;
  assert.deepEqual(JSON.parse((await call(p, 'GET', '/readiness')).text), { status: 'ready', healthy_workers: 1, total_workers: 1 });
  assert.equal((await call(p, 'GET', '/health_generate')).text, `Health generate passed on ${a.url}`);
  assert.equal(JSON.parse((await call(p, 'GET', '/get_server_info')).text).name, 'a');
  const added = await call(p, 'POST', `/add_worker?url=${encodeURIComponent(b.url)}`);
  assert.equal(added.status, 200);
  assert.equal(added.text, `Successfully added worker: ${b.url}`);
  assert.equal((await call(p, 'POST', `/add_worker?url=${encodeURIComponent(b.url)}`)).text, `Worker ${b.url} already exists`);
  assert.deepEqual(JSON.parse((await call(p, 'GET', '/list_workers')).text), { urls: [a.url, b.url] });
  const seen = await Promise.all([0, 1, 2, 3].map(async () => JSON.parse((await post(p, '/generate', { text: 'x' })).text).text as string));
  assert.deepEqual(seen.sort(), ['a', 'a', 'b', 'b']);
  const list = JSON.parse((await call(p, 'GET', '/workers')).text);
  assert.equal(list.total, 2);
  assert.deepEqual(list.stats, { prefill_count: 0, decode_count: 0, regular_count: 2 });
  assert.deepEqual(Object.keys(list.workers[0]).slice(0, 8), ['url', 'model_id', 'worker_type', 'is_healthy', 'load', 'connection_mode', 'priority', 'cost']);
  assert.deepEqual(JSON.parse((await call(p, 'GET', '/get_loads')).text), { workers: [{ worker: a.url, load: 7 }, { worker: b.url, load: 7 }] });
  const flushed = await call(p, 'POST', '/flush_cache');
  assert.equal(flushed.status, 200);
  assert.deepEqual(JSON.parse(flushed.text), { status: 'success', message: 'Successfully flushed cache on all 2 HTTP workers', workers_flushed: 2, total_http_workers: 2, total_workers: 2 });
  assert.equal(JSON.parse((await call(p, 'DELETE', `/workers/${encodeURIComponent(b.url)}`)).text).message, `Successfully removed worker: ${b.url}`);
  assert.deepEqual(JSON.parse((await call(p, 'DELETE', `/workers/${encodeURIComponent(b.url)}`)).text), { error: `Worker ${b.url} not found`, code: 'REMOVE_WORKER_FAILED' });
  assert.deepEqual(JSON.parse((await call(p, 'GET', `/workers/${encodeURIComponent(b.url)}`)).text), { error: `Worker ${b.url} not found`, code: 'WORKER_NOT_FOUND' });
  const viaRest = await fetch(`http://127.0.0.1:${p}/workers`, { method: 'POST', body: JSON.stringify({ url: b.url }) });
  assert.deepEqual(await viaRest.json(), { success: true, message: `Successfully added worker: ${b.url}`, worker: null });
  assert.equal((await call(p, 'POST', `/remove_worker?url=${encodeURIComponent(b.url)}`)).text, `Successfully removed worker: ${b.url}`);
  assert.equal(JSON.parse((await call(p, 'GET', '/workers')).text).total, 1);
  // a worker whose cache flush fails: 206 partial_success
  const broken = await scripted((path, body, res) => json(res, 500, { error: 'no' }));
  t.after(() => broken.close());
  await call(p, 'POST', `/add_worker?url=${encodeURIComponent(broken.url)}`);
  const partial = await call(p, 'POST', '/flush_cache');
  assert.equal(partial.status, 206);
  const pj = JSON.parse(partial.text);
  assert.equal(pj.status, 'partial_success');
  assert.deepEqual(pj.successful, [a.url]);
  assert.equal(pj.failed[0].worker, broken.url);
  // unhealthy worker set: /readiness 503
  for (const w of router.workers) w.markUnhealthy();
  const nr = await call(p, 'GET', '/readiness');
  assert.equal(nr.status, 503);
  assert.deepEqual(JSON.parse(nr.text), { status: 'not ready', reason: 'insufficient healthy workers' });
  const none = await post(p, '/generate', { text: 'x' });
  assert.equal(none.status, 503);
  assert.deepEqual(JSON.parse(none.text).error, { type: 'Service Unavailable', code: 'no_available_workers', message: 'No available workers (all circuits open or unhealthy)' });
});

test('--dp-aware: one target per DP rank from /get_server_info, each request carries its data_parallel_rank', async (t) => {
  const w = await scripted((path, body, res) => (path === '/get_server_info' ? json(res, 200, { dp_size: 3 }) : json(res, 200, { rank: body['data_parallel_rank'] })));
  let router: RunningRouter | null = null;
  t.after(async () => { await router?.close(); await w.close(); });
  router = await testRouter(['--worker-urls', w.url, '--dp-aware', '--policy', 'round_robin']);
  assert.deepEqual(router.workers.map((x) => x.url), [`${w.url}@0`, `${w.url}@1`, `${w.url}@2`]);
  const ranks = [];
  for (let i = 0; i < 6; i++) ranks.push(JSON.parse((await post(router.port, '/v1/completions', { prompt: 'x' })).text).rank);
  assert.deepEqual(ranks, [0, 1, 2, 0, 1, 2]);
  assert.ok(w.on('/v1/completions').every((h) => h.body['prompt'] === 'x'));
  const noDp = await scripted((path, body, res) => json(res, 200, {}));
  t.after(() => noDp.close());
  await assert.rejects(testRouter(['--worker-urls', noDp.url, '--dp-aware']), /No dp_size in response from/);
});

test('manual policy over HTTP: x-smg-routing-key sticks to one worker; CORS headers for allowed origins', async (t) => {
  const ws: Scripted[] = [await scripted(ok('a')), await scripted(ok('b')), await scripted(ok('c'))];
  let router: RunningRouter | null = null;
  t.after(async () => { await router?.close(); for (const w of ws) await w.close(); });
  router = await testRouter(['--worker-urls', ...ws.map((w) => w.url), '--policy', 'manual', '--cors-allowed-origins', 'http://app.example']);
  for (const key of ['alice', 'bob', 'carol']) {
    const got = new Set<string>();
    for (let i = 0; i < 5; i++) got.add(JSON.parse((await post(router.port, '/generate', { text: `turn ${i}` }, { 'x-smg-routing-key': key })).text).text);
    assert.equal(got.size, 1, `${key} went to ${[...got].join(', ')}`);
  }
  const r = await post(router.port, '/generate', { text: 'x' }, { origin: 'http://app.example' });
  assert.equal(r.headers['access-control-allow-origin'], 'http://app.example');
  const other = await post(router.port, '/generate', { text: 'x' }, { origin: 'http://evil.example' });
  assert.equal(other.headers['access-control-allow-origin'], undefined);
});
