// The HTTP server on node:http (SGLang's http_server.py routes): routing, API-key check, body reading and JSON
// parsing, CORS, client-disconnect → abort, and the small admin routes. The handlers of the generation routes
// live in serving_*.ts; error → status/body mapping lives in http_errors.ts. Never runs model math or the BPE:
// everything heavy is the engine's (its tokenizer worker and core worker threads).
import { STATUS_CODES, createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { AbortReqInputSchema, SSE_CONTENT_TYPE, parseWire } from '../protocol/index.js';
import type { ModelCard } from '../protocol/index.js';
import type { Exchange, ServerDeps } from './context.js';
import { handleChatCompletion } from './serving_chat.js';
import { handleCompletion } from './serving_completions.js';
import { handleGenerate } from './serving_generate.js';
import { handleDetokenize, handleTokenize } from './serving_tokenize.js';
import { decodeJsonBody } from './json_body.js';
import {
  BODY_PARSE_ERROR, METHOD_NOT_ALLOWED, ROUTE_NOT_FOUND, UNAUTHORIZED, bodyTooLargeError, invalidJsonError, modelNotFoundError, toHttpError,
  errorResponse, parseOrReply, unsupportedMediaError,
  type HttpError,
} from './http_errors.js';
import { WEIGHT_VERSION, newRid, nowSeconds } from './request_utils.js';
import { withRequestLogging } from './request_logger.js';
import { handleStartProfile, handleStopProfile } from './serving_profile.js';

/**
 * uvicorn's access log line, at info level once the response is complete (or the connection closed):
 * `127.0.0.1:54321 - "POST /v1/chat/completions HTTP/1.1" 200 OK`.
 */
function logAccess(req: IncomingMessage, res: ServerResponse, logger: ServerDeps['logger']): void {
  let done = false;
  const line = () => {
    if (done) return;
    done = true;
    const phrase = STATUS_CODES[res.statusCode] ?? '';
    logger.info(`${req.socket.remoteAddress ?? '-'}:${req.socket.remotePort ?? 0} - "${req.method ?? 'GET'} ${req.url ?? '/'} HTTP/${req.httpVersion}" ${res.statusCode}${phrase ? ' ' + phrase : ''}`);
  };
  res.once('finish', line);
  res.once('close', line);
}

const CORS_HEADERS = {
  'access-control-allow-origin': '*',
  'access-control-allow-methods': '*',
  'access-control-allow-headers': '*',
  'access-control-allow-credentials': 'true',
};

/** Seconds /health_generate waits for any output (SGLANG_HEALTH_CHECK_TIMEOUT). */
const HEALTH_CHECK_TIMEOUT_MS = 20_000;

class NodeExchange implements Exchange {
  private readonly controller = new AbortController();
  readonly arrivalMs = performance.now();
  constructor(private readonly res: ServerResponse) {
    res.on('close', () => {
      if (!res.writableFinished) this.controller.abort();
    });
  }
  get signal(): AbortSignal { return this.controller.signal; }
  get headersSent(): boolean { return this.res.headersSent; }
  sendJson(status: number, body: unknown): void {
    if (this.res.headersSent || this.res.destroyed) return;
    const text = JSON.stringify(body);
    this.res.writeHead(status, { ...CORS_HEADERS, 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
    this.res.end(text);
  }
  sendText(status: number, text: string, contentType = 'text/plain; charset=utf-8'): void {
    if (this.res.headersSent || this.res.destroyed) return;
    this.res.writeHead(status, { ...CORS_HEADERS, 'content-type': contentType, 'content-length': Buffer.byteLength(text) });
    this.res.end(text);
  }
  startSse(): void {
    this.res.writeHead(200, { ...CORS_HEADERS, 'content-type': SSE_CONTENT_TYPE, 'cache-control': 'no-cache', connection: 'keep-alive' });
    this.res.flushHeaders();
  }
  writeSse(event: string): void {
    if (!this.res.destroyed) this.res.write(event);
  }
  end(): void {
    if (!this.res.writableEnded) this.res.end();
  }
}

/**
 * SGLang's `validate_json_request` (http_server.py) on the OpenAI routes: the Content-Type's media type, the part
 * before the first `;`, lower-cased, must be exactly `application/json` (a substring test would let
 * `text/plain; application/json` through, a CORS-safelisted type that any web page may POST without a preflight).
 */
export function isJsonMediaType(contentType: string | undefined): boolean {
  return (contentType ?? '').toLowerCase().split(';', 1)[0] === 'application/json';
}

/** Milliseconds a draining server still answers 503 after its last response ended (requests already sent). */
const DRAIN_LINGER_MS = 100;

/** Body of the 503 every request gets once the server is shutting down (SGLang's ErrorResponse). */
export const SHUTTING_DOWN_MESSAGE = 'The server is shutting down.';

/**
 * Largest request body accepted, bytes: V8's longest string (0x1fffffe8 UTF-16 units; a body of at most this many
 * bytes always decodes to a string that fits, in UTF-8, -16 or -32).
 */
export const MAX_BODY_BYTES = 0x1fffffe8;

/**
 * Reads a request body. A body over `maxBytes` is drained and dropped as it arrives (memory stays bounded) and
 * resolves to its size instead of its bytes.
 * @returns the bytes, or `{ tooLarge: bytes }`; rejects only on a socket error
 */
function readBody(req: IncomingMessage, maxBytes = MAX_BODY_BYTES): Promise<Buffer | { tooLarge: number }> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let bytes = 0;
    req.on('data', (c: Buffer) => {
      bytes += c.length;
      if (bytes <= maxBytes) chunks.push(c);
      else chunks.length = 0;
    });
    req.on('end', () => {
      if (bytes > maxBytes) resolve({ tooLarge: bytes });
      else {
        try {
          resolve(Buffer.concat(chunks));
        } catch (err) {
          reject(err);
        }
      }
    });
    req.on('error', reject);
  });
}

