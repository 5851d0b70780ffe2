// `npm run bench:tokenize [-- --port 30777] [--short-reps 300] [--long-reps 30] [--word-kb 520]`: what text
// tokenization costs a served request, and whether it stalls the HTTP event loop. Figures only; nothing is asserted.
//
// Method. Starts `tsglang serve` (the embedded default model, context 4096, DeepSeek-V3 BPE) as a child process on
// loopback, waits for /health, then, one request at a time:
//   1. POST /v1/tokenize with a short prompt (~20 tokens), `--short-reps` times: client-side latency per request
//      (median, p90, min). The tokenizer path is all the work this route does, so this is tokenization plus the
//      HTTP round trip (and, when the server tokenizes in a worker thread, that worker's round trip).
//   2. The same with a ~100 KB English prompt (~25k tokens), `--long-reps` times.
//   3. POST /generate with one `--word-kb` KB single word ("aaaa…", under the over-length pre-check's bound for a
//      4096-token context, so it is tokenized; the library's BPE is superlinear on one long word), while GET /health
//      is polled every 50 ms: /health latency (median, max) while the word is tokenized, and the /generate time.
// The child is killed at the end (also on error). Run it on a quiet machine: figures move with the load average.
import { spawn, type ChildProcess } from 'node:child_process';
import { Agent, get, request } from 'node:http';
import { loadavg } from 'node:os';
import { parseArgs } from 'node:util';

const { values } = parseArgs({
  options: {
    port: { type: 'string' },
    'short-reps': { type: 'string' },
    'long-reps': { type: 'string' },
    'word-kb': { type: 'string' },
  },
});
const PORT = Number(values.port ?? 30777);
const SHORT_REPS = Number(values['short-reps'] ?? 300);
const LONG_REPS = Number(values['long-reps'] ?? 30);
const WORD_KB = Number(values['word-kb'] ?? 520);
const BASE = `http://127.0.0.1:${PORT}`;

const SHORT = 'The quick brown fox jumps over the lazy dog, and then it runs back home to sleep.';
const LONG = 'The quick brown fox jumps over the lazy dog near the riverbank at dawn. '.repeat(Math.ceil(100_000 / 72)).slice(0, 100_000);

/** POST a JSON body on a kept-alive connection (the short-request figures should not include a TCP handshake). */
const keepAlive = new Agent({ keepAlive: true, maxSockets: 1 });

function post(path: string, body: unknown, agent: Agent | false = keepAlive): Promise<{ status: number; text: string }> {
  const data = Buffer.from(JSON.stringify(body));
  return new Promise((resolve, reject) => {
    const req = request(BASE + path, { method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': data.length } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
    });
    req.on('error', reject);
    req.end(data);
  });
}

function stats(ms: number[]): string {
  const s = [...ms].sort((a, b) => a - b);
  const q = (p: number) => s[Math.min(s.length - 1, Math.floor(p * s.length))];
  return `median ${q(0.5).toFixed(2)} ms, p90 ${q(0.9).toFixed(2)} ms, min ${s[0].toFixed(2)} ms, max ${s[s.length - 1].toFixed(2)} ms (n=${s.length})`;
}

async function waitHealthy(child: ChildProcess, timeoutMs: number): Promise<void> {
  const t0 = Date.now();
  while (Date.now() - t0 < timeoutMs) {
    if (child.exitCode !== null) throw new Error(`server exited with code ${child.exitCode}`);
    try {
      if ((await fetch(`${BASE}/health`)).status === 200) return;
    } catch { /* not listening yet */ }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error('server did not become healthy');
}

async function timeTokenize(prompt: string, reps: number): Promise<number[]> {
  for (let i = 0; i < 3; i++) await post('/v1/tokenize', { prompt }); // warm-up
  const out: number[] = [];
  for (let i = 0; i < reps; i++) {
    const t0 = performance.now();
    const r = await post('/v1/tokenize', { prompt });
    out.push(performance.now() - t0);
    if (r.status !== 200) throw new Error(`/v1/tokenize: ${r.status} ${r.text.slice(0, 200)}`);
  }
  return out;
}

/** GET /health on a fresh connection (a kept-alive one may be reset by the server's keep-alive timer after a stall). */
function health(): Promise<number> {
  return new Promise((resolve, reject) => {
    get(`${BASE}/health`, { agent: false }, (res) => { res.resume(); res.on('end', () => resolve(res.statusCode ?? 0)); }).on('error', reject);
  });
}

async function healthDuringWord(): Promise<{ health: number[]; generateMs: number; status: number }> {
  const word = 'a'.repeat(WORD_KB * 1000);
  const latencies: number[] = [];
  let done = false;
  const poller = (async () => {
    while (!done) {
      const t0 = performance.now();
      await health();
      latencies.push(performance.now() - t0);
      await new Promise((r) => setTimeout(r, 50));
    }
  })();
  const t0 = performance.now();
  const r = await post('/generate', { text: word, sampling_params: { max_new_tokens: 1 } }, false);
  const generateMs = performance.now() - t0;
  done = true;
  await poller;
  return { health: latencies, generateMs, status: r.status };
}

async function main(): Promise<void> {
  const child = spawn(process.execPath, ['bin/tsglang.js', 'serve', '--port', String(PORT), '--log-level', 'warning'], { stdio: ['ignore', 'ignore', 'inherit'] });
  try {
    await waitHealthy(child, 120_000);
    process.stdout.write(`tsglang bench:tokenize — load average ${loadavg().map((x) => x.toFixed(2)).join(' ')}\n`);
    const short = await timeTokenize(SHORT, SHORT_REPS);
    const shortCount = (JSON.parse((await post('/v1/tokenize', { prompt: SHORT })).text) as { count: number }).count;
    process.stdout.write(`/v1/tokenize short (${SHORT.length} chars, ${shortCount} tokens): ${stats(short)}\n`);
    const long = await timeTokenize(LONG, LONG_REPS);
    const longCount = (JSON.parse((await post('/v1/tokenize', { prompt: LONG })).text) as { count: number }).count;
    process.stdout.write(`/v1/tokenize long (${LONG.length} chars, ${longCount} tokens): ${stats(long)}\n`);
    const w = await healthDuringWord();
    process.stdout.write(`/generate with a ${WORD_KB} KB single word: ${(w.generateMs / 1000).toFixed(2)} s, status ${w.status}\n`);
    process.stdout.write(`/health while it ran: ${stats(w.health)}\n`);
    process.stdout.write(`load average at the end: ${loadavg().map((x) => x.toFixed(2)).join(' ')}\n`);
  } finally {
    keepAlive.destroy();
    child.kill('SIGTERM');
    await new Promise((r) => (child.exitCode !== null ? r(null) : child.once('exit', r)));
  }
}

await main();
