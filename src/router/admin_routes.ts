// The router's non-generation routes, as sgl-model-gateway's server.rs lays them out: public /liveness, /readiness,
// /health, /health_generate, /v1/models, /get_model_info (/model_info), /get_server_info (/server_info); admin
// /flush_cache, /get_loads, /add_worker, /remove_worker, /list_workers; the worker API /workers[/{url}].
import type http from 'node:http';
import { forward, readBody } from './http_forward.js';
import { RouterError, type RouterContext } from './router_context.js';
import type { Worker, WorkerRole } from './worker.js';

/** What the worker-management routes need beyond the handler context. */
export interface AdminContext extends RouterContext {
  /**
   * Adds a server (one target per DP rank under --dp-aware) once it answers its health check.
   * @returns SGLang's success message @throws Error with the reason (already there, never healthy, bad URL)
   */
  addWorker(url: string, role: WorkerRole, bootstrapPort: number | null): Promise<string>;
  /** Removes a server's targets. @returns SGLang's message @throws Error when it is unknown */
  removeWorker(url: string): string;
}

/** Public GET routes (no API key). */
export const PUBLIC_GET = new Set(['/liveness', '/readiness', '/health', '/health_generate', '/v1/models', '/get_model_info', '/model_info', '/get_server_info', '/server_info']);