/**
 * SGLang-compatible HTTP server. Starts in "starting" state (/health → 503) until `setReady(true)`.
 */
export class HttpServer {
  private readonly server: Server;
  private ready = false;
  /** Shutting down: every new request (on any connection, kept-alive ones too) gets a 503 and `Connection: close`. */
  private draining = false;
  /** Responses not yet finished or closed. */
  private active = 0;

  private readonly deps: ServerDeps;

  /** @param deps engine, tokenizer, config slice, prompt builder, parsers, metrics, logger */
  constructor(deps: ServerDeps) {
    // --log-requests: every route's engine calls go through SGLang's Receive/Finish request log
    this.deps = deps.config.logRequests ? { ...deps, engine: withRequestLogging(deps.engine, deps.logger, deps.config.logRequestsLevel) } : deps;
    this.server = createServer((req, res) => {
      this.active++;
      res.once('close', () => { this.active--; });
      logAccess(req, res, deps.logger);
      this.dispatch(req, res).catch((err: unknown) => {
        deps.logger.error(`unhandled error on ${req.method} ${req.url}: ${(err as Error)?.stack ?? String(err)}`);
        const e = toHttpError(err);
        if (!res.headersSent) {
          res.writeHead(e.status, { 'content-type': 'application/json' });
          res.end(JSON.stringify(e.body));
        } else {
          res.end();
        }
      });
    });
    this.server.keepAliveTimeout = 5_000;
  }

  /** Marks the server up (after warmup) or down (shutdown). */
  setReady(ready: boolean): void {
    this.ready = ready;
  }

  /**
   * Starts the shutdown (SIGTERM/SIGINT): from now on every new request, also one arriving on a kept-alive
   * connection, is refused with 503 (SGLang's ErrorResponse; /health and /health_generate: an empty 503, as SGLang
   * answers them once it is exiting) and `Connection: close`; responses under way carry on (the caller aborts their
   * engine requests, so they end with finish_reason abort and `[DONE]`). Idempotent.
   */
  beginDrain(): void {
    this.draining = true;
    this.ready = false;
  }

  /** Responses under way (started and not yet finished or closed). */
  get numActive(): number {
    return this.active;
  }

