// PD mode (sgl-model-gateway routers/http/pd_router.rs; serving-spec.md §5.2): a prefill and a decode worker are picked
// by their policies, the bootstrap fields are injected, and the same body goes to both at once. The prefill answer is
// read whole (its logprobs are merged when asked; its failure is the root cause of any transfer failure) before the
// decode answer is passed on, streamed or not. A failure of either side ends that attempt with SGLang's error code
// (prefill_server_error / decode_server_error for connection failures, prefill_* / decode_* by status) and a retryable
// one is retried on a newly picked pair.
import type http from 'node:http';
import { endToEndHeaders, forward, readBody, REASON, RETRYABLE_STATUS, type ForwardResponse } from './http_forward.js';
import { mergePrefillAnswer, streamLogprobMerger } from './logprob_merge.js';
import { injectBootstrap, wantsLogprob } from './pd_request.js';
import type { SelectInfo } from './policies.js';
import { RouterError, type RouterContext } from './router_context.js';
import { pipeAnswer } from './stream_pipe.js';

const STATUS_CODE: Record<number, string> = { 400: 'bad_request', 404: 'not_found', 500: 'internal_error', 502: 'bad_gateway', 503: 'unavailable' };

/** A worker's non-2xx answer as the router's error: SGLang's `<side>_<kind>` code, the status it maps to. */
function sideError(side: 'prefill' | 'decode', status: number, body: string): RouterError {
  const kind = STATUS_CODE[status];
  const mapped = kind ? status : 500;
  let msg = body;
  try {
    const j = JSON.parse(body) as { error?: { message?: unknown } | string; message?: unknown };
    const m = typeof j.error === 'object' && j.error !== null ? j.error.message : typeof j.message === 'string' ? j.message : undefined;
    if (typeof m === 'string') msg = m;
  } catch { /* not JSON: the text itself */ }
  if (side === 'prefill') msg = `Prefill server error (${status} ${REASON[status] ?? ''}): ${msg}`.replace(/ \)/, ')');
  return new RouterError(mapped, `${side}_${kind ?? 'error'}`, msg);
}

type PrefillResult = { ok: true; status: number; body: Buffer } | PrefillFailure;
type PrefillFailure = { ok: false; err: RouterError; status: number | null };

/**
 * Routes one generation request in PD mode and writes the answer to `res`.
 * @throws RouterError when no pair is available (503 server_selection_failed) or every attempt failed
 */
