// The router's HTTP server (sglang_router / sgl-model-gateway HTTP surface; serving-spec.md §6): regular mode
// balances each generation request over --worker-urls with retries on another worker; PD mode picks a prefill and a
// decode worker, injects the bootstrap fields and sends the same body to both, answering with the decode worker's
// response (streamed through). Health checks, circuit breakers, Prometheus metrics on --prometheus-port.
import http from 'node:http';
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { Logger } from '../common/index.js';
import { backoffMs, endToEndHeaders, forward, readBody, RETRYABLE_STATUS, sendRouterError, type ForwardResponse, type RetryConfig } from './http_forward.js';
import { injectBootstrap, GENERATION_ROUTES, mergePrefillLogprobs, routingText, streamLogprobMerger, wantsLogprob } from './pd_request.js';
import { createPolicy, type LoadBalancingPolicy, type PolicyDecision } from './policies.js';
import type { RouterArgs } from './router_args.js';
import { RouterMetrics } from './router_metrics.js';
import { Worker, type CircuitBreakerConfig, type WorkerRole } from './worker.js';

/** GET routes passed through to one available worker. */
const PASS_GET = new Set(['/v1/models', '/get_server_info', '/get_model_info', '/health_generate', '/server_info', '/model_info']);

/** A running router. */
export interface RunningRouter {
  readonly port: number;
  readonly prometheusPort: number | null;
  readonly workers: readonly Worker[];
  close(): Promise<void>;
}

class RouterError extends Error {
  constructor(readonly status: number, readonly code: string, message: string) { super(message); }
}

/** The router: workers, policies, and the request handlers. */
export class Router {
  readonly workers: Worker[] = [];
  readonly metrics: RouterMetrics;
  private readonly regularPolicy: LoadBalancingPolicy | null;
  private readonly prefillPolicy: LoadBalancingPolicy | null;
  private readonly decodePolicy: LoadBalancingPolicy | null;
  private readonly retry: RetryConfig;
  private healthTimer: NodeJS.Timeout | null = null;

  constructor(readonly args: RouterArgs, private readonly logger: Logger) {
    this.metrics = new RouterMetrics(() => this.workers);
    const cb: CircuitBreakerConfig = {
      failureThreshold: args.cbFailureThreshold, successThreshold: args.cbSuccessThreshold,
      timeoutMs: args.cbTimeoutDurationSecs * 1000, windowMs: args.cbWindowDurationSecs * 1000, disabled: args.disableCircuitBreaker,
    };
    const add = (url: string, role: WorkerRole, port: number | null): void => {
      const w: Worker = new Worker(url, role, port, cb, (from, to) => {
        this.metrics.onTransition(w.url, from, to);
        this.logger.info(`circuit breaker of ${w.url}: ${from} -> ${to}`);
      });
      this.workers.push(w);
    };
    for (const u of args.workerUrls) add(u, 'regular', null);
    for (const [u, p] of args.prefill) add(u, 'prefill', p);
    for (const u of args.decode) add(u, 'decode', null);
    const ca = { cacheThreshold: args.cacheThreshold, balanceAbsThreshold: args.balanceAbsThreshold, balanceRelThreshold: args.balanceRelThreshold, evictionIntervalSecs: args.evictionIntervalSecs, maxTreeSize: args.maxTreeSize };
    this.regularPolicy = args.pdDisaggregation ? null : createPolicy(args.policy, ca);
    this.prefillPolicy = args.pdDisaggregation ? createPolicy(args.prefillPolicy ?? args.policy, ca) : null;
    // One cache_aware policy for both roles: prefill cache-aware, decode least loaded (sgl-router PD default).
    const decodeName = args.decodePolicy ?? (args.policy === 'cache_aware' && !args.prefillPolicy ? 'power_of_two' : args.policy);
    this.decodePolicy = args.pdDisaggregation ? createPolicy(decodeName, ca) : null;
    this.retry = { maxRetries: args.disableRetries ? 1 : Math.max(1, args.retryMaxRetries), initialBackoffMs: args.retryInitialBackoffMs, maxBackoffMs: args.retryMaxBackoffMs, multiplier: args.retryBackoffMultiplier, jitter: args.retryJitterFactor };
  }