  /**
   * Binds host:port.
   * @returns the bound port (useful with port 0)
   */
  listen(host: string, port: number): Promise<number> {
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, host, () => {
        this.server.off('error', reject);
        resolve((this.server.address() as AddressInfo).port);
      });
    });
  }

  /**
   * Drains (beginDrain: new requests get 503 + Connection: close, on new and kept-alive connections alike) until the
   * responses under way have ended, or `graceMs` at most, then {@link DRAIN_LINGER_MS} more for requests already on
   * the wire; then stops listening and closes every connection (a response still open then is cut).
   * @param graceMs milliseconds active responses get to finish
   */
  async close(graceMs = 3000): Promise<void> {
    this.beginDrain();
    const end = performance.now() + graceMs;
    while (this.active > 0 && performance.now() < end) await new Promise((r) => setTimeout(r, 10));
    await new Promise((r) => setTimeout(r, DRAIN_LINGER_MS));
    await new Promise<void>((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
  }

  /** The 503 of a request that arrives while draining (see beginDrain). */
  private refuseDraining(res: ServerResponse, path: string): void {
    if (res.headersSent || res.destroyed) return;
    const text = path.startsWith('/health') ? '' : JSON.stringify(errorResponse(SHUTTING_DOWN_MESSAGE, 503));
    res.writeHead(503, { ...CORS_HEADERS, 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), connection: 'close' });
    res.end(text);
  }

  private async dispatch(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const ex = new NodeExchange(res);
    const send = (e: HttpError) => ex.sendJson(e.status, e.body);
    const method = req.method ?? 'GET';
    const url = new URL(req.url ?? '/', 'http://localhost');
    const path = url.pathname;
    const { config } = this.deps;
    if (this.draining) { this.refuseDraining(res, path); return; }
    if (method === 'OPTIONS') { ex.sendText(200, ''); return; }
    if (config.apiKey !== null && !path.startsWith('/health') && path !== '/metrics') {
      if (req.headers.authorization !== `Bearer ${config.apiKey}`) { send(UNAUTHORIZED); return; }
    }
    const route = ROUTES[path];
    if (!route) {
      if (path.startsWith('/v1/models/')) {
        if (method !== 'GET') { send(METHOD_NOT_ALLOWED); return; }
        let name: string;
        try {
          name = decodeURIComponent(path.slice('/v1/models/'.length));
        } catch {
          send(ROUTE_NOT_FOUND); // a malformed %-escape names no model (Starlette answers 404)
          return;
        }
        if (name === config.servedModelName) ex.sendJson(200, this.modelCard());
        else send(modelNotFoundError(name));
        return;
      }
      send(ROUTE_NOT_FOUND);
      return;
    }
    if (!route.methods.includes(method)) { send(METHOD_NOT_ALLOWED); return; }
    let body: unknown = undefined;
    let raw = '';
    if (method === 'POST' || method === 'PUT') {
      const limit = this.deps.maxBodyBytes ?? MAX_BODY_BYTES;
      const got = await readBody(req, limit);
      if (!Buffer.isBuffer(got)) { send(bodyTooLargeError(got.tooLarge, limit)); return; }
      if (route.json) {
        const ct = req.headers['content-type'];
        if (route.openai && !isJsonMediaType(ct)) { send(unsupportedMediaError(ct)); return; }
        // bytes → text as Python's json.loads(bytes): UTF-8/16/32 by BOM or NUL pattern, strict (SGLang: 400 on failure)
        const text = decodeJsonBody(got);
        if (text === null) { send(BODY_PARSE_ERROR); return; }
        raw = text;
        if (raw.trim() === '' && route.optionalBody) body = {};
        else {
          try { body = JSON.parse(raw); } catch (err) { send(invalidJsonError((err as Error).message)); return; }
        }
      }
    }
    if (this.draining) { this.refuseDraining(res, path); return; } // shutdown began while the body was arriving
    await route.handle(this, ex, body, raw);
  }

  /** /v1/models card of the served model. */
  modelCard(): ModelCard {
    const name = this.deps.config.servedModelName;
    return { id: name, object: 'model', created: nowSeconds(), owned_by: 'sglang', root: name, max_model_len: this.deps.engine.info.contextLength };
  }

  /** @internal route handlers */
  get depsForRoutes(): ServerDeps { return this.deps; }
  /** @internal */
  get isReady(): boolean { return this.ready; }
}