function send(res: http.ServerResponse, status: number, body: unknown): void {
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  res.writeHead(status, { 'content-type': typeof body === 'string' ? 'text/plain; charset=utf-8' : 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

/** Distinct servers behind the targets (a --dp-aware server counts once). */
function servers(ws: readonly Worker[]): Worker[] {
  const seen = new Set<string>();
  return ws.filter((w) => (seen.has(w.baseUrl) ? false : (seen.add(w.baseUrl), true)));
}

/** GET `path` on one worker, its answer passed through. */
async function proxyGet(ctx: RouterContext, req: http.IncomingMessage, res: http.ServerResponse, w: Worker, path: string): Promise<void> {
  const r = await forward(w.baseUrl, 'GET', path, ctx.headersFor(req.headers), null, ctx.args.requestTimeoutSecs * 1000);
  const body = await readBody(r.body);
  res.writeHead(r.status, { 'content-type': String(r.headers['content-type'] ?? 'application/json'), 'content-length': body.length });
  res.end(body);
}

async function healthGenerate(ctx: RouterContext, req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
  const info = { text: '', routingKey: null };
  const pair = ctx.args.pdDisaggregation
    ? [ctx.pick(ctx.prefillPolicy!, 'prefill', info), ctx.pick(ctx.decodePolicy!, 'decode', info)]
    : [ctx.workers.find((w) => w.role === 'regular' && w.healthy) ?? null];
  if (pair.some((w) => w === null)) throw new RouterError(503, 'no_healthy_worker_pair', 'No healthy worker available for /health_generate');
  const errors: string[] = [];
  await Promise.all((pair as Worker[]).map(async (w) => {
    try {
      const r = await forward(w.baseUrl, 'GET', '/health_generate', ctx.headersFor(req.headers), null, ctx.args.requestTimeoutSecs * 1000);
      await readBody(r.body).catch(() => undefined);
      if (r.status !== 200) errors.push(`${w.role} ${w.url} returned status ${r.status}`);
    } catch (e) {
      errors.push(`${w.role} ${w.url} error: ${(e as Error).message}`);
    }
  }));
  if (errors.length > 0) throw new RouterError(503, 'health_generate_failed', `Health generate failed: ${errors.join('; ')}`);
  send(res, 200, ctx.args.pdDisaggregation ? `Health generate passed on selected pair: prefill=${pair[0]!.url}, decode=${pair[1]!.url}` : `Health generate passed on ${pair[0]!.url}`);
}

/** The pass-through GETs: PD mode asks the first prefill worker (SGLang), regular mode the first healthy one. */
async function infoRoute(ctx: RouterContext, req: http.IncomingMessage, res: http.ServerResponse, path: string): Promise<void> {
  const target = path === '/model_info' ? '/get_model_info' : path === '/server_info' ? '/get_server_info' : path;
  if (ctx.args.pdDisaggregation) {
    const p = ctx.workers.find((w) => w.role === 'prefill');
    if (!p) throw new RouterError(503, 'no_prefill_servers', 'No prefill servers available');
    return proxyGet(ctx, req, res, p, target);
  }
  const w = ctx.workers.find((x) => x.healthy);
  if (!w) throw new RouterError(503, 'no_workers', 'No workers are available');
  return proxyGet(ctx, req, res, w, target);
}

/** /readiness: ready when a healthy worker exists (PD: one of each role). */
function readiness(ctx: RouterContext, res: http.ServerResponse): void {
  const healthy = ctx.workers.filter((w) => w.healthy);
  const ready = ctx.args.pdDisaggregation ? healthy.some((w) => w.role === 'prefill') && healthy.some((w) => w.role === 'decode') : healthy.length > 0;
  if (ready) send(res, 200, { status: 'ready', healthy_workers: healthy.length, total_workers: ctx.workers.length });
  else send(res, 503, { status: 'not ready', reason: 'insufficient healthy workers' });
}

async function flushCache(ctx: RouterContext, req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
  const all = servers(ctx.workers);
  const failed: { worker: string; error: string }[] = [];
  const ok: string[] = [];
  await Promise.all(all.map(async (w) => {
    try {
      const r = await forward(w.baseUrl, 'POST', '/flush_cache', ctx.headersFor(req.headers), Buffer.alloc(0), ctx.args.requestTimeoutSecs * 1000);
      const text = (await readBody(r.body)).toString('utf8');
      if (r.status < 300) ok.push(w.baseUrl);
      else failed.push({ worker: w.baseUrl, error: `HTTP ${r.status}: ${text}` });
    } catch (e) {
      failed.push({ worker: w.baseUrl, error: (e as Error).message });
    }
  }));
  if (failed.length === 0) {
    send(res, 200, { status: 'success', message: `Successfully flushed cache on all ${ok.length} HTTP workers`, workers_flushed: ok.length, total_http_workers: all.length, total_workers: ctx.workers.length });
  } else {
    send(res, 206, { status: 'partial_success', message: `Cache flush completed: ${ok.length} succeeded, ${failed.length} failed (out of ${all.length} HTTP workers)`, successful: ok, failed, total_http_workers: all.length, total_workers: ctx.workers.length });
  }
}

/**
 * A worker's own load: the sum of `num_tokens` over its /get_load entries (the entry of its DP rank for a --dp-aware
 * target). @returns null when it does not answer
 */
export async function fetchWorkerLoad(ctx: RouterContext, w: Worker): Promise<number | null> {
  try {
    const r = await forward(w.baseUrl, 'GET', '/get_load', ctx.headersFor({}), null, ctx.args.healthCheckTimeoutSecs * 1000);
    const text = (await readBody(r.body)).toString('utf8');
    if (r.status !== 200) return null;
    const v = JSON.parse(text) as unknown;
    const entries = (Array.isArray(v) ? v : [v]) as { dp_rank?: number; num_tokens?: number }[];
    const mine = w.dpRank === null ? entries : entries.filter((e) => e.dp_rank === w.dpRank);
    return mine.reduce((s, e) => s + (typeof e.num_tokens === 'number' ? e.num_tokens : 0), 0);
  } catch {
    return null;
  }
}

function workerInfo(w: Worker): Record<string, unknown> {
  return {
    url: w.url, model_id: 'unknown', worker_type: w.role, is_healthy: w.healthy, load: w.load, connection_mode: 'Http', priority: 50, cost: 1.0,
    ...(w.role === 'prefill' ? { bootstrap_port: w.bootstrapPort } : {}),
    ...(w.dpRank !== null ? { dp_rank: w.dpRank } : {}),
    circuit_state: w.breaker.state,
  };
}

/** Worker management: /add_worker, /remove_worker, /list_workers, /workers[/{url}]. @returns false when not one */
async function workerRoutes(ctx: AdminContext, req: http.IncomingMessage, res: http.ServerResponse, path: string, query: URLSearchParams): Promise<boolean> {
  const m = req.method ?? 'GET';
  if (m === 'GET' && path === '/list_workers') { send(res, 200, { urls: ctx.workers.map((w) => w.url) }); return true; }
  if (m === 'POST' && (path === '/add_worker' || path === '/remove_worker')) {
    const url = query.get('url');
    if (!url) { send(res, 400, 'Missing required query parameter: url'); return true; }
    try {
      if (path === '/add_worker') {
        if (ctx.args.pdDisaggregation) throw new Error('/add_worker adds regular workers; in PD mode use POST /workers with worker_type prefill or decode');
        send(res, 200, await ctx.addWorker(url, 'regular', null));
      } else {
        send(res, 200, ctx.removeWorker(url));
      }
    } catch (e) {
      send(res, 400, (e as Error).message);
    }
    return true;
  }
  if (path === '/workers' && m === 'GET') {
    const count = (r: WorkerRole): number => ctx.workers.filter((w) => w.role === r).length;
    send(res, 200, { workers: ctx.workers.map(workerInfo), total: ctx.workers.length, stats: { prefill_count: count('prefill'), decode_count: count('decode'), regular_count: count('regular') } });
    return true;
  }
  if (path === '/workers' && m === 'POST') {
    let cfg: { url?: unknown; worker_type?: unknown; bootstrap_port?: unknown };
    try {
      cfg = JSON.parse((await readBody(req, 1 << 20)).toString('utf8') || '{}') as typeof cfg;
    } catch (e) {
      send(res, 400, { error: `Invalid JSON body: ${(e as Error).message}`, code: 'ADD_WORKER_FAILED' });
      return true;
    }
    try {
      if (typeof cfg.url !== 'string') throw new Error('url is required');
      const role = (cfg.worker_type ?? (ctx.args.pdDisaggregation ? null : 'regular')) as WorkerRole | null;
      if (role !== 'regular' && role !== 'prefill' && role !== 'decode') throw new Error(`worker_type must be ${ctx.args.pdDisaggregation ? 'prefill or decode' : 'regular'}`);
      if ((role === 'regular') === ctx.args.pdDisaggregation) throw new Error(`a ${role} worker does not fit a router in ${ctx.args.pdDisaggregation ? 'PD' : 'regular'} mode`);
      const bp = typeof cfg.bootstrap_port === 'number' ? cfg.bootstrap_port : null;
      send(res, 200, { success: true, message: await ctx.addWorker(cfg.url, role, bp), worker: null });
    } catch (e) {
      send(res, 400, { error: (e as Error).message, code: 'ADD_WORKER_FAILED' });
    }
    return true;
  }
  if (path.startsWith('/workers/')) {
    const url = decodeURIComponent(path.slice('/workers/'.length));
    if (m === 'GET') {
      const w = ctx.workers.find((x) => x.url === url || x.baseUrl === url);
      if (w) send(res, 200, workerInfo(w));
      else send(res, 404, { error: `Worker ${url} not found`, code: 'WORKER_NOT_FOUND' });
      return true;
    }
    if (m === 'DELETE') {
      try {
        send(res, 200, { success: true, message: ctx.removeWorker(url), worker: null });
      } catch (e) {
        send(res, 400, { error: (e as Error).message, code: 'REMOVE_WORKER_FAILED' });
      }
      return true;
    }
  }
  return false;
}

/**
 * Serves one non-generation route. @returns false when `path` is none of them (the caller answers 404)
 * @throws RouterError for SGLang's error answers (no worker, health_generate failed)
 */
export async function handleAdmin(ctx: AdminContext, req: http.IncomingMessage, res: http.ServerResponse, path: string, query: URLSearchParams): Promise<boolean> {
  const m = req.method ?? 'GET';
  if (m === 'GET' && (path === '/liveness' || path === '/health')) { send(res, 200, 'OK'); return true; }
  if (m === 'GET' && path === '/readiness') { readiness(ctx, res); return true; }
  if (m === 'GET' && path === '/health_generate') { await healthGenerate(ctx, req, res); return true; }
  if (m === 'GET' && PUBLIC_GET.has(path)) { await infoRoute(ctx, req, res, path); return true; }
  if (m === 'POST' && path === '/flush_cache') { await flushCache(ctx, req, res); return true; }
  if (m === 'GET' && path === '/get_loads') {
    const loads = await Promise.all(ctx.workers.map(async (w) => ({ worker: w.url, load: (await fetchWorkerLoad(ctx, w)) ?? -1 })));
    send(res, 200, { workers: loads });
    return true;
  }
  return workerRoutes(ctx, req, res, path, query);
}
