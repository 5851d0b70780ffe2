// Rate limiting and circuit breaking over HTTP with SGLang's flags against scripted workers:
// --max-concurrent-requests / --queue-size / --queue-timeout-secs (admitted, queued then served, 429 when the queue is
// full, 408 when the wait times out; empty bodies as SGLang), and --cb-failure-threshold / --cb-success-threshold /
// --cb-timeout-duration-secs (the circuit opens after the failures, the worker is skipped, it half-opens after the
// timeout and closes after the successes).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { json, post, scripted, testRouter } from './scripted_worker.case.js';
import type { RunningRouter } from './router_server.js';

test('admission: 1 concurrent + 1 queued; the third gets 429, a wait past the timeout 408, both with empty bodies', async (t) => {
  const releases: (() => void)[] = [];
  const w = await scripted((path, body, res) => {
    if (path !== '/generate') return json(res, 200, {});
    releases.push(() => json(res, 200, { text: body['text'] }));
  });
  let router: RunningRouter | null = null;
  t.after(async () => { for (const r of releases) r(); await router?.close(); await w.close(); });
  router = await testRouter(['--worker-urls', w.url, '--max-concurrent-requests', '1', '--queue-size', '1', '--queue-timeout-secs', '1', '--rate-limit-tokens-per-second', '0']);
  const first = post(router.port, '/generate', { text: 'first' });
  while (releases.length < 1) await new Promise((r) => setTimeout(r, 5));
  const second = post(router.port, '/generate', { text: 'second' });
  while (router.router.admission!.queued < 1) await new Promise((r) => setTimeout(r, 5));
  const third = await post(router.port, '/generate', { text: 'third' });
  assert.equal(third.status, 429);
  assert.equal(third.text, '');
  releases.shift()!();
  assert.equal(JSON.parse((await first).text).text, 'first');
  while (releases.length < 1) await new Promise((r) => setTimeout(r, 5));
  releases.shift()!();
  assert.equal(JSON.parse((await second).text).text, 'second');
  // hold the token; the next request waits in the queue past --queue-timeout-secs
  const holder = post(router.port, '/generate', { text: 'holder' });
  while (releases.length < 1) await new Promise((r) => setTimeout(r, 5));
  const late = await post(router.port, '/generate', { text: 'late' });
  assert.equal(late.status, 408);
  assert.equal(late.text, '');
  releases.shift()!();
  assert.equal((await holder).status, 200);
  assert.equal(w.on('/generate').length, 3, 'the refused requests never reached the worker');
  // non-generation routes are not limited
  assert.equal((await fetch(`http://127.0.0.1:${router.port}/health`)).status, 200);
});

test('circuit breaker: opens after --cb-failure-threshold failures, half-opens after --cb-timeout-duration-secs, closes after --cb-success-threshold', async (t) => {
  let failing = true;
  const flaky = await scripted((path, body, res) => (path !== '/generate' ? json(res, 200, {}) : failing ? json(res, 500, { error: 'boom' }) : json(res, 200, { text: 'flaky' })));
  const steady = await scripted((path, body, res) => json(res, 200, { text: 'steady' }));
  let router: RunningRouter | null = null;
  t.after(async () => { await router?.close(); await flaky.close(); await steady.close(); });
  router = await testRouter(['--worker-urls', flaky.url, steady.url, '--policy', 'round_robin', '--disable-retries',
    '--cb-failure-threshold', '2', '--cb-success-threshold', '1', '--cb-timeout-duration-secs', '1']);
  const fw = router.workers.find((w) => w.url === flaky.url)!;
  const statuses: number[] = [];
  for (let i = 0; i < 4; i++) statuses.push((await post(router.port, '/generate', { text: `${i}` })).status);
  assert.deepEqual(statuses, [500, 200, 500, 200], 'round robin alternates; retries are off');
  assert.equal(fw.breaker.state, 'open');
  const m = await (await fetch(`http://127.0.0.1:${router.prometheusPort}/metrics`)).text();
  assert.match(m, new RegExp(`sgl_router_cb_state\\{worker="${flaky.url}"\\} 1`));
  const before = flaky.on('/generate').length;
  for (let i = 0; i < 4; i++) assert.equal(JSON.parse((await post(router.port, '/generate', { text: 'x' })).text).text, 'steady');
  assert.equal(flaky.on('/generate').length, before, 'an open circuit gets no requests');
  failing = false;
  await new Promise((r) => setTimeout(r, 1100));
  assert.equal(fw.breaker.state, 'half_open');
  const texts = new Set<string>();
  for (let i = 0; i < 2; i++) texts.add(JSON.parse((await post(router.port, '/generate', { text: 'y' })).text).text);
  assert.ok(texts.has('flaky'), 'the half-open worker is tried again');
  assert.equal(fw.breaker.state, 'closed');
  const m2 = await (await fetch(`http://127.0.0.1:${router.prometheusPort}/metrics`)).text();
  assert.match(m2, new RegExp(`sgl_router_cb_state_transitions_total\\{worker="${flaky.url}",from="half_open",to="closed"\\} 1`));
});