  private headersFor(h: http.IncomingHttpHeaders): Record<string, string | string[]> {
    const out = endToEndHeaders(h);
    delete out['authorization'];
    if (this.args.apiKey) out['authorization'] = `Bearer ${this.args.apiKey}`;
    return out;
  }

  private pick(policy: LoadBalancingPolicy, role: WorkerRole, text: string): Worker | null {
    const d: PolicyDecision | null = policy.select(this.workers.filter((w) => w.role === role && w.available), text);
    if (!d) return null;
    this.metrics.decisions.inc({ policy: policy.name, worker: d.worker.url });
    if (d.cacheHit === true) this.metrics.cacheHits.inc();
    else if (d.cacheHit === false) this.metrics.cacheMisses.inc();
    if (d.balanced) this.metrics.lbEvents.inc();
    return d.worker;
  }

  /** Records the outcome of one exchange with `w` (success = 2xx/4xx); a connection failure also marks it unhealthy. */
  private outcome(w: Worker, status: number | null): void {
    const ok = status !== null && status < 500;
    w.breaker.record(ok);
    this.metrics.cbOutcomes.inc({ worker: w.url, outcome: ok ? 'success' : 'failure' });
    if (status === null && w.healthy) {
      w.markUnhealthy();
      this.logger.warning(`worker ${w.url} marked unhealthy (connection failed)`);
    }
  }

