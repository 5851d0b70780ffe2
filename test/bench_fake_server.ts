// Test helpers for the bench client: a fake tokenizer, a fake clock the server drives, and a loopback HTTP
// server speaking SGLang's /generate and OpenAI's /v1/completions + /v1/chat/completions with scripted timing.
// Lockstep mode: the server sets the clock to each line's time, writes the line, and waits until the client
// has read the clock for it (the client reads it exactly once per non-empty line), so every measured
// time is exact.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { BenchTokenizer, Clock } from '../src/bench/index.js';

/** Whitespace tokenizer: `tN` ↔ id N; any other word is id 1; BOS id 0 with addSpecialTokens. */
export function fakeTokenizer(vocabSize = 1000): BenchTokenizer {
  return {
    vocabSize,
    bosToken: '<s>',
    hasChatTemplate: true,
    encode: (text, add) => {
      const ids = text.split(/\s+/).filter((w) => w !== '').map((w) => (/^t\d+$/.test(w) ? Number(w.slice(1)) : 1));
      return add ? [0, ...ids] : ids;
    },
    decode: (ids) => ids.map((i) => `t${i}`).join(' '),
    applyChatTemplate: (messages) => messages.map((m) => `<${m.role}> ${m.content}`).join(' ') + ' <assistant>',
    vocabIds: () => Array.from({ length: vocabSize }, (_, i) => i),
  };
}

/** A clock that moves only when told; `nextRead()` resolves at the next `now()` call. */
export class FakeClock implements Clock {
  private waiters: (() => void)[] = [];
  constructor(public t: number) {}
  now(): number {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
    return this.t;
  }
  nextRead(): Promise<void> {
    return new Promise((resolve) => this.waiters.push(resolve));
  }
  async sleep(seconds: number): Promise<void> {
    this.t += seconds;
  }
}

/** One body line of a scripted response, `at` seconds after its batch started. */
export interface ScriptLine {
  at: number;
  line: string;
}

/** A request as the fake server saw it. */
export interface SeenRequest {
  path: string;
  body: Record<string, unknown>;
}

/** Options of {@link startFakeServer}. */
export interface FakeServerOptions {
  /** Drives timing (lockstep); without it lines are written at once. */
  clock?: FakeClock;
  /** Sizes of the successive request batches (lockstep): a batch's lines go out once that many arrived. Default 1. */
  batches?: number[];
  /** Tokens generated when ignore_eos is false (the fake model's EOS position). */
  eosAfter?: number;
  /** Accept length reported by /get_server_info (null: no speculative decoding). */
  acceptLength?: number | null;
  /** Tokens per chunk after the first (default 2). */
  chunkTokens?: number;
  /** Replaces the default script. */
  script?: (req: SeenRequest) => ScriptLine[];
}

/** A running fake server. */
export interface FakeServer {
  url: string;
  seen: SeenRequest[];
  close(): Promise<void>;
}

/** Tokens the fake model generates for a request honouring max tokens and ignore_eos. */
export function generatedCount(req: SeenRequest, eosAfter: number): number {
  const b = req.body;
  const sp = (b.sampling_params ?? {}) as Record<string, unknown>;
  const max = Number(sp.max_new_tokens ?? b.max_tokens ?? b.max_completion_tokens ?? 16);
  const ignoreEos = Boolean(sp.ignore_eos ?? b.ignore_eos ?? false);
  return ignoreEos ? max : Math.min(max, eosAfter);
}

/**
 * Default script: first token at +0.5 s; for /generate a duplicate event (no new token) at +0.625; then chunks
 * of up to `chunkTokens` tokens every 0.25 s; `[DONE]` 0.0625 s after the last chunk. Generated words are `w0 w1 ...`.
 * /v1/completions puts `usage` on the last text chunk; chat streams `delta.content`.
 */
