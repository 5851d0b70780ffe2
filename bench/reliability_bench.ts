// `npm run bench:reliability [-- --fuzz 10000] [--load 10000] [--concurrency 256] [--aborts 1000] [--sigterm 64]`:
// the bounded reliability figures of issue 15 against `tsglang serve` children (embedded default model). Every part is
// bounded by its count and stops by itself; figures only, nothing is asserted.
//  fuzz     N malformed or odd requests over the JSON routes (random field types, truncated and non-JSON bodies, wrong
//           Content-Types, out-of-range numbers, huge batches and n): the share answered 4xx with a clean JSON error
//           body, the 2xx count, and every 5xx or dropped connection; /health is probed every 500 cases.
//  load     N chat completions (max_tokens 8) at the given concurrency: failed count, latency p50 / p99.
//  aborts   N streamed chat completions the client drops after the first chunk: running/queued requests and KV tokens
//           in use once the engine is idle.
//  sigterm  a fresh server with N streams plus a stream of new requests on kept-alive sockets; SIGTERM after 2 s:
//           streams answered to [DONE], late requests refused with a clean 503, and responses cut (no [DONE] / reset).
import { Agent, request as httpRequest } from 'node:http';
import { availableParallelism, loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { Rng } from '../src/common/index.js';
import { pool, quantile, startServe, stopServe, type ServeChild } from './serve_child.js';

const { values } = parseArgs({ options: { fuzz: { type: 'string' }, load: { type: 'string' }, concurrency: { type: 'string' }, aborts: { type: 'string' }, sigterm: { type: 'string' } } });
const FUZZ = Number(values.fuzz ?? 10_000);
const LOAD = Number(values.load ?? 10_000);
const CONC = Number(values.concurrency ?? 256);
const ABORTS = Number(values.aborts ?? 1000);
const SIGTERM_STREAMS = Number(values.sigterm ?? 64);
const la = (): string => loadavg().map((x) => x.toFixed(2)).join(' ');

/** One random fuzz case: route, Content-Type, body text. */
function fuzzCase(rng: Rng): { path: string; ct: string; body: string } {
  const pick = <T>(xs: readonly T[]): T => xs[rng.nextInt(xs.length)];
  const odd = (): unknown => pick<unknown>([null, true, -1, 0, 1e308, -1e308, 2 ** 53 + 1, 1.5, '', 'x', 'NaN', '1e999', [], {}, [1, 'a'], { a: [null] }, '\u0000\ud800', 'é'.repeat(50), Array(3000).fill('hi')]);
  const routes = ['/v1/chat/completions', '/v1/completions', '/generate', '/v1/tokenize', '/v1/detokenize', '/abort_request', '/flush_cache'] as const;
  const path = pick(routes);
  const base: Record<string, unknown> = path === '/v1/chat/completions' ? { model: 'm', messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 }
    : path === '/v1/completions' ? { model: 'm', prompt: 'hi', max_tokens: 4 }
      : path === '/generate' ? { text: 'hi', sampling_params: { max_new_tokens: 4 } }
        : path === '/v1/tokenize' ? { prompt: 'hi' } : path === '/v1/detokenize' ? { tokens: [1, 2] } : { rid: 'x' };
  const fields = ['model', 'messages', 'prompt', 'text', 'input_ids', 'sampling_params', 'max_tokens', 'n', 'temperature', 'top_p', 'top_k', 'stop', 'stream', 'logprobs', 'top_logprobs', 'logit_bias', 'rid', 'tokens', 'abort_all', 'tools', 'response_format', 'seed'];
  const body: Record<string, unknown> = { ...base };
  for (let k = 1 + rng.nextInt(3); k > 0; k--) body[pick(fields)] = odd();
  if (rng.nextFloat() < 0.1) body.n = pick([2, 5000, 100_000]);
  let text = JSON.stringify(body);
  const r = rng.nextFloat();
  if (r < 0.08) text = text.slice(0, rng.nextInt(text.length));
  else if (r < 0.12) text = pick(['[1]', '"x"', '7', 'null', '', 'true', '{', '{"a":}', '\u00ff\u00fe']);
  const ct = rng.nextFloat() < 0.15 ? pick(['text/plain', 'text/plain; application/json', 'application/jsonp', 'application/json-patch+json', '']) : 'application/json';
  return { path, ct, body: text };
}

async function fuzz(s: ServeChild): Promise<void> {
  const rng = new Rng(15);
  let clean4xx = 0, other4xx = 0, ok2xx = 0, fiveXX = 0, dropped = 0, unhealthy = 0;
  const fiveSamples: string[] = [];
  const uncleanSamples: string[] = [];
  const droppedSamples: string[] = [];
  const failed = await pool(FUZZ, 16, async (i) => {
    const c = fuzzCase(rng);
    try {
      const r = await fetch(s.base + c.path, { method: 'POST', headers: c.ct ? { 'content-type': c.ct } : {}, body: c.body, signal: AbortSignal.timeout(60_000) });
      const t = await r.text();
      if (r.status >= 500) { fiveXX++; if (fiveSamples.length < 5) fiveSamples.push(`${r.status} ${c.path} ${c.body.slice(0, 120)} → ${t.slice(0, 200)}`); }
      else if (r.status >= 400) {
        let clean = false;
        try { const j = JSON.parse(t) as Record<string, unknown>; clean = typeof j === 'object' && j !== null && ('message' in j || 'error' in j || 'detail' in j); } catch { clean = false; }
        if (clean) clean4xx++;
        else { other4xx++; if (uncleanSamples.length < 5) uncleanSamples.push(`${r.status} ${c.path} ${c.body.slice(0, 80)} → ${t.slice(0, 120)}`); }
      } else ok2xx++;
    } catch (e) {
      dropped++;
      if (droppedSamples.length < 5) droppedSamples.push(`${c.path} (${c.ct}) ${c.body.slice(0, 80)}: ${(e as Error).message} ${String((e as Error).cause ?? '')}`);
    }
    if (i % 500 === 499 && (await fetch(`${s.base}/health`).then((r) => r.status, () => 0)) !== 200) unhealthy++;
  });
  const n4 = clean4xx + other4xx;
  process.stdout.write(`fuzz: ${FUZZ} cases: 2xx ${ok2xx}, 4xx ${n4} (clean JSON error body ${n4 ? ((100 * clean4xx) / n4).toFixed(1) : '–'} %), 5xx ${fiveXX}, dropped ${dropped + failed}, /health failures ${unhealthy}\n`);
  for (const f of fiveSamples) process.stdout.write(`  5xx: ${f}\n`);
  for (const f of uncleanSamples) process.stdout.write(`  4xx without a JSON error body: ${f}\n`);
  for (const f of droppedSamples) process.stdout.write(`  dropped: ${f}\n`);
}

async function load(s: ServeChild): Promise<void> {
  const lat: number[] = [];
  const t0 = performance.now();
  const failed = await pool(LOAD, CONC, async (i) => {
    const a = performance.now();
    const r = await fetch(`${s.base}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: `question ${i}` }], max_tokens: 8 }) });
    await r.text();
    if (r.status !== 200) throw new Error(String(r.status));
    lat.push(performance.now() - a);
  });
  const wall = (performance.now() - t0) / 1000;
  process.stdout.write(`load: ${LOAD} chat completions at concurrency ${CONC}: failed ${failed}, p50 ${(quantile(lat, 0.5) / 1000).toFixed(2)} s, p99 ${(quantile(lat, 0.99) / 1000).toFixed(2)} s, wall ${wall.toFixed(1)} s\n`);
}

async function engineLoad(s: ServeChild): Promise<{ running: number; queued: number; usedTokens: number }> {
  const m = await (await fetch(`${s.base}/metrics`)).text();
  const g = (name: string): number => Number(new RegExp(`^sglang:${name}\\{[^}]*\\} ([\\d.e+-]+)`, 'm').exec(m)?.[1] ?? NaN);
  return { running: g('num_running_reqs'), queued: g('num_queue_reqs'), usedTokens: g('num_used_tokens') };
}

async function aborts(s: ServeChild): Promise<void> {
  await pool(ABORTS, 64, async (i) => {
    const ac = new AbortController();
    const r = await fetch(`${s.base}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, signal: ac.signal, body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: `abort ${i}` }], max_tokens: 500, ignore_eos: true, stream: true }) });
    const rd = r.body!.getReader();
    await rd.read();
    ac.abort();
    await rd.cancel().catch(() => {});
  });
  let l = await engineLoad(s);
  for (let k = 0; k < 300 && (l.running > 0 || l.queued > 0); k++) { await new Promise((r) => setTimeout(r, 100)); l = await engineLoad(s); }
  process.stdout.write(`abort storm: ${ABORTS} streams dropped after their first chunk: afterwards running ${l.running}, queued ${l.queued}, KV tokens in use ${l.usedTokens}\n`);
}

