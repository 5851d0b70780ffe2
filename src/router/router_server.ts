// The router's HTTP server (sglang_router / sgl-model-gateway; serving-spec.md §6): the worker set with its health
// checks, circuit breakers and load monitor, the policies, admission control, and the dispatch of each request to the
// generation handlers (route_regular.ts, route_pd.ts) or the other routes (admin_routes.ts). Prometheus metrics on
// --prometheus-port.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Logger } from '../common/index.js';
import { AdmissionControl, TokenBucket } from './admission.js';
import { fetchWorkerLoad, handleAdmin, PUBLIC_GET, type AdminContext } from './admin_routes.js';
import { backoffMs, endToEndHeaders, forward, readBody, sendRouterError, type RetryConfig } from './http_forward.js';
import { GENERATION_ROUTES, routingText } from './pd_request.js';
import { createPolicy, PowerOfTwoPolicy, type LoadBalancingPolicy, type PolicyConfig, type PolicyDecision, type SelectInfo } from './policies.js';
import { routePd } from './route_pd.js';
import { routeRegular } from './route_regular.js';
import type { RouterArgs } from './router_args.js';
import { RouterError } from './router_context.js';
import { RouterMetrics } from './router_metrics.js';
import { Worker, type CircuitBreakerConfig, type WorkerRole } from './worker.js';

/** A running router. */
export interface RunningRouter {
  readonly port: number;
  readonly prometheusPort: number | null;
  readonly workers: readonly Worker[];
  readonly router: Router;
  /** Stops accepting, waits up to `graceMs` for requests in flight, then closes everything. */
  close(graceMs?: number): Promise<void>;
}

const ID_CHARS = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

/** SGLang's generated request id: a route prefix (chatcmpl-, cmpl-, gnt-, req-) and 24 random characters. */
export function newRequestId(path: string): string {
  const prefix = path.includes('/chat/completions') ? 'chatcmpl-' : path.includes('/completions') ? 'cmpl-' : path.includes('/generate') ? 'gnt-' : 'req-';
  let s = '';
  // not a secret (SGLang draws it from a non-cryptographic generator too); crypto.randomBytes costs a syscall per request
  for (let i = 0; i < 24; i++) s += ID_CHARS[Math.floor(Math.random() * ID_CHARS.length)];
  return prefix + s;
}

/** The router: workers, policies, and the request dispatch. */
export class Router implements AdminContext {
  readonly workers: Worker[] = [];
  readonly metrics: RouterMetrics;
  readonly regularPolicy: LoadBalancingPolicy | null;
  readonly prefillPolicy: LoadBalancingPolicy | null;
  readonly decodePolicy: LoadBalancingPolicy | null;
  readonly retry: RetryConfig;
  readonly admission: AdmissionControl | null;
  private readonly cb: CircuitBreakerConfig;
  private readonly timers: NodeJS.Timeout[] = [];
  /** Requests being handled (graceful shutdown waits for them). */
  inFlight = 0;

  constructor(readonly args: RouterArgs, readonly logger: Logger) {
    this.metrics = new RouterMetrics(() => this.workers, args.prometheusDurationBuckets);
    this.cb = {
      failureThreshold: args.cbFailureThreshold, successThreshold: args.cbSuccessThreshold,
      timeoutMs: args.cbTimeoutDurationSecs * 1000, windowMs: args.cbWindowDurationSecs * 1000, disabled: args.disableCircuitBreaker,
    };
    for (const u of args.workerUrls) this.workers.push(this.newWorker(u, 'regular', null));
    for (const [u, p] of args.prefill) this.workers.push(this.newWorker(u, 'prefill', p));
    for (const u of args.decode) this.workers.push(this.newWorker(u, 'decode', null));
    const cfg: PolicyConfig = {
      cacheThreshold: args.cacheThreshold, balanceAbsThreshold: args.balanceAbsThreshold, balanceRelThreshold: args.balanceRelThreshold,
      evictionIntervalSecs: args.evictionIntervalSecs, maxTreeSize: args.maxTreeSize, maxIdleSecs: args.maxIdleSecs,
      assignmentMode: args.assignmentMode, bucketAdjustIntervalSecs: args.bucketAdjustIntervalSecs,
    };
    this.regularPolicy = args.pdDisaggregation ? null : createPolicy(args.policy, cfg);
    this.prefillPolicy = args.pdDisaggregation ? createPolicy(args.prefillPolicy ?? args.policy, cfg) : null;
    // one cache_aware policy for both roles: prefill cache-aware, decode the lighter of two (sgl-router PD default)
    const decodeName = args.decodePolicy ?? (args.policy === 'cache_aware' && !args.prefillPolicy ? 'power_of_two' : args.policy);
    this.decodePolicy = args.pdDisaggregation ? createPolicy(decodeName === 'bucket' ? 'power_of_two' : decodeName, cfg) : null;
    this.retry = { maxRetries: args.disableRetries ? 1 : Math.max(1, args.retryMaxRetries), initialBackoffMs: args.retryInitialBackoffMs, maxBackoffMs: args.retryMaxBackoffMs, multiplier: args.retryBackoffMultiplier, jitter: args.retryJitterFactor };
    this.admission = args.maxConcurrentRequests > 0
      ? new AdmissionControl(new TokenBucket(args.maxConcurrentRequests, args.rateLimitTokensPerSecond ?? args.maxConcurrentRequests), Math.max(0, args.queueSize), args.queueTimeoutSecs * 1000)
      : null;
  }

