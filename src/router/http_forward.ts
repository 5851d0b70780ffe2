// HTTP plumbing of the router: forwarding a request to a worker over keep-alive connection pools, the router's
// error bodies ({"error":{"type","code","message"}}, sgl-router routers/error.rs), and the retry backoff.
import http from 'node:http';
import https from 'node:https';

/** Keep-alive pools shared by every forward (one per protocol). */
const HTTP_AGENT = new http.Agent({ keepAlive: true, maxSockets: 1024, keepAliveMsecs: 1000 });
const HTTPS_AGENT = new https.Agent({ keepAlive: true, maxSockets: 1024, keepAliveMsecs: 1000 });

/** A worker's answer: status, headers and the body stream (not yet read). */
export interface ForwardResponse {
  readonly status: number;
  readonly headers: http.IncomingHttpHeaders;
  readonly body: http.IncomingMessage;
}

/** Headers never copied between the client and a worker (hop-by-hop, or recomputed). */
const HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'content-length', 'host', 'upgrade', 'proxy-connection', 'te', 'trailer']);

/** Copies end-to-end headers (drops hop-by-hop ones). */
export function endToEndHeaders(h: http.IncomingHttpHeaders): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [k, v] of Object.entries(h)) if (v !== undefined && !HOP.has(k)) out[k] = v;
  return out;
}

/**
 * Sends one request to `baseUrl + path` and resolves once the worker's status line and headers arrive. A request that
 * fails on a reused keep-alive connection before any answer (the worker closed an idle connection as it was reused:
 * ECONNRESET, EPIPE, "socket hang up") is sent once more on a new connection, as Node's documentation advises.
 * @param timeoutMs the whole exchange is cut after this long (a hung worker never hangs the client)
 * @param signal aborts the request (client went away, or the other half of a PD pair failed)
 * @throws Error (connection refused/reset, timeout, abort) — the caller counts it as a failure of the worker
 */
export function forward(baseUrl: string, method: string, path: string, headers: Record<string, string | string[]>, body: Buffer | null, timeoutMs: number, signal?: AbortSignal): Promise<ForwardResponse> {
  const url = new URL(path, baseUrl + '/');
  const mod = url.protocol === 'https:' ? https : http;
  const agent = url.protocol === 'https:' ? HTTPS_AGENT : HTTP_AGENT;
  const h: Record<string, string | string[]> = { ...headers };
  if (body) h['content-length'] = String(body.length);
  const attempt = (retried: boolean): Promise<ForwardResponse> => new Promise((resolve, reject) => {
    const req = mod.request(url, { method, headers: h, agent, timeout: timeoutMs, ...(signal ? { signal } : {}) });
    let answered = false;
    req.on('response', (res) => {
      answered = true;
      resolve({ status: res.statusCode ?? 502, headers: res.headers, body: res });
    });
    req.on('timeout', () => req.destroy(new Error(`request to ${baseUrl} timed out after ${timeoutMs} ms`)));
    req.on('error', (e: NodeJS.ErrnoException) => {
      const stale = req.reusedSocket && !answered && !retried && !signal?.aborted && (e.code === 'ECONNRESET' || e.code === 'EPIPE' || e.message === 'socket hang up');
      if (stale) attempt(true).then(resolve, reject);
      else reject(e);
    });
    req.end(body ?? undefined);
  });
  return attempt(false);
}

/**
 * Reads a whole body. @throws Error when the stream breaks (worker died mid-answer) or exceeds `limit` bytes (read to
 * its end first)
 */
export function readBody(res: http.IncomingMessage, limit = Infinity): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    let n = 0;
    res.on('data', (c: Buffer) => {
      n += c.length;
      if (n <= limit) parts.push(c); // past the limit the rest is drained, so the answer can still be written
    });
    res.on('end', () => {
      if (!res.complete) reject(new Error('connection closed before the answer was complete'));
      else if (n > limit) reject(new Error(`body larger than ${limit} bytes`));
      else resolve(Buffer.concat(parts));
    });
    res.on('aborted', () => reject(new Error('connection closed before the answer was complete')));
    res.on('error', reject);
    res.on('close', () => { if (!res.complete) reject(new Error('connection closed before the answer was complete')); });
  });
}

/** HTTP reason phrases of the statuses the router answers with itself. */
export const REASON: Record<number, string> = {
  400: 'Bad Request', 401: 'Unauthorized', 404: 'Not Found', 405: 'Method Not Allowed', 408: 'Request Timeout', 413: 'Payload Too Large',
  429: 'Too Many Requests', 500: 'Internal Server Error', 502: 'Bad Gateway', 503: 'Service Unavailable', 504: 'Gateway Timeout',
};

/** The router's error body: `{"error":{"type":<reason phrase>,"code":<snake_case id>,"message":…}}`. */
export function routerErrorBody(status: number, code: string, message: string): string {
  return JSON.stringify({ error: { type: REASON[status] ?? 'Error', code, message } });
}

/** Writes a router error answer (no-op when headers already went out: the stream is cut instead). */
export function sendRouterError(res: http.ServerResponse, status: number, code: string, message: string, extra: Record<string, string> = {}): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body = routerErrorBody(status, code, message);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), ...extra });
  res.end(body);
}

/** Statuses that are retried on another worker (plus connection errors). */
export const RETRYABLE_STATUS: ReadonlySet<number> = new Set([408, 429, 500, 502, 503, 504]);

/** Retry settings (--retry-*). */
export interface RetryConfig {
  readonly maxRetries: number;
  readonly initialBackoffMs: number;
  readonly maxBackoffMs: number;
  readonly multiplier: number;
  readonly jitter: number;
}

/** Backoff before retry `attempt` (1-based): min(initial · multiplier^(attempt−1), max) · (1 ± jitter), ms. */
export function backoffMs(cfg: RetryConfig, attempt: number, rand: () => number = Math.random): number {
  const base = Math.min(cfg.initialBackoffMs * cfg.multiplier ** Math.max(0, attempt - 1), cfg.maxBackoffMs);
  return Math.max(0, base * (1 + cfg.jitter * (2 * rand() - 1)));
}
