// Regular mode (sgl-model-gateway routers/http/router.rs): each generation request goes to one worker picked by the
// policy; a retryable answer (408/429/500/502/503/504) or a connection failure is retried on a newly picked worker
// with backoff, up to --retry-max-retries attempts. Under --dp-aware the body carries the target's data_parallel_rank.
import type http from 'node:http';
import { forward, readBody, RETRYABLE_STATUS, type ForwardResponse } from './http_forward.js';
import type { SelectInfo } from './policies.js';
import { RouterError, type RouterContext } from './router_context.js';
import { pipeAnswer } from './stream_pipe.js';
import type { Worker } from './worker.js';

/** The body sent to `w`: the client's bytes, or with data_parallel_rank set for a --dp-aware target. */
export function bodyFor(w: Worker, raw: Buffer, body: Record<string, unknown>): Buffer {
  return w.dpRank === null ? raw : Buffer.from(JSON.stringify({ ...body, data_parallel_rank: w.dpRank }));
}

/**
 * Routes one generation request in regular mode and writes the answer to `res`.
 * @throws RouterError when no worker is available (503) or every attempt failed (the last failure's status)
 */
export async function routeRegular(ctx: RouterContext, req: http.IncomingMessage, res: http.ServerResponse, path: string, raw: Buffer, body: Record<string, unknown>, info: SelectInfo): Promise<void> {
  let last: RouterError | null = null;
  const timeout = ctx.args.requestTimeoutSecs * 1000;
  for (let attempt = 0; attempt < ctx.retry.maxRetries; attempt++) {
    if (attempt > 0) await ctx.sleepBackoff(attempt, path);
    const w = ctx.pick(ctx.regularPolicy!, 'regular', info);
    if (!w) throw last ?? new RouterError(503, 'no_available_workers', 'No available workers (all circuits open or unhealthy)');
    const release = w.acquire(info.routingKey);
    let r: ForwardResponse;
    try {
      r = await forward(w.baseUrl, 'POST', path, ctx.headersFor(req.headers), bodyFor(w, raw, body), timeout);
    } catch (e) {
      release();
      ctx.outcome(w, null);
      last = new RouterError(502, 'worker_connection_failed', `Failed to reach worker ${w.url}: ${(e as Error).message}`);
      continue;
    }
    if (RETRYABLE_STATUS.has(r.status) && attempt + 1 < ctx.retry.maxRetries) {
      await readBody(r.body).catch(() => undefined);
      release();
      ctx.outcome(w, r.status);
      last = new RouterError(r.status, 'retryable_status', `Worker ${w.url} answered ${r.status}`);
      continue;
    }
    w.processed++;
    ctx.metrics.processed.inc({ worker: w.url });
    const end = await pipeAnswer(r, res, {
      breakError: () => ({ type: 'Bad Gateway', code: 'worker_stream_error', message: `Worker ${w.url} failed before its answer was complete` }),
    });
    release();
    // a client that left says nothing about the worker
    if (!end.clientGone) ctx.outcome(w, end.complete ? r.status : null);
    return;
  }
  ctx.metrics.retriesExhausted.inc({ route: path });
  throw last ?? new RouterError(503, 'no_available_workers', 'No available workers (all circuits open or unhealthy)');
}