  private newWorker(url: string, role: WorkerRole, bootstrapPort: number | null, dpRank: number | null = null): Worker {
    const w: Worker = new Worker(url, role, bootstrapPort, this.cb, (from, to) => {
      this.metrics.onTransition(w.url, from, to);
      this.logger.info(`circuit breaker of ${w.url}: ${from} -> ${to}`);
    }, dpRank);
    return w;
  }

  headersFor(h: http.IncomingHttpHeaders): Record<string, string | string[]> {
    const out = endToEndHeaders(h);
    delete out['authorization'];
    if (this.args.apiKey) out['authorization'] = `Bearer ${this.args.apiKey}`;
    return out;
  }

  pick(policy: LoadBalancingPolicy, role: WorkerRole, info: SelectInfo): Worker | null {
    const d: PolicyDecision | null = policy.select(this.workers.filter((w) => w.role === role && w.available), info);
    if (!d) return null;
    this.metrics.decisions.inc({ policy: policy.name, worker: d.worker.url });
    if (d.cacheHit === true) this.metrics.cacheHits.inc();
    else if (d.cacheHit === false) this.metrics.cacheMisses.inc();
    if (d.balanced) this.metrics.lbEvents.inc();
    return d.worker;
  }

  outcome(w: Worker, status: number | null): void {
    const ok = status !== null && status < 500;
    w.breaker.record(ok);
    this.metrics.cbOutcomes.inc({ worker: w.url, outcome: ok ? 'success' : 'failure' });
    if (status === null && w.healthy) void this.probeAfterFailure(w.baseUrl);
  }

  private readonly probing = new Set<string>();

  /**
   * A connection to a server failed: its health endpoint is checked at once, and when that fails too its targets are
   * unhealthy without waiting for the periodic checks (a server that answers stays healthy: the failure was one
   * connection's).
   */
  private async probeAfterFailure(baseUrl: string): Promise<void> {
    if (this.probing.has(baseUrl)) return;
    this.probing.add(baseUrl);
    try {
      if (await this.probe(baseUrl)) return;
      for (const w of this.workers.filter((x) => x.baseUrl === baseUrl && x.healthy)) {
        w.markUnhealthy();
        this.logger.warning(`worker ${w.url} marked unhealthy (a connection failed and its health check too)`);
      }
    } finally {
      this.probing.delete(baseUrl);
    }
  }

  async sleepBackoff(attempt: number, route: string): Promise<void> {
    this.metrics.retries.inc({ route });
    await new Promise((r) => setTimeout(r, backoffMs(this.retry, attempt)));
  }

  /** GET --health-check-endpoint of a server. @returns true on 200 */
  private async probe(baseUrl: string): Promise<boolean> {
    try {
      const r = await forward(baseUrl, 'GET', this.args.healthCheckEndpoint, this.headersFor({}), null, this.args.healthCheckTimeoutSecs * 1000);
      await readBody(r.body).catch(() => undefined);
      return r.status === 200;
    } catch {
      return false;
    }
  }

  /** One health check of every server, applied to all its targets. */
  async checkHealth(): Promise<void> {
    const a = this.args;
    const bases = [...new Set(this.workers.map((w) => w.baseUrl))];
    await Promise.all(bases.map(async (b) => {
      const ok = await this.probe(b);
      for (const w of this.workers.filter((x) => x.baseUrl === b)) {
        if (w.recordHealth(ok, a.healthFailureThreshold, a.healthSuccessThreshold)) this.logger.info(`worker ${w.url} is now ${w.healthy ? 'healthy' : 'unhealthy'}`);
      }
    }));
  }