interface Route {
  methods: readonly string[];
  json?: boolean;
  openai?: boolean;
  optionalBody?: boolean;
  /** @param body the parsed JSON (json routes) @param raw the decoded body text of json routes, '' otherwise */
  handle(s: HttpServer, ex: Exchange, body: unknown, raw: string): Promise<void>;
}

async function healthGenerate(s: HttpServer, ex: Exchange): Promise<void> {
  if (!s.isReady) { ex.sendText(503, ''); return; }
  const { engine } = s.depsForRoutes;
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(), HEALTH_CHECK_TIMEOUT_MS);
  try {
    const it = engine.generate({ rid: `HEALTH_CHECK_${newRid()}`, inputIds: [0], samplingParams: { maxNewTokens: 1, temperature: 0 } }, ac.signal);
    let ok = false;
    for await (const o of it) { if (o.finishReason?.type !== 'abort') ok = true; }
    ex.sendText(ok ? 200 : 503, '');
  } catch {
    ex.sendText(503, '');
  } finally {
    clearTimeout(timer);
  }
}

const ROUTES: Record<string, Route> = {
  '/health': { methods: ['GET'], handle: async (s, ex) => ex.sendText(s.isReady ? 200 : 503, '') },
  '/health_generate': { methods: ['GET'], handle: (s, ex) => healthGenerate(s, ex) },
  '/v1/chat/completions': { methods: ['POST'], json: true, openai: true, handle: (s, ex, body, raw) => handleChatCompletion(s.depsForRoutes, ex, body, raw) },
  '/v1/completions': { methods: ['POST'], json: true, openai: true, handle: (s, ex, body) => handleCompletion(s.depsForRoutes, ex, body) },
  '/generate': { methods: ['POST', 'PUT'], json: true, handle: (s, ex, body) => handleGenerate(s.depsForRoutes, ex, body) },
  '/v1/models': { methods: ['GET'], handle: async (s, ex) => ex.sendJson(200, { object: 'list', data: [s.modelCard()] }) },
  '/model_info': { methods: ['GET'], handle: async (s, ex) => ex.sendJson(200, modelInfo(s)) },
  '/get_model_info': { methods: ['GET'], handle: async (s, ex) => ex.sendJson(200, modelInfo(s)) },
  '/server_info': { methods: ['GET'], handle: (s, ex) => serverInfo(s, ex) },
  '/get_load': { methods: ['GET'], handle: (s, ex) => getLoad(s, ex) },
  '/get_server_info': { methods: ['GET'], handle: (s, ex) => serverInfo(s, ex) },
  '/flush_cache': {
    methods: ['GET', 'POST'],
    handle: async (s, ex) => {
      const ok = await s.depsForRoutes.engine.flushCache();
      ex.sendText(ok ? 200 : 400, ok
        ? 'Cache flushed.\nPlease check backend logs for more details. (When there are running or waiting requests, the operation will not be performed.)\n'
        : 'Cache flush failed: there are running or waiting requests.\n');
    },
  },
  '/abort_request': {
    methods: ['POST'], json: true,
    handle: async (s, ex, body) => {
      // SGLang validates the body as AbortReqInput: only a JSON object with fields of the right types (else 400)
      const b = parseOrReply(ex, () => parseWire(AbortReqInputSchema, body));
      if (b === null) return;
      if (b.abort_all === true) s.depsForRoutes.engine.abortAll();
      else if (typeof b.rid === 'string' && b.rid !== '') s.depsForRoutes.engine.abort(b.rid);
      ex.sendText(200, '');
    },
  },
  '/metrics': {
    methods: ['GET'],
    handle: async (s, ex) => {
      const m = s.depsForRoutes.metrics;
      if (!m) { ex.sendJson(ROUTE_NOT_FOUND.status, ROUTE_NOT_FOUND.body); return; }
      ex.sendText(200, await m.render(), 'text/plain; version=0.0.4; charset=utf-8');
    },
  },
  '/start_profile': { methods: ['GET', 'POST'], json: true, optionalBody: true, handle: (s, ex, body) => handleStartProfile(s.depsForRoutes, ex, body) },
  '/stop_profile': { methods: ['GET', 'POST'], json: true, optionalBody: true, handle: (s, ex) => handleStopProfile(s.depsForRoutes, ex) },
  '/v1/tokenize': { methods: ['POST'], json: true, handle: (s, ex, body) => handleTokenize(s.depsForRoutes, ex, body) },
  '/tokenize': { methods: ['POST'], json: true, handle: (s, ex, body) => handleTokenize(s.depsForRoutes, ex, body) },
  '/v1/detokenize': { methods: ['POST'], json: true, handle: (s, ex, body) => handleDetokenize(s.depsForRoutes, ex, body) },
  '/detokenize': { methods: ['POST'], json: true, handle: (s, ex, body) => handleDetokenize(s.depsForRoutes, ex, body) },
};