function raw(port: number, agent: Agent, path: string, body: unknown): Promise<{ status: number; text: string; ok: boolean }> {
  return new Promise((resolve) => {
    const data = JSON.stringify(body);
    const req = httpRequest({ host: '127.0.0.1', port, path, method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => { text += d; });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text, ok: true }));
      res.on('error', () => resolve({ status: res.statusCode ?? 0, text, ok: false }));
      res.on('aborted', () => resolve({ status: res.statusCode ?? 0, text, ok: false }));
    });
    req.on('error', (e) => resolve({ status: -1, text: e.message, ok: false }));
    req.end(data);
  });
}

async function sigterm(): Promise<void> {
  const s = await startServe([]);
  const agent = new Agent({ keepAlive: true, maxSockets: SIGTERM_STREAMS + 32 });
  const chat = (i: number, stream: boolean) => raw(s.port, agent, '/v1/chat/completions', { model: 'm', messages: [{ role: 'user', content: `s ${i}` }], max_tokens: stream ? 2000 : 8, ignore_eos: stream, stream });
  const streams = Array.from({ length: SIGTERM_STREAMS }, (_, i) => chat(i, true));
  let stop = false;
  const late: Promise<{ status: number; text: string; ok: boolean }>[] = [];
  const feeder = (async () => { for (let i = 0; !stop; i++) { const p = chat(i, false); late.push(p); await Promise.race([p, new Promise((r) => setTimeout(r, 20))]); } })();
  await new Promise((r) => setTimeout(r, 2000));
  s.child.kill('SIGTERM');
  await new Promise((r) => setTimeout(r, 3000));
  stop = true;
  await feeder;
  const st = await Promise.all(streams);
  const lt = await Promise.all(late);
  const code = await stopServe(s);
  agent.destroy();
  const done = st.filter((r) => r.ok && r.status === 200 && r.text.trimEnd().endsWith('data: [DONE]')).length;
  const answered = lt.filter((r) => r.ok && r.status === 200).length;
  const refused = lt.filter((r) => r.ok && r.status === 503 && r.text.includes('The server is shutting down.')).length;
  const noConn = lt.filter((r) => r.status === -1 && /ECONNREFUSED/.test(r.text)).length;
  const cut = st.length - done + lt.filter((r) => r.status !== -1 && !(r.ok && (r.status === 200 || r.status === 503))).length + lt.filter((r) => r.status === -1 && !/ECONNREFUSED/.test(r.text)).length;
  process.stdout.write(`sigterm: ${SIGTERM_STREAMS} streams under way: ${done} ended with [DONE]; ${lt.length} other requests: ${answered} answered 200, ${refused} refused 503, ${noConn} found the port closed; cut ${cut}; exit code ${code}\n`);
}

process.stdout.write(`tsglang bench:reliability — ${availableParallelism()} cores, load average ${la()}\n`);
if (FUZZ > 0 || LOAD > 0 || ABORTS > 0) {
  const s = await startServe(['--enable-metrics']);
  try {
    if (FUZZ > 0) await fuzz(s);
    if (LOAD > 0) await load(s);
    if (ABORTS > 0) await aborts(s);
  } finally {
    await stopServe(s);
  }
}
if (SIGTERM_STREAMS > 0) await sigterm();
process.stdout.write(`load average at the end: ${la()}\n`);