export async function routePd(ctx: RouterContext, req: http.IncomingMessage, res: http.ServerResponse, path: string, body: Record<string, unknown>, info: SelectInfo): Promise<void> {
  const stream = body['stream'] === true;
  const merge = wantsLogprob(path, body);
  const timeout = ctx.args.requestTimeoutSecs * 1000;
  let last: RouterError | null = null;
  for (let attempt = 0; attempt < ctx.retry.maxRetries; attempt++) {
    if (attempt > 0) await ctx.sleepBackoff(attempt, path);
    const p = ctx.pick(ctx.prefillPolicy!, 'prefill', info);
    const d = p ? ctx.pick(ctx.decodePolicy!, 'decode', info) : null;
    if (!p || !d) {
      throw last ?? new RouterError(503, 'server_selection_failed', `No available servers: No available ${p ? 'decode' : 'prefill'} workers (all circuits open or unhealthy)`);
    }
    const payload = Buffer.from(JSON.stringify(injectBootstrap(path, body, p.hostname, p.bootstrapPort)));
    const headers = { ...ctx.headersFor(req.headers), 'content-type': 'application/json' };
    ctx.metrics.pdPrefill.inc({ worker: p.url });
    ctx.metrics.pdDecode.inc({ worker: d.url });
    const releaseP = p.acquire(info.routingKey);
    const releaseD = d.acquire(info.routingKey);
    const pAbort = new AbortController();
    const dAbort = new AbortController();
    const pDone: Promise<PrefillResult> = forward(p.baseUrl, 'POST', path, headers, payload, timeout, pAbort.signal).then(
      async (r) => {
        const b = await readBody(r.body).catch((e: Error) => e);
        if (b instanceof Error) return { ok: false, status: null, err: new RouterError(502, 'prefill_server_error', `Prefill server error: ${b.message}. This will cause decode timeout.`) };
        if (r.status >= 300) return { ok: false, status: r.status, err: sideError('prefill', r.status, b.toString('utf8')) };
        return { ok: true, status: r.status, body: b };
      },
      (e: Error) => ({ ok: false, status: null, err: new RouterError(502, 'prefill_server_error', `Prefill server error: ${e.message}. This will cause decode timeout.`) }),
    );
    const dHead = forward(d.baseUrl, 'POST', path, headers, payload, timeout, dAbort.signal);
    dHead.catch(() => undefined);
    // whichever comes first: the decode answer's head, or the prefill side failing (then the decode side is cancelled)
    const first = await Promise.race([
      dHead.then((r) => ({ kind: 'decode' as const, r }), (e: Error) => ({ kind: 'decodeFailed' as const, e })),
      pDone.then((pr) => (pr.ok ? new Promise<never>(() => undefined) : { kind: 'prefillFailed' as const, pr: pr as PrefillFailure })),
    ]);
    const finish = (): void => { releaseP(); releaseD(); };
    if (first.kind === 'prefillFailed') {
      dAbort.abort();
      finish();
      ctx.outcome(p, first.pr.status);
      last = first.pr.err;
      if (RETRYABLE_STATUS.has(last.status)) continue;
      throw last;
    }
    if (first.kind === 'decodeFailed') {
      pAbort.abort();
      await pDone;
      finish();
      ctx.outcome(d, null);
      ctx.metrics.pdErrors.inc({ error_type: 'decode_server_error' });
      last = new RouterError(502, 'decode_server_error', `Decode server error: ${first.e.message}`);
      continue;
    }
    const dr: ForwardResponse = first.r;
    if (dr.status >= 300) {
      const text = (await readBody(dr.body).catch(() => Buffer.alloc(0))).toString('utf8');
      pAbort.abort();
      const pr = await pDone;
      finish();
      ctx.outcome(d, dr.status);
      if (pr.ok) ctx.outcome(p, pr.status);
      last = sideError('decode', dr.status, text);
      if (RETRYABLE_STATUS.has(dr.status)) continue;
      throw last;
    }
    const pr = await pDone;
    if (!pr.ok) {
      dAbort.abort();
      dr.body.destroy();
      finish();
      ctx.outcome(p, pr.status);
      last = pr.err;
      if (RETRYABLE_STATUS.has(last.status)) continue;
      throw last;
    }
    ctx.outcome(p, pr.status);
    d.processed++;
    ctx.metrics.processed.inc({ worker: d.url });
    if (stream) {
      const end = await pipeAnswer(dr, res, {
        ...(merge ? { rewrite: streamLogprobMerger(path, pr.body.toString('utf8')) } : {}),
        breakError: () => ({ type: 'Bad Gateway', code: 'decode_server_error', message: `Decode server ${d.url} failed before its answer was complete` }),
      });
      finish();
      if (!end.clientGone) ctx.outcome(d, end.complete ? dr.status : null);
      if (!end.complete && !end.clientGone) ctx.metrics.pdErrors.inc({ error_type: 'decode_server_error' });
      return;
    }
    let dBody: Buffer;
    try {
      dBody = await readBody(dr.body);
    } catch (e) {
      finish();
      ctx.outcome(d, null);
      ctx.metrics.pdErrors.inc({ error_type: 'decode_server_error' });
      throw new RouterError(502, 'decode_server_error', `Decode server error: ${(e as Error).message}`);
    }
    finish();
    ctx.outcome(d, dr.status);
    let out = dBody;
    if (merge) {
      try {
        out = Buffer.from(JSON.stringify(mergePrefillAnswer(path, JSON.parse(pr.body.toString('utf8')), JSON.parse(dBody.toString('utf8')))));
      } catch { /* left as the decode worker wrote it */ }
    }
    res.writeHead(dr.status, { ...endToEndHeaders(dr.headers), 'content-length': out.length });
    res.end(out);
    return;
  }
  ctx.metrics.retriesExhausted.inc({ route: path });
  throw last ?? new RouterError(503, 'server_selection_failed', 'No available servers');
}
