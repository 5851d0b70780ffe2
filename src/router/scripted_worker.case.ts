// Test support for the router tests: scripted workers (node:http servers in this process that answer /health and hand
// every other request to a script), router start-up on free ports, and small HTTP helpers. Nothing here asserts.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Logger } from '../common/index.js';
import { parseRouterArgs, type RouterArgs } from './router_args.js';
import { startRouter, type RunningRouter } from './router_server.js';

/** A silent logger. */
export const QUIET = new Logger('error', '', () => undefined);

/** One request a scripted worker saw. */
export interface Hit {
  readonly method: string;
  readonly path: string;
  readonly body: Record<string, unknown>;
  readonly headers: http.IncomingHttpHeaders;
}

/** A scripted worker. */
export interface Scripted {
  readonly url: string;
  readonly server: http.Server;
  /** Every request except /health, in arrival order. */
  readonly hits: Hit[];
  /** Requests to `path` only. */
  on(path: string): Hit[];
  /** Answer /health with this status (200 by default). */
  healthStatus: number;
  close(): Promise<void>;
}

/** Handles one request of a scripted worker. */
export type Handler = (path: string, body: Record<string, unknown>, res: http.ServerResponse, req: http.IncomingMessage) => void;

/** Starts a scripted worker on a free loopback port. */
export async function scripted(handler: Handler): Promise<Scripted> {
  const hits: Hit[] = [];
  const self = {} as Scripted;
  const server = http.createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on('data', (c: Buffer) => parts.push(c));
    req.on('end', () => {
      const path = (req.url ?? '/').split('?')[0];
      if (path === '/health') {
        res.writeHead(self.healthStatus);
        res.end();
        return;
      }
      let body: Record<string, unknown> = {};
      try {
        body = parts.length ? (JSON.parse(Buffer.concat(parts).toString()) as Record<string, unknown>) : {};
      } catch { /* not JSON */ }
      hits.push({ method: req.method ?? 'GET', path, body, headers: req.headers });
      handler(path, body, res, req);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  Object.assign(self, {
    url, hits, server, healthStatus: 200,
    on: (p: string) => hits.filter((h) => h.path === p),
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((r) => server.close(() => r()));
    },
  });
  return self;
}

/** Writes a JSON answer. */
export function json(res: http.ServerResponse, status: number, v: unknown): void {
  const text = JSON.stringify(v);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

/** Router args for tests: loopback, free ports, 1 ms backoff, 1 s start-up polls, plus `extra`. */
export function testArgs(extra: string[]): RouterArgs {
  const a = parseRouterArgs([...extra, '--host', '127.0.0.1', '--port', '0', '--prometheus-port', '0', '--worker-startup-check-interval', '1', '--retry-initial-backoff-ms', '1']);
  if (a === 'help') throw new Error('unexpected help');
  return a;
}

/** Starts a router with testArgs(extra). */
export function testRouter(extra: string[]): Promise<RunningRouter> {
  return startRouter(testArgs(extra), QUIET);
}

/** A client answer. */
export interface Answer {
  readonly status: number;
  readonly text: string;
  readonly headers: Record<string, string>;
}

/** POSTs JSON (or a raw string) to the router. */
export async function post(port: number, path: string, body: unknown, headers: Record<string, string> = {}): Promise<Answer> {
  const r = await fetch(`http://127.0.0.1:${port}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: typeof body === 'string' ? body : JSON.stringify(body) });
  return { status: r.status, text: await r.text(), headers: Object.fromEntries(r.headers) };
}

/** Any method without a body. */
export async function call(port: number, method: string, path: string, headers: Record<string, string> = {}): Promise<Answer> {
  const r = await fetch(`http://127.0.0.1:${port}${path}`, { method, headers });
  return { status: r.status, text: await r.text(), headers: Object.fromEntries(r.headers) };
}