  /** Handles one client request. */
  async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const path = (req.url ?? '/').split('?')[0];
    const t0 = performance.now();
    const ridHeader = this.args.requestIdHeaders.find((h) => typeof req.headers[h] === 'string');
    const rid = ridHeader ? String(req.headers[ridHeader]) : `req-${randomUUID()}`;
    res.setHeader('x-request-id', rid);
    this.metrics.requests.inc({ route: path });
    try {
      if (this.args.apiKey && req.headers['authorization'] !== `Bearer ${this.args.apiKey}`) throw new RouterError(401, 'unauthorized', 'Invalid or missing API key');
      if (req.method === 'GET' && path === '/health') return this.answer(res, 200, 'OK', 'text/plain');
      if (req.method === 'GET' && (path === '/workers' || path === '/list_workers')) {
        return this.answer(res, 200, JSON.stringify({ workers: this.workers.map((w) => ({ url: w.url, role: w.role, bootstrap_port: w.bootstrapPort, healthy: w.healthy, load: w.load, circuit: w.breaker.state })) }), 'application/json');
      }
      if (req.method === 'GET' && PASS_GET.has(path)) return await this.passThrough(req, res, path);
      if (req.method === 'POST' && path === '/flush_cache') return await this.fanOut(req, res, path);
      if (req.method === 'POST' && GENERATION_ROUTES.has(path)) {
        const raw = await readBody(req, this.args.maxPayloadSize).catch((e: Error) => {
          throw /larger/.test(e.message) ? new RouterError(413, 'payload_too_large', `Request body exceeds --max-payload-size (${this.args.maxPayloadSize} bytes)`) : e;
        });
        let body: Record<string, unknown>;
        try {
          const parsed: unknown = JSON.parse(raw.toString('utf8'));
          if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) throw new Error('not an object');
          body = parsed as Record<string, unknown>;
        } catch (e) {
          throw new RouterError(400, 'invalid_request', `Invalid JSON body: ${(e as Error).message}`);
        }
        if (this.args.pdDisaggregation) await this.routePd(req, res, path, body);
        else await this.routeRegular(req, res, path, raw, routingText(path, body));
        return;
      }
      throw new RouterError(404, 'not_found', `No route for ${req.method} ${path}`);
    } catch (e) {
      const err = e instanceof RouterError ? e : new RouterError(500, 'internal_error', (e as Error).message);
      this.metrics.errors.inc({ route: path, error_type: err.code });
      sendRouterError(res, err.status, err.code, err.message);
    } finally {
      this.metrics.duration.observe({ route: path }, (performance.now() - t0) / 1000);
    }
  }

  private answer(res: http.ServerResponse, status: number, body: string, type: string): void {
    res.writeHead(status, { 'content-type': type, 'content-length': Buffer.byteLength(body) });
    res.end(body);
  }

  private async passThrough(req: http.IncomingMessage, res: http.ServerResponse, path: string): Promise<void> {
    const role: WorkerRole = this.args.pdDisaggregation ? 'decode' : 'regular';
    const w = this.workers.find((x) => x.role === role && x.available) ?? null;
    if (!w) throw new RouterError(503, 'server_selection_failed', 'No available workers (all circuits open or unhealthy)');
    const r = await forward(w.url, 'GET', req.url ?? path, this.headersFor(req.headers), null, this.args.requestTimeoutSecs * 1000);
    await this.pipe(r, res);
  }

  private async fanOut(req: http.IncomingMessage, res: http.ServerResponse, path: string): Promise<void> {
    const body = await readBody(req, this.args.maxPayloadSize);
    const rs = await Promise.allSettled(this.workers.filter((w) => w.available).map(async (w) => (await forward(w.url, 'POST', path, this.headersFor(req.headers), body, this.args.requestTimeoutSecs * 1000)).status));
    const ok = rs.every((r) => r.status === 'fulfilled' && r.value < 400);
    this.answer(res, ok ? 200 : 500, ok ? 'Cache flushed on all workers' : 'Cache flush failed on some workers', 'text/plain');
  }

  /**
   * Streams a worker's answer to the client; a worker dying mid-answer cuts the client's connection.
   * @param rewrite applied to each SSE event (text up to its blank line) when given
   */
  private pipe(r: ForwardResponse, res: http.ServerResponse, onEnd?: (ok: boolean) => void, rewrite?: (event: string) => string): Promise<void> {
    return new Promise((resolve) => {
      const h = endToEndHeaders(r.headers);
      if (rewrite) delete h['content-length'];
      res.writeHead(r.status, h);
      let pending = '';
      const write = (c: Buffer): void => {
        if (!rewrite) { res.write(c); return; }
        pending += c.toString('utf8');
        let i: number;
        while ((i = pending.indexOf('\n\n')) >= 0) {
          res.write(rewrite(pending.slice(0, i + 2)));
          pending = pending.slice(i + 2);
        }
      };
      const done = (ok: boolean): void => {
        onEnd?.(ok);
        onEnd = undefined;
        if (!ok) res.destroy();
        resolve();
      };
      r.body.on('data', write);
      r.body.on('end', () => { if (r.body.complete) { res.end(pending); done(true); } else done(false); });
      r.body.on('error', () => done(false));
      r.body.on('close', () => { if (!r.body.complete) done(false); });
      res.on('close', () => { if (!res.writableFinished) r.body.destroy(); });
    });
  }

  private async sleepBackoff(attempt: number, route: string): Promise<void> {
    this.metrics.retries.inc({ route });
    await new Promise((r) => setTimeout(r, backoffMs(this.retry, attempt)));
  }

  private async routeRegular(req: http.IncomingMessage, res: http.ServerResponse, path: string, raw: Buffer, text: string): Promise<void> {
    let last: RouterError | null = null;
    for (let attempt = 0; attempt < this.retry.maxRetries; attempt++) {
      if (attempt > 0) await this.sleepBackoff(attempt, path);
      const w = this.pick(this.regularPolicy!, 'regular', text);
      if (!w) throw last ?? new RouterError(503, 'server_selection_failed', 'No available workers (all circuits open or unhealthy)');
      w.load++;
      let r: ForwardResponse;
      try {
        r = await forward(w.url, 'POST', path, this.headersFor(req.headers), raw, this.args.requestTimeoutSecs * 1000);
      } catch (e) {
        w.load--;
        this.outcome(w, null);
        last = new RouterError(502, 'worker_connection_failed', `Failed to reach worker ${w.url}: ${(e as Error).message}`);
        continue;
      }
      this.outcome(w, r.status);
      if (RETRYABLE_STATUS.has(r.status) && attempt + 1 < this.retry.maxRetries) {
        await readBody(r.body).catch(() => undefined);
        w.load--;
        last = new RouterError(r.status, 'retryable_status', `Worker ${w.url} answered ${r.status}`);
        continue;
      }
      w.processed++;
      this.metrics.processed.inc({ worker: w.url });
      await this.pipe(r, res, (ok) => {
        w.load--;
        if (!ok) this.outcome(w, null);
      });
      return;
    }
    this.metrics.retriesExhausted.inc({ route: path });
    throw last ?? new RouterError(503, 'server_selection_failed', 'No available workers (all circuits open or unhealthy)');
  }

  private async routePd(req: http.IncomingMessage, res: http.ServerResponse, path: string, body: Record<string, unknown>): Promise<void> {
    const text = routingText(path, body);
    const stream = body['stream'] === true;
    let last: RouterError | null = null;
    for (let attempt = 0; attempt < this.retry.maxRetries; attempt++) {
      if (attempt > 0) await this.sleepBackoff(attempt, path);
      const p = this.pick(this.prefillPolicy!, 'prefill', text);
      const d = this.pick(this.decodePolicy!, 'decode', text);
      if (!p || !d) throw last ?? new RouterError(503, 'server_selection_failed', 'No available prefill/decode workers (all circuits open or unhealthy)');
      const payload = Buffer.from(JSON.stringify(injectBootstrap(path, body, p.hostname, p.bootstrapPort)));
      const headers = { ...this.headersFor(req.headers), 'content-type': 'application/json' };
      const timeout = this.args.requestTimeoutSecs * 1000;
      this.metrics.pdPrefill.inc({ worker: p.url });
      this.metrics.pdDecode.inc({ worker: d.url });
      p.load++;
      d.load++;
      const pAbort = new AbortController();
      const dAbort = new AbortController();
      const pRes = forward(p.url, 'POST', path, headers, payload, timeout, pAbort.signal);
      const dRes = forward(d.url, 'POST', path, headers, payload, timeout, dAbort.signal);
      // The prefill answer is read whole (its prompt logprobs are merged); a prefill failure is the root cause.
      const pDone = pRes.then(async (r) => ({ status: r.status, body: await readBody(r.body) }));
      pDone.catch(() => undefined); // awaited below; a prefill failure must not count as unhandled meanwhile
      const release = (): void => { p.load--; d.load--; };
      let dr: ForwardResponse;
      try {
        dr = await dRes;
      } catch (e) {
        const pr = await pDone.catch(() => null);
        release();
        this.outcome(d, null);
        this.outcome(p, pr?.status ?? null);
        this.metrics.pdErrors.inc({ error_type: 'decode_server_error' });
        last = new RouterError(502, 'decode_server_error', `Decode server ${d.url} failed: ${(e as Error).message}`);
        continue;
      }
      if (RETRYABLE_STATUS.has(dr.status) && dr.status !== 500 && attempt + 1 < this.retry.maxRetries) {
        await readBody(dr.body).catch(() => undefined);
        pAbort.abort();
        await pDone.catch(() => null);
        release();
        this.outcome(d, dr.status);
        last = new RouterError(dr.status, 'retryable_status', `Decode worker ${d.url} answered ${dr.status}`);
        continue;
      }
      if (stream) {
        let rewrite: ((event: string) => string) | undefined;
        if (wantsLogprob(path, body)) {
          // the prompt logprobs come from the prefill stream: wait for it before the first decode event goes out
          const pr = await pDone.catch(() => null);
          if (pr && pr.status === 200) rewrite = streamLogprobMerger(pr.body.toString('utf8'));
        }
        void pDone.then((pr) => this.outcome(p, pr.status), () => this.outcome(p, null));
        await this.pipe(dr, res, (ok) => {
          release();
          this.outcome(d, ok ? dr.status : null);
        }, rewrite);
        return;
      }
      let dBody: Buffer;
      try {
        dBody = await readBody(dr.body);
      } catch (e) {
        pAbort.abort();
        await pDone.catch(() => null);
        release();
        this.outcome(d, null);
        throw new RouterError(502, 'decode_server_error', `Decode server ${d.url} failed: ${(e as Error).message}`);
      }
      const pr = await pDone.catch(() => null);
      release();
      this.outcome(d, dr.status);
      this.outcome(p, pr?.status ?? null);
      let out = dBody;
      if (dr.status === 200 && pr && pr.status === 200 && wantsLogprob(path, body)) {
        try {
          out = Buffer.from(JSON.stringify(mergePrefillLogprobs(JSON.parse(pr.body.toString('utf8')), JSON.parse(dBody.toString('utf8')))));
        } catch { /* left as the decode worker wrote it */ }
      }
      d.processed++;
      this.metrics.processed.inc({ worker: d.url });
      res.writeHead(dr.status, { ...endToEndHeaders(dr.headers), 'content-length': out.length });
      res.end(out);
      return;
    }
    this.metrics.retriesExhausted.inc({ route: path });
    throw last!;
  }

  /** One health check of every worker (GET --health-check-endpoint). */
  async checkHealth(): Promise<void> {
    const a = this.args;
    await Promise.all(this.workers.map(async (w) => {
      let ok = false;
      try {
        const r = await forward(w.url, 'GET', a.healthCheckEndpoint, this.headersFor({}), null, a.healthCheckTimeoutSecs * 1000);
        await readBody(r.body).catch(() => undefined);
        ok = r.status === 200;
      } catch { ok = false; }
      if (w.recordHealth(ok, a.healthFailureThreshold, a.healthSuccessThreshold)) this.logger.info(`worker ${w.url} is now ${w.healthy ? 'healthy' : 'unhealthy'}`);
    }));
  }

  /**
   * Waits until every worker answers its health endpoint (polling every --worker-startup-check-interval).
   * @throws Error naming the workers still down after --worker-startup-timeout-secs
   */
  async waitForWorkers(): Promise<void> {
    const deadline = Date.now() + this.args.workerStartupTimeoutSecs * 1000;
    const pending = new Set(this.workers);
    for (;;) {
      await Promise.all([...pending].map(async (w) => {
        try {
          const r = await forward(w.url, 'GET', this.args.healthCheckEndpoint, this.headersFor({}), null, this.args.healthCheckTimeoutSecs * 1000);
          await readBody(r.body).catch(() => undefined);
          if (r.status === 200) pending.delete(w);
        } catch { /* not up yet */ }
      }));
      if (pending.size === 0) return;
      if (Date.now() >= deadline) throw new Error(`workers not healthy after ${this.args.workerStartupTimeoutSecs} s: ${[...pending].map((w) => w.url).join(', ')}`);
      this.logger.info(`waiting for workers to become healthy: ${[...pending].map((w) => w.url).join(', ')}`);
      await new Promise((r) => setTimeout(r, Math.min(this.args.workerStartupCheckInterval * 1000, Math.max(0, deadline - Date.now()))));
    }
  }

  /** Starts the periodic health checks. */
  startHealthChecks(): void {
    this.healthTimer = setInterval(() => void this.checkHealth(), this.args.healthCheckIntervalSecs * 1000);
    this.healthTimer.unref();
  }

  /** Stops timers and policies. */
  close(): void {
    if (this.healthTimer) clearInterval(this.healthTimer);
    for (const p of [this.regularPolicy, this.prefillPolicy, this.decodePolicy]) p?.close?.();
  }
}

