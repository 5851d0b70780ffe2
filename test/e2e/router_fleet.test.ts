// The router over a real PD fleet: two prefill and two decode `tsglang serve` processes (a make-tiny MiniMax-M2
// checkpoint, free loopback ports) behind in-process routers, one per policy. Where each request went is read from the
// workers themselves (/get_server_info: each side's KV-transfer counter), never from the router:
//   round_robin alternates on both sides; random reaches both; power_of_two (decode) avoids the decode worker whose
//   /get_load shows a long request in flight; cache_aware (prefill) sends a repeated prefix to one worker, and to the
//   other once the in-flight imbalance passes --balance-abs/rel-threshold; manual keeps a routing key on one pair;
//   bucket (prefill) sends short and long prompts to the two length ranges.
// Fault: a decode worker SIGKILLed mid-stream → the client gets an SSE error event and [DONE] (no hang), the router marks
// it unhealthy, and the next requests are served by the other decode worker.
// Opt-in extra: TSGLANG_TEST_ROUTER_REGULAR=1 runs the same policies in regular mode over two plain servers.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, startServe, stopServe, type ServeChild } from '../../bench/serve_child.js';
import { Logger } from '../../src/common/index.js';
import { parseRouterArgs, startRouter, type RouterArgs, type RunningRouter } from '../../src/router/index.js';
import { TSGLANG_BIN } from '../helpers/paths.js';

const QUIET = new Logger('error', '', () => undefined);
const WATCHDOG_MS = 600_000;

function makeTiny(): string {
  const dir = mkdtempSync(join(tmpdir(), 'tsglang-router-fleet-'));
  const r = spawnSync(process.execPath, [TSGLANG_BIN, 'make-tiny', '--arch', 'minimax-m2', '--out', dir], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`make-tiny failed: ${r.stderr}`);
  return dir;
}

async function router(extra: string[]): Promise<RunningRouter> {
  const a = parseRouterArgs([...extra, '--host', '127.0.0.1', '--port', '0', '--prometheus-port', '-1', '--worker-startup-check-interval', '1', '--retry-initial-backoff-ms', '10']);
  return startRouter(a as RouterArgs, QUIET);
}

