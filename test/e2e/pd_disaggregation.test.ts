// End to end, PD disaggregation as the DeepSeek-V3.2 page deploys it (embedded default model, loopback): a prefill
// server (--disaggregation-mode prefill --disaggregation-bootstrap-port P), a decode server (--disaggregation-mode
// decode) and `tsglang router --pd-disaggregation --prefill URL P --decode URL --host 127.0.0.1 --port R`, each its own
// process, against a plain server: greedy outputs are identical for /generate (with prompt and top logprobs),
// chat with n > 1, streamed completions and constrained requests (regex, JSON schema); the decode server ran no prefill forward and counts the KV it received;
// both pools are free afterwards. Then the prefill server is killed: the next request gets an error answer, no hang.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TSGLANG_BIN } from '../helpers/paths.js';
import { loadUcxAddon } from '../../src/disagg/index.js';

const HOME = join(tmpdir(), 'tsglang-e2e-home');
const WATCHDOG_MS = 240_000;

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const p = (s.address() as { port: number }).port;
      s.close(() => resolve(p));
    });
  });
}

interface Proc { child: ChildProcess; log: () => string; ready: Promise<void> }

/** Starts `tsglang ARGS`; ready once `readyLine` is printed on stderr (rejects when the process exits first). */
function start(args: string[], readyLine: RegExp): Proc {
  mkdirSync(HOME, { recursive: true });
  const child = spawn(process.execPath, [TSGLANG_BIN, ...args], { env: { ...process.env, HOME, TSGLANG_CACHE_DIR: join(HOME, '.cache', 'tsglang') }, stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  child.stderr!.setEncoding('utf8');
  const ready = new Promise<void>((resolve, reject) => {
    child.stderr!.on('data', (d: string) => {
      log += d;
      if (readyLine.test(log)) resolve();
    });
    child.once('exit', (code) => reject(new Error(`tsglang ${args[0]} exited (${code}) before it was ready:\n${log}`)));
  });
  ready.catch(() => undefined);
  return { child, log: () => log, ready };
}

async function post(port: number, path: string, body: unknown): Promise<{ status: number; text: string }> {
  const r = await fetch(`http://127.0.0.1:${port}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body), signal: AbortSignal.timeout(60_000) });
  return { status: r.status, text: await r.text() };
}

/** A response without its per-run fields (ids, timings). */
function stable(text: string): unknown {
  const strip = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(strip);
    if (v && typeof v === 'object') {
      const o: Record<string, unknown> = {};
      for (const [k, x] of Object.entries(v)) if (!['id', 'created', 'e2e_latency', 'cached_tokens', 'prompt_tokens_details', 'system_fingerprint'].includes(k)) o[k] = strip(x);
      return o;
    }
    return v;
  };
  return strip(JSON.parse(text));
}

/** SSE data lines of a streamed answer, without per-run fields, grouped by sequence (batch events interleave freely). */
function streamed(text: string): unknown[] {
  const ev = text.split('\n').filter((l) => l.startsWith('data: ') && l !== 'data: [DONE]').map((l) => stable(l.slice(6)) as Record<string, unknown>);
  const key = (e: Record<string, unknown>): number => (typeof e['index'] === 'number' ? e['index'] : ((e['choices'] as { index?: number }[] | undefined)?.[0]?.index ?? 0));
  return ev.map((e, i) => ({ e, i })).sort((a, b) => key(a.e) - key(b.e) || a.i - b.i).map((x) => x.e);
}

test('PD on loopback: prefill + decode + router give the single server\'s greedy outputs; no prefill forward on decode; prefill killed -> error answer', { timeout: WATCHDOG_MS }, async (t) => {
  const [pPort, dPort, sPort, rPort, bPort, mPort] = await Promise.all([freePort(), freePort(), freePort(), freePort(), freePort(), freePort()]);
  const common = ['--host', '127.0.0.1', '--num-threads', '1'];
  const procs: Proc[] = [];
  t.after(() => { for (const p of procs) if (p.child.exitCode === null) p.child.kill('SIGKILL'); });
  const ready = /ready to roll/;
  const prefill = start(['serve', ...common, '--port', String(pPort), '--disaggregation-mode', 'prefill', '--disaggregation-bootstrap-port', String(bPort)], ready);
  const decode = start(['serve', ...common, '--port', String(dPort), '--disaggregation-mode', 'decode'], ready);
  const single = start(['serve', ...common, '--port', String(sPort)], ready);
  procs.push(prefill, decode, single);
  await Promise.all([prefill.ready, decode.ready, single.ready]);
  const router = start(['router', '--pd-disaggregation', '--prefill', `http://127.0.0.1:${pPort}`, String(bPort), '--decode', `http://127.0.0.1:${dPort}`,
    '--host', '127.0.0.1', '--port', String(rPort), '--prometheus-port', String(mPort), '--worker-startup-check-interval', '1'], /router listening/);
  procs.push(router);
  await router.ready;

  const cases: [string, Record<string, unknown>][] = [
    ['/generate', { text: 'The capital of France is', sampling_params: { max_new_tokens: 12, temperature: 0 }, return_logprob: true, logprob_start_len: 0, top_logprobs_num: 2 }],
    ['/generate', { text: ['Once upon a time', 'A B C D'], sampling_params: { max_new_tokens: 8, temperature: 0 } }],
    ['/v1/chat/completions', { model: 'default', messages: [{ role: 'user', content: 'Hi there' }], max_tokens: 10, temperature: 0, n: 2, logprobs: true, top_logprobs: 1 }],
    ['/v1/completions', { model: 'default', prompt: 'Hello, my name is', max_tokens: 10, temperature: 0 }],
    // structured outputs through PD: the prefill side samples the first token under the grammar, the decode side
    // compiles it while the KV travels and advances it by that token
    ['/generate', { text: 'Answer yes or no: is the sky blue?', sampling_params: { max_new_tokens: 8, temperature: 0, regex: '(yes|no)[.!]' } }],
    ['/v1/chat/completions', { model: 'default', messages: [{ role: 'user', content: 'A person as JSON' }], max_tokens: 24, temperature: 0,
      response_format: { type: 'json_schema', json_schema: { name: 'p', schema: { type: 'object', properties: { name: { type: 'string', maxLength: 6 }, age: { type: 'integer' } }, required: ['name', 'age'] } } } }],
  ];
  for (const [path, body] of cases) {
    const [a, b] = await Promise.all([post(rPort, path, body), post(sPort, path, body)]);
    assert.equal(a.status, 200, `${path}: ${a.text}`);
    assert.deepEqual(stable(a.text), stable(b.text), `${path} through the router differs from the single server`);
    const s = { ...body, stream: true };
    const [as, bs] = await Promise.all([post(rPort, path, s), post(sPort, path, s)]);
    assert.equal(as.status, 200, as.text);
    assert.deepEqual(streamed(as.text), streamed(bs.text), `${path} streamed through the router differs`);
  }

  const info = async (port: number): Promise<Record<string, unknown>> =>
    ((await (await fetch(`http://127.0.0.1:${port}/get_server_info`)).json()) as { internal_states: Record<string, unknown>[] }).internal_states[0];
  const d = await info(dPort);
  const p = await info(pPort);
  const dd = d['disaggregation'] as Record<string, number>;
  const pd = p['disaggregation'] as Record<string, number>;
  // the default backend on both sides: the best one available here, ucx when its addon loads (the engine's start-up
  // lines reach stderr after the ready line, so this is read from /get_server_info)
  const expected = loadUcxAddon().addon ? 'ucx' : 'tcp';
  assert.equal((pd as unknown as Record<string, string>)['transfer_backend'], expected);
  assert.equal((dd as unknown as Record<string, string>)['transfer_backend'], expected);
  assert.equal(dd['num_prefill_steps'], 0, 'the decode server ran a prefill forward');
  assert.ok(dd['transfers'] >= 10, JSON.stringify(dd));
  assert.equal(dd['transfers'], pd['transfers']);
  assert.equal(dd['failed_transfers'], 0);
  // ucx: every payload by UCX put (shared memory on one host); tcp: over the control connection
  assert.equal(dd['ucx_transfers'], expected === 'ucx' ? dd['transfers'] : 0, JSON.stringify(dd));
  assert.ok(dd['kv_tokens'] > 0 && dd['kv_bytes'] === pd['kv_bytes'] && dd['kv_bytes'] % dd['kv_tokens'] === 0, JSON.stringify({ dd, pd }));
  assert.equal(d['num_used_tokens'], 0, 'decode pool not free after the requests');
  assert.equal(p['num_used_tokens'], 0, 'prefill pool holds more than its prefix cache after the requests');
  const metrics = await (await fetch(`http://127.0.0.1:${mPort}/metrics`)).text();
  assert.match(metrics, new RegExp(`sgl_router_pd_decode_requests_total\\{worker="http://127\\.0\\.0\\.1:\\d+"\\} ${2 * cases.length}\n`)); // every case, streamed and not

  // the prefill server goes away: the decode side's transfer fails and the client gets an error, promptly
  prefill.child.kill('SIGKILL');
  await new Promise((r) => prefill.child.once('exit', r));
  const t0 = Date.now();
  const r = await post(rPort, '/generate', { text: 'Are you there?', sampling_params: { max_new_tokens: 4, temperature: 0 } }).catch((e: Error) => {
    throw new Error(`${e.message}\nrouter log:\n${router.log()}\ndecode log:\n${decode.log().slice(-2000)}`);
  });
  assert.ok(r.status >= 500, `${r.status} ${r.text}`);
  assert.match(r.text, /Decode transfer failed|prefill|No available/i);
  assert.ok(Date.now() - t0 < 30_000, 'the error took too long');
});