function listen(server: http.Server, host: string, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve((server.address() as AddressInfo).port));
  });
}

/**
 * Starts the router: waits for its workers, then serves on --host:--port and metrics on --prometheus-port.
 * @throws Error when workers never become healthy or a port is taken
 */
export async function startRouter(args: RouterArgs, logger: Logger = new Logger('info', '[router]')): Promise<RunningRouter> {
  const router = new Router(args, logger);
  await router.waitForWorkers();
  router.startHealthChecks();
  const server = http.createServer((req, res) => void router.handle(req, res));
  server.keepAliveTimeout = 65_000;
  const port = await listen(server, args.host, args.port);
  let prom: http.Server | null = null;
  let promPort: number | null = null;
  if (args.prometheusPort >= 0) {
    prom = http.createServer((req, res) => {
      void router.metrics.registry.metrics().then((m) => {
        res.writeHead(200, { 'content-type': router.metrics.registry.contentType });
        res.end(m);
      });
    });
    promPort = await listen(prom, args.prometheusHost, args.prometheusPort);
  }
  const mode = args.pdDisaggregation ? `PD (prefill: ${args.prefill.map(([u, p]) => `${u} bootstrap ${p ?? 'none'}`).join(', ')}; decode: ${args.decode.join(', ')})` : `regular (${args.workerUrls.join(', ')})`;
  logger.info(`router listening on http://${args.host}:${port}, ${mode}, policy ${args.policy}${promPort !== null ? `, metrics on ${args.prometheusHost}:${promPort}` : ''}`);
  return {
    port,
    prometheusPort: promPort,
    workers: router.workers,
    close: async () => {
      router.close();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
      if (prom) await new Promise<void>((r) => prom!.close(() => r()));
    },
  };
}