  /**
   * Polls `baseUrls` until each answers its health check (every --worker-startup-check-interval).
   * @throws Error naming the servers still down after --worker-startup-timeout-secs
   */
  async waitHealthy(baseUrls: readonly string[]): Promise<void> {
    const deadline = Date.now() + this.args.workerStartupTimeoutSecs * 1000;
    const pending = new Set(baseUrls);
    for (;;) {
      await Promise.all([...pending].map(async (u) => { if (await this.probe(u)) pending.delete(u); }));
      if (pending.size === 0) return;
      if (Date.now() >= deadline) throw new Error(`workers not healthy after ${this.args.workerStartupTimeoutSecs} s: ${[...pending].join(', ')}`);
      this.logger.info(`waiting for workers to become healthy: ${[...pending].join(', ')}`);
      await new Promise((r) => setTimeout(r, Math.min(this.args.workerStartupCheckInterval * 1000, Math.max(0, deadline - Date.now()))));
    }
  }

  /**
   * --dp-aware: one target per DP rank of the server at `baseUrl` (dp_size from its /get_server_info).
   * @throws Error when the server does not say its dp_size
   */
  private async expandDp(baseUrl: string, role: WorkerRole, bootstrapPort: number | null): Promise<Worker[]> {
    const r = await forward(baseUrl, 'GET', '/get_server_info', this.headersFor({}), null, this.args.healthCheckTimeoutSecs * 1000);
    const text = (await readBody(r.body)).toString('utf8');
    let dp: unknown;
    try {
      dp = (JSON.parse(text) as { dp_size?: unknown }).dp_size;
    } catch { dp = undefined; }
    if (r.status !== 200 || typeof dp !== 'number' || !Number.isInteger(dp) || dp < 1) throw new Error(`No dp_size in response from ${baseUrl}`);
    return Array.from({ length: dp }, (_, rank) => this.newWorker(baseUrl, role, bootstrapPort, rank));
  }

  /** Start-up: waits for the configured workers (unless --disable-health-check) and expands them under --dp-aware. */
  async init(): Promise<void> {
    if (!this.args.disableHealthCheck) await this.waitHealthy([...new Set(this.workers.map((w) => w.baseUrl))]);
    if (this.args.dpAware) {
      const expanded: Worker[] = [];
      for (const w of this.workers) expanded.push(...(await this.expandDp(w.baseUrl, w.role, w.bootstrapPort)));
      this.workers.splice(0, this.workers.length, ...expanded);
      this.logger.info(`--dp-aware: ${expanded.length} targets: ${expanded.map((w) => w.url).join(', ')}`);
    }
  }

  async addWorker(url: string, role: WorkerRole, bootstrapPort: number | null): Promise<string> {
    let base: string;
    try {
      const u = new URL(url);
      if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error();
      base = url.replace(/\/+$/, '');
    } catch {
      throw new Error(`Invalid worker URL: ${url}`);
    }
    if (this.workers.some((w) => w.baseUrl === base)) throw new Error(`Worker ${base} already exists`);
    await this.waitHealthy([base]);
    if (this.workers.some((w) => w.baseUrl === base)) throw new Error(`Worker ${base} already exists`);
    const added = this.args.dpAware ? await this.expandDp(base, role, bootstrapPort) : [this.newWorker(base, role, bootstrapPort)];
    this.workers.push(...added);
    this.logger.info(`added ${role} worker ${base}${added.length > 1 ? ` (${added.length} DP ranks)` : ''}`);
    return `Successfully added worker: ${base}`;
  }

  removeWorker(url: string): string {
    const base = url.replace(/\/+$/, '');
    const gone = this.workers.filter((w) => w.baseUrl === base || w.url === base);
    if (gone.length === 0) throw new Error(`Worker ${base} not found`);
    for (const w of gone) {
      this.workers.splice(this.workers.indexOf(w), 1);
      for (const p of [this.regularPolicy, this.prefillPolicy, this.decodePolicy]) p?.removeWorker?.(w.url);
    }
    this.logger.info(`removed worker ${base}`);
    return `Successfully removed worker: ${base}`;
  }

  /** Starts the periodic health checks and, for power_of_two, the load monitor (/get_load every startup interval). */
  startBackground(): void {
    if (!this.args.disableHealthCheck) this.timers.push(setInterval(() => void this.checkHealth(), this.args.healthCheckIntervalSecs * 1000));
    const p2 = [this.regularPolicy, this.prefillPolicy, this.decodePolicy].filter((p): p is PowerOfTwoPolicy => p instanceof PowerOfTwoPolicy);
    if (p2.length > 0) {
      const poll = async (): Promise<void> => {
        const loads = new Map<string, number>();
        await Promise.all(this.workers.map(async (w) => {
          const l = await fetchWorkerLoad(this, w);
          if (l !== null) loads.set(w.url, l);
        }));
        for (const p of p2) p.updateLoads(loads);
      };
      void poll();
      this.timers.push(setInterval(() => void poll(), Math.max(1, this.args.workerStartupCheckInterval) * 1000));
    }
    for (const t of this.timers) t.unref();
  }

