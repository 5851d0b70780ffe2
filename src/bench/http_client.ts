// Minimal HTTP client of the bench and eval tools over node:http / node:https (no fetch: undici's 300 s
// header timeout would fail slow non-streamed requests on CPU). Knows nothing of benchmarks.
import http from 'node:http';
import https from 'node:https';
import { InvalidRequestError } from '../common/index.js';

// A new connection per request, as SGLang's clients open one aiohttp session per request (TTFT includes the
// connect). Reusing idle keep-alive sockets also races the server's idle timeout after a long synchronous step
// (tokenizer load): the reused socket is already closed and the request fails with "socket hang up".
const HTTP_AGENT = new http.Agent({ keepAlive: false, maxSockets: Infinity });
const HTTPS_AGENT = new https.Agent({ keepAlive: false, maxSockets: Infinity });

/** A response whose body is still to be read (chunk by chunk or whole). */
export interface HttpResponse {
  status: number;
  /** HTTP reason phrase (`OK`, `Bad Request`), '' when absent. */
  reason: string;
  headers: http.IncomingHttpHeaders;
  /** The body as it arrives. Read it once: either iterate this or call `text()`. */
  body: AsyncIterable<Buffer>;
  /** Reads the whole body as UTF-8. */
  text(): Promise<string>;
}

/** Options of {@link httpRequest}. */
export interface HttpRequestOptions {
  method?: 'GET' | 'POST';
  headers?: Record<string, string>;
  /** JSON-serialized as the body (Content-Type: application/json). */
  json?: unknown;
  /** Whole-request timeout (ms); default none. */
  timeoutMs?: number;
  signal?: AbortSignal;
}

/**
 * Sends one HTTP request and resolves when the status line and headers arrived.
 * @param url absolute http:// or https:// URL
 * @throws InvalidRequestError for a malformed URL; network errors reject with the socket's Error
 */
export function httpRequest(url: string, opts: HttpRequestOptions = {}): Promise<HttpResponse> {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new InvalidRequestError(`bad URL '${url}' (expected http://host:port/...)`, 'base_url');
  }
  const isHttps = parsed.protocol === 'https:';
  const mod = isHttps ? https : http;
  const body = opts.json === undefined ? undefined : Buffer.from(JSON.stringify(opts.json), 'utf8');
  const headers: Record<string, string> = { ...(opts.headers ?? {}) };
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    headers['Content-Length'] = String(body.length);
  }
  return new Promise<HttpResponse>((resolve, reject) => {
    const req = mod.request(
      parsed,
      {
        method: opts.method ?? (body === undefined ? 'GET' : 'POST'),
        headers,
        agent: isHttps ? HTTPS_AGENT : HTTP_AGENT,
        signal: opts.signal,
      },
      (res) => {
        const response: HttpResponse = {
          status: res.statusCode ?? 0,
          reason: res.statusMessage ?? '',
          headers: res.headers,
          body: res,
          text: async () => {
            const parts: Buffer[] = [];
            for await (const c of res) parts.push(c as Buffer);
            return Buffer.concat(parts).toString('utf8');
          },
        };
        resolve(response);
      },
    );
    if (opts.timeoutMs !== undefined) {
      req.setTimeout(opts.timeoutMs, () => req.destroy(new Error(`timeout after ${opts.timeoutMs} ms: ${url}`)));
    }
    req.on('error', reject);
    if (body !== undefined) req.write(body);
    req.end();
  });
}

/**
 * GET (or POST with `json`) and parse a JSON answer; null on any failure (network, status ≠ 200, bad JSON).
 * @param timeoutMs whole-request timeout (ms)
 */
export async function fetchJsonOrNull(
  url: string,
  opts: { headers?: Record<string, string>; json?: unknown; timeoutMs?: number } = {},
): Promise<unknown> {
  try {
    const res = await httpRequest(url, { headers: opts.headers, json: opts.json, timeoutMs: opts.timeoutMs ?? 30_000 });
    const text = await res.text();
    if (res.status !== 200) return null;
    return JSON.parse(text) as unknown;
  } catch {
    return null;
  }
}