async function post(port: number, path: string, body: unknown, headers: Record<string, string> = {}): Promise<{ status: number; text: string }> {
  const r = await fetch(`http://127.0.0.1:${port}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body), signal: AbortSignal.timeout(120_000) });
  return { status: r.status, text: await r.text() };
}

/** KV transfers each server has done so far (its own counter). */
async function transfers(s: ServeChild): Promise<number> {
  const info = (await (await fetch(`${s.base}/get_server_info`)).json()) as { internal_states: { disaggregation?: { transfers: number } }[] };
  return info.internal_states[0].disaggregation?.transfers ?? 0;
}

/** Requests each of `servers` served while `run` ran. */
async function served(servers: readonly ServeChild[], run: () => Promise<void>): Promise<number[]> {
  const before = await Promise.all(servers.map(transfers));
  await run();
  const after = await Promise.all(servers.map(transfers));
  return after.map((a, i) => a - before[i]);
}

const gen = (text: string, n = 2) => ({ text, sampling_params: { max_new_tokens: n, temperature: 0 } });

test('PD fleet (2 prefill + 2 decode): each policy spreads as specified by the workers\' own counters; decode killed mid-stream', { timeout: WATCHDOG_MS }, async (t) => {
  const model = makeTiny();
  const servers: ServeChild[] = [];
  const routers: RunningRouter[] = [];
  t.after(async () => {
    try {
      for (const r of routers) await r.close().catch(() => undefined);
    } finally {
      for (const s of servers) if (s.child.exitCode === null) s.child.kill('SIGKILL');
      rmSync(model, { recursive: true, force: true });
    }
  });
  const common = ['--model-path', model, '--host', '127.0.0.1', '--num-threads', '1'];
  const bports = [await freePort(), await freePort()];
  const [p0, p1, d0, d1] = await Promise.all([
    startServe([...common, '--disaggregation-mode', 'prefill', '--disaggregation-bootstrap-port', String(bports[0])]),
    startServe([...common, '--disaggregation-mode', 'prefill', '--disaggregation-bootstrap-port', String(bports[1])]),
    startServe([...common, '--disaggregation-mode', 'decode']),
    startServe([...common, '--disaggregation-mode', 'decode']),
  ]);
  servers.push(p0, p1, d0, d1);
  const P = [p0, p1];
  const D = [d0, d1];
  const pd = ['--pd-disaggregation', '--prefill', p0.base, String(bports[0]), '--prefill', p1.base, String(bports[1]), '--decode', d0.base, '--decode', d1.base];
  const start = async (extra: string[]): Promise<RunningRouter> => { const r = await router([...pd, ...extra]); routers.push(r); return r; };

  // round_robin: exact alternation on both sides
  const rr = await start(['--policy', 'round_robin']);
  let dCount: number[] = [];
  const pCount = await served(P, async () => { dCount = await served(D, async () => { for (let i = 0; i < 4; i++) assert.equal((await post(rr.port, '/generate', gen(`round robin ${i}`))).status, 200); }); });
  assert.deepEqual(pCount, [2, 2], `round_robin prefill ${pCount}`);
  assert.deepEqual(dCount, [2, 2], `round_robin decode ${dCount}`);

  // random: both sides of both roles are reached (16 requests: all on one worker has odds 2^-15)
  const rnd = await start(['--policy', 'random']);
  const rp = await served(P, async () => { dCount = await served(D, async () => { for (let i = 0; i < 16; i++) await post(rnd.port, '/generate', gen(`random ${i}`, 1)); }); });
  assert.equal(rp[0] + rp[1], 16);
  assert.ok(rp.every((c) => c > 0) && dCount.every((c) => c > 0), `random: prefill ${rp}, decode ${dCount}`);

  // power_of_two (decode): a long request holds one decode worker's KV; the load monitor (/get_load each second) sees it
  const p2 = await start(['--prefill-policy', 'round_robin', '--decode-policy', 'power_of_two']);
  const longCtl = new AbortController();
  const before = await Promise.all(D.map(transfers));
  const long = fetch(`http://127.0.0.1:${p2.port}/generate`, { method: 'POST', body: JSON.stringify({ text: 'a long one', sampling_params: { max_new_tokens: 3000, ignore_eos: true, temperature: 0 }, stream: true }), signal: longCtl.signal })
    .then((r) => r.text()).catch(() => '');
  let busy = -1;
  while (busy < 0) {
    const now = await Promise.all(D.map(transfers));
    busy = now.findIndex((n, i) => n > before[i]);
    await new Promise((r) => setTimeout(r, 100));
  }
  await new Promise((r) => setTimeout(r, 2500)); // two monitor polls
  const p2Count = await served(D, async () => { for (let i = 0; i < 4; i++) assert.equal((await post(p2.port, '/generate', gen(`p2 ${i}`))).status, 200); });
  longCtl.abort();
  await long;
  assert.equal(p2Count[busy], 0, `power_of_two sent short requests to the busy decode worker: ${p2Count}`);
  assert.equal(p2Count[1 - busy], 4);

  // cache_aware (prefill): a repeated prefix sticks to one prefill worker ...
  const prefix = 'You are a helpful assistant that answers questions about the weather in great detail. ';
  const ca = await start(['--policy', 'cache_aware', '--decode-policy', 'round_robin', '--balance-abs-threshold', '0', '--balance-rel-threshold', '1.0']);
  const caCount = await served(P, async () => { for (let i = 0; i < 4; i++) assert.equal((await post(ca.port, '/generate', gen(`${prefix}Question ${i}?`))).status, 200); });
  assert.ok(caCount.includes(4) && caCount.includes(0), `cache_aware: the prefix went to both prefill workers ${caCount}`);
  const owner = caCount.indexOf(4);
  // ... until the in-flight imbalance (one in flight vs none, abs 0 / rel 1.0) sends the same prefix to the other one
  const held = new AbortController();
  const inFlight = fetch(`http://127.0.0.1:${ca.port}/generate`, { method: 'POST', body: JSON.stringify({ text: `${prefix}Hold on.`, sampling_params: { max_new_tokens: 3000, ignore_eos: true }, stream: true }), signal: held.signal })
    .then((r) => r.text()).catch(() => '');
  while (ca.router.workers.find((w) => w.baseUrl === P[owner].base)!.load === 0) await new Promise((r) => setTimeout(r, 20));
  const balanced = await served(P, async () => { assert.equal((await post(ca.port, '/generate', gen(`${prefix}Question 9?`))).status, 200); });
  held.abort();
  await inFlight;
  assert.equal(balanced[1 - owner], 1, `imbalance did not move the request off the busy prefill worker: ${balanced}`);

  // manual: a routing key keeps its prefill and decode worker
  const man = await start(['--policy', 'manual']);
  for (const key of ['session-a', 'session-b']) {
    let dm: number[] = [];
    const pm = await served(P, async () => { dm = await served(D, async () => { for (let i = 0; i < 3; i++) await post(man.port, '/generate', gen(`turn ${i}`), { 'x-smg-routing-key': key }); }); });
    assert.ok(pm.includes(3) && dm.includes(3), `manual ${key}: prefill ${pm}, decode ${dm}`);
  }

  // bucket (prefill): two workers own [0, 2047] and [2048, ...] characters
  const bk = await start(['--prefill-policy', 'bucket', '--decode-policy', 'round_robin', '--balance-abs-threshold', '100000']);
  const shortC = await served(P, async () => { await post(bk.port, '/generate', gen('short prompt')); });
  const longC = await served(P, async () => { await post(bk.port, '/generate', gen('word '.repeat(430))); });
  assert.deepEqual([shortC, longC], [[1, 0], [0, 1]], 'bucket: the short prompt goes to the first range, the long to the second');

  // fault: the decode worker serving a stream is killed mid-stream
  const f = await start(['--policy', 'round_robin']);
  const beforeF = await Promise.all(D.map(transfers));
  const resp = await fetch(`http://127.0.0.1:${f.port}/generate`, { method: 'POST', body: JSON.stringify({ text: 'stream me', sampling_params: { max_new_tokens: 3000, ignore_eos: true }, stream: true }), signal: AbortSignal.timeout(120_000) });
  assert.equal(resp.status, 200);
  const reader = resp.body!.getReader();
  let text = new TextDecoder().decode((await reader.read()).value);
  const victim = (await Promise.all(D.map(transfers))).findIndex((n, i) => n > beforeF[i]);
  assert.ok(victim >= 0, 'no decode worker took the stream');
  D[victim].child.kill('SIGKILL');
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    text += new TextDecoder().decode(value);
  }
  const events = text.split('\n\n').filter((e) => e.startsWith('data: '));
  assert.equal(events.at(-1), 'data: [DONE]');
  assert.equal(JSON.parse(events.at(-2)!.slice(6)).error.code, 'decode_server_error');
  const dead = f.router.workers.find((w) => w.baseUrl === D[victim].base)!;
  for (let i = 0; i < 100 && dead.healthy; i++) await new Promise((r) => setTimeout(r, 50));
  assert.equal(dead.healthy, false, 'the killed decode worker is unhealthy');
  const after = await served([D[1 - victim]], async () => { for (let i = 0; i < 2; i++) assert.equal((await post(f.port, '/generate', gen(`after ${i}`))).status, 200); });
  assert.deepEqual(after, [2], 'the other decode worker serves the next requests');
});