function modelInfo(s: HttpServer): Record<string, unknown> {
  const d = s.depsForRoutes;
  return {
    model_path: d.engine.info.modelPath,
    tokenizer_path: d.engine.info.tokenizerPath,
    is_generation: true,
    preferred_sampling_params: d.config.preferredSamplingParams,
    weight_version: WEIGHT_VERSION,
    has_image_understanding: false,
    has_audio_understanding: false,
    model_type: d.modelFacts.modelType,
    architectures: d.modelFacts.architectures,
  };
}

function snakeKeys(o: object): Record<string, unknown> {
  return Object.fromEntries(Object.entries(o).map(([k, v]) => [k.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`), v]));
}

/**
 * /get_load (SGLang http_server get_load): one entry per DP rank, `num_tokens` being the KV tokens in use; the router's
 * load monitor (power_of_two) and /get_loads read it.
 */
async function getLoad(s: HttpServer, ex: Exchange): Promise<void> {
  const load = await s.depsForRoutes.engine.getLoad();
  ex.sendJson(200, (load.dpLoads ?? [load]).map((l, i) => ({
    dp_rank: i, num_reqs: l.numRunningReqs + l.numQueueReqs, num_waiting_reqs: l.numQueueReqs, num_tokens: l.numUsedTokens,
  })));
}

async function serverInfo(s: HttpServer, ex: Exchange): Promise<void> {
  const d = s.depsForRoutes;
  const info = d.engine.info;
  const load = await d.engine.getLoad();
  ex.sendJson(200, {
    ...d.serverArgs,
    model_path: info.modelPath,
    tokenizer_path: info.tokenizerPath,
    context_length: info.contextLength,
    max_total_num_tokens: info.maxTotalNumTokens,
    max_req_input_len: info.maxReqInputLen,
    max_running_requests: info.maxRunningRequests,
    max_prefill_tokens: info.maxPrefillTokens,
    chunked_prefill_size: info.chunkedPrefillSize,
    page_size: info.pageSize,
    kv_cache_max_bytes: info.kvCacheMaxBytes ?? null,
    // one entry per DP rank (SGLang: each scheduler's internal state); one when dp_size = 1
    internal_states: (load.dpLoads ?? [load]).map((l) => ({
      last_gen_throughput: l.genThroughput,
      num_running_reqs: l.numRunningReqs,
      num_queue_reqs: l.numQueueReqs,
      token_usage: l.tokenUsage,
      cache_hit_rate: l.cacheHitRate,
      kv_cache_committed_bytes: l.kvCacheCommittedBytes ?? null,
      ...(l.avgSpecAcceptLength !== undefined ? { avg_spec_accept_length: l.avgSpecAcceptLength } : {}),
      num_used_tokens: l.numUsedTokens,
      ...(l.disaggregation ? { disaggregation: snakeKeys(l.disaggregation) } : {}),
    })),
    version: d.version,
    ...(d.tsglangVersion !== undefined ? { tsglang_version: d.tsglangVersion } : {}),
  });
}