export function defaultScript(req: SeenRequest, eosAfter: number, chunkTokens = 2): ScriptLine[] {
  const n = generatedCount(req, eosAfter);
  const words = Array.from({ length: n }, (_, i) => `w${i} `);
  const chunks: number[] = n > 0 ? [1] : [];
  for (let left = n - 1; left > 0; left -= Math.min(chunkTokens, left)) chunks.push(Math.min(chunkTokens, left));
  const out: ScriptLine[] = [];
  const stream = req.body.stream !== false;
  let done = 0;
  let t = 0.5;
  const data = (obj: unknown): string => `data: ${JSON.stringify(obj)}\n\n`;
  const lines: ScriptLine[] = [];
  chunks.forEach((k, ci) => {
    const prev = done;
    done += k;
    const text = words.slice(prev, done).join('');
    const cumulative = words.slice(0, done).join('');
    const isLast = ci === chunks.length - 1;
    if (req.path === '/generate') {
      lines.push({ at: t, line: data({ text: cumulative, meta_info: { completion_tokens: done, prompt_tokens: 1 } }) });
      if (ci === 0) lines.push({ at: t + 0.125, line: data({ text: cumulative, meta_info: { completion_tokens: done } }) });
    } else if (req.path === '/v1/completions') {
      const ev: Record<string, unknown> = { choices: [{ index: 0, text }] };
      if (isLast) ev.usage = { completion_tokens: n, prompt_tokens: 1 };
      lines.push({ at: t, line: data(ev) });
    } else {
      lines.push({ at: t, line: data({ choices: [{ index: 0, delta: { content: text } }] }) });
      if (isLast) lines.push({ at: t, line: data({ choices: [], usage: { completion_tokens: n } }) });
    }
    if (!isLast) t += 0.25;
  });
  if (!stream) {
    const full = words.join('');
    const body =
      req.path === '/generate'
        ? { text: full, meta_info: { completion_tokens: n } }
        : req.path === '/v1/completions'
          ? { choices: [{ text: full }], usage: { completion_tokens: n } }
          : { choices: [{ message: { role: 'assistant', content: full } }], usage: { completion_tokens: n } };
    return [{ at: t + 0.0625, line: JSON.stringify(body) + '\n' }];
  }
  out.push(...lines, { at: t + 0.0625, line: 'data: [DONE]\n\n' });
  return out;
}

interface Pending {
  req: SeenRequest;
  res: http.ServerResponse;
  lines: ScriptLine[];
  order: number;
}

/** Starts the fake server on 127.0.0.1 (random port). */
export async function startFakeServer(opts: FakeServerOptions = {}): Promise<FakeServer> {
  const eosAfter = opts.eosAfter ?? 3;
  const script = opts.script ?? ((r: SeenRequest) => defaultScript(r, eosAfter, opts.chunkTokens));
  const seen: SeenRequest[] = [];
  const batches = [...(opts.batches ?? [])];
  let waiting: Pending[] = [];
  let arrival = 0;
  let emitting: Promise<void> = Promise.resolve();

  const emitBatch = async (batch: Pending[]): Promise<void> => {
    const clock = opts.clock!;
    const t0 = clock.t;
    const events: { at: number; order: number; seq: number; p: Pending; last: boolean; line: string }[] = [];
    for (const p of batch) {
      p.res.writeHead(200, { 'Content-Type': 'text/event-stream' });
      p.lines.forEach((l, seq) => events.push({ at: l.at, order: p.order, seq, p, last: seq === p.lines.length - 1, line: l.line }));
    }
    events.sort((a, b) => a.at - b.at || a.order - b.order || a.seq - b.seq);
    for (const e of events) {
      clock.t = t0 + e.at;
      const read = clock.nextRead();
      if (e.last) e.p.res.end(e.line);
      else e.p.res.write(e.line);
      await read;
    }
  };

  const server = http.createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on('data', (c: Buffer) => parts.push(c));
    req.on('end', () => {
      const path = (req.url ?? '/').split('?')[0];
      if (req.method === 'GET') {
        if (path === '/v1/models') return json(res, { object: 'list', data: [{ id: 'fake-model', object: 'model' }] });
        if (path === '/get_server_info') {
          const states = opts.acceptLength ? [{ avg_spec_accept_length: opts.acceptLength }] : [];
          return json(res, { model_path: 'fake-model', internal_states: states });
        }
        res.writeHead(404).end('{"detail":"Not Found"}');
        return;
      }
      const body = JSON.parse(Buffer.concat(parts).toString('utf8') || '{}') as Record<string, unknown>;
      if (path === '/flush_cache') return json(res, {});
      const seenReq = { path, body };
      seen.push(seenReq);
      const lines = script(seenReq);
      if (!opts.clock) {
        res.writeHead(200, { 'Content-Type': 'text/event-stream' });
        res.end(lines.map((l) => l.line).join(''));
        return;
      }
      waiting.push({ req: seenReq, res, lines, order: arrival++ });
      const need = batches.length > 0 ? batches[0] : 1;
      if (waiting.length >= need) {
        if (batches.length > 0) batches.shift();
        const batch = waiting;
        waiting = [];
        emitting = emitting.then(() => emitBatch(batch));
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    seen,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function json(res: http.ServerResponse, obj: unknown): void {
  res.writeHead(200, { 'Content-Type': 'application/json' });
  res.end(JSON.stringify(obj));
}