test('regular mode over two plain servers: round_robin, cache_aware prefix, manual key (TSGLANG_TEST_ROUTER_REGULAR=1)', { skip: process.env.TSGLANG_TEST_ROUTER_REGULAR !== '1', timeout: WATCHDOG_MS }, async (t) => {
  const model = makeTiny();
  const servers: ServeChild[] = [];
  const routers: RunningRouter[] = [];
  t.after(async () => {
    try {
      for (const r of routers) await r.close().catch(() => undefined);
      for (const s of servers) await stopServe(s);
    } finally {
      rmSync(model, { recursive: true, force: true });
    }
  });
  const common = ['--model-path', model, '--host', '127.0.0.1', '--num-threads', '1', '--enable-metrics'];
  servers.push(...(await Promise.all([startServe(common), startServe(common)])));
  const count = async (): Promise<number[]> => Promise.all(servers.map(async (s) => {
    const m = await (await fetch(`${s.base}/metrics`)).text();
    return [...m.matchAll(/^sglang:num_requests_total\{[^}]*\} (\d+)/gm)].reduce((a, x) => a + Number(x[1]), 0);
  }));
  const deltaOf = async (run: () => Promise<void>): Promise<number[]> => { const b = await count(); await run(); const a = await count(); return a.map((x, i) => x - b[i]); };
  const urls = ['--worker-urls', ...servers.map((s) => s.base)];
  const rr = await router([...urls, '--policy', 'round_robin']);
  routers.push(rr);
  assert.deepEqual(await deltaOf(async () => { for (let i = 0; i < 4; i++) await post(rr.port, '/generate', gen(`q ${i}`)); }), [2, 2]);
  const ca = await router([...urls, '--policy', 'cache_aware']);
  routers.push(ca);
  const c = await deltaOf(async () => { for (let i = 0; i < 4; i++) await post(ca.port, '/generate', gen(`A shared system prompt for all of these. Question ${i}`)); });
  assert.ok(c.includes(4), `cache_aware ${c}`);
  const man = await router([...urls, '--policy', 'manual']);
  routers.push(man);
  const m = await deltaOf(async () => { for (let i = 0; i < 4; i++) await post(man.port, '/generate', gen(`t ${i}`), { 'x-smg-routing-key': 'k' }); });
  assert.ok(m.includes(4), `manual ${m}`);
});