  /** Stops timers, policies and the admission queue. */
  close(): void {
    for (const t of this.timers) clearInterval(t);
    for (const p of [this.regularPolicy, this.prefillPolicy, this.decodePolicy]) p?.close?.();
    this.admission?.close();
  }

  private cors(req: http.IncomingMessage, res: http.ServerResponse): void {
    const origin = req.headers['origin'];
    const allowed = this.args.corsAllowedOrigins;
    if (typeof origin !== 'string' || allowed.length === 0 || !(allowed.includes(origin) || allowed.includes('*'))) return;
    res.setHeader('access-control-allow-origin', allowed.includes('*') ? '*' : origin);
    res.setHeader('vary', 'origin');
  }

  /** Handles one client request. */
  async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://router');
    const path = url.pathname;
    const t0 = performance.now();
    const ridHeader = this.args.requestIdHeaders.find((h) => typeof req.headers[h] === 'string');
    res.setHeader('x-request-id', ridHeader ? String(req.headers[ridHeader]) : newRequestId(path));
    this.cors(req, res);
    this.metrics.requests.inc({ route: path });
    this.inFlight++;
    try {
      if (req.method === 'OPTIONS' && this.args.corsAllowedOrigins.length > 0) {
        res.writeHead(200, { 'access-control-allow-methods': 'GET, POST, PUT, DELETE, OPTIONS', 'access-control-allow-headers': String(req.headers['access-control-request-headers'] ?? '*'), 'content-length': 0 });
        res.end();
        return;
      }
      const isPublic = req.method === 'GET' && PUBLIC_GET.has(path);
      if (this.args.apiKey && !isPublic && req.headers['authorization'] !== `Bearer ${this.args.apiKey}`) throw new RouterError(401, 'unauthorized', 'Invalid or missing API key');
      if (req.method === 'POST' && GENERATION_ROUTES.has(path)) return await this.generation(req, res, path);
      if (await handleAdmin(this, req, res, path, url.searchParams)) return;
      throw new RouterError(404, 'not_found', `No route for ${req.method} ${path}`);
    } catch (e) {
      const err = e instanceof RouterError ? e : new RouterError(500, 'internal_error', (e as Error).message);
      this.metrics.errors.inc({ route: path, error_type: err.code });
      sendRouterError(res, err.status, err.code, err.message);
    } finally {
      this.inFlight--;
      this.metrics.duration.observe({ route: path }, (performance.now() - t0) / 1000);
    }
  }

  /** A generation request: admission, body checks, then regular or PD routing. */
  private async generation(req: http.IncomingMessage, res: http.ServerResponse, path: string): Promise<void> {
    if (this.admission) {
      const gone = new AbortController();
      const onClose = (): void => gone.abort();
      res.once('close', onClose);
      const a = await this.admission.admit(gone.signal);
      res.off('close', onClose);
      if (!a.ok) {
        // SGLang answers these with the bare status (no body)
        res.writeHead(a.status, { 'content-length': 0 });
        res.end();
        return;
      }
      res.once('close', a.release);
    }
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
    const key = req.headers['x-smg-routing-key'];
    const info: SelectInfo = { text: routingText(path, body), routingKey: typeof key === 'string' && key !== '' ? key : null };
    if (this.args.pdDisaggregation) await routePd(this, req, res, path, body, info);
    else await routeRegular(this, req, res, path, raw, body, info);
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
 * @throws Error when workers never become healthy, a --dp-aware worker has no dp_size, or a port is taken
 */
export async function startRouter(args: RouterArgs, logger: Logger = new Logger('info', '[router]')): Promise<RunningRouter> {
  const router = new Router(args, logger);
  try {
    await router.init();
  } catch (e) {
    router.close();
    throw e;
  }
  router.startBackground();
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
  const limit = router.admission ? `, max ${args.maxConcurrentRequests} concurrent (queue ${args.queueSize}, ${args.queueTimeoutSecs} s)` : '';
  logger.info(`router listening on http://${args.host}:${port}, ${mode}, policy ${args.policy}${limit}${promPort !== null ? `, metrics on ${args.prometheusHost}:${promPort}` : ''}`);
  return {
    port,
    prometheusPort: promPort,
    workers: router.workers,
    router,
    close: async (graceMs = 0) => {
      server.close();
      const until = Date.now() + graceMs;
      while (router.inFlight > 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
      router.close();
      server.closeAllConnections();
      await new Promise<void>((r) => (server.listening ? server.close(() => r()) : r()));
      if (prom) await new Promise<void>((r) => prom!.close(() => r()));
    },
  };
}
