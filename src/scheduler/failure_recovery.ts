// Recovery from a step that threw (a model or scheduler error). SGLang would crash the scheduler process; here one bad
// request must not take the others down, nor hang: the step's requests are failed or re-run alone, never lost.
import { TsglangError } from '../common/index.js';
import type { FinishReasonData, ReqTokenOutput } from './io.js';
import type { Req } from './req.js';
import type { Scheduler } from './scheduler.js';
import type { StepResult } from './scheduler_types.js';

/** A request that was part of this many failed steps is failed even when the failure could not be pinned on it. */
const MAX_FAILED_STEPS = 2;

/**
 * Recovery after a step threw. The KV allocated for the step is released with the requests it belongs to:
 * - the failure happened before a batch was chosen (scheduling itself failed): every request fails;
 * - the batch had one request, or a request already was in MAX_FAILED_STEPS failed batches: it fails;
 * - otherwise the failure cannot be pinned on one request: each is put back in the waiting queue (its generated
 *   tokens kept, as a retraction) and marked Req.isolate, so it is re-run alone and a failure that recurs is then
 *   its own. Requests outside the batch are untouched.
 * A failed request finishes with an abort: status 400 and the error's message when the error is an invalid
 * request (e.g. an id the model cannot embed), else 500.
 * @param batch the requests of the failed step (null when it failed before choosing them)
 */
export function recoverFromFailedStep(s: Scheduler, batch: readonly Req[] | null, error: Error, outputs: ReqTokenOutput[]): StepResult {
  const invalid = error instanceof TsglangError && error.kind === 'invalid_request';
  const reason: FinishReasonData = invalid
    ? { type: 'abort', message: error.message, statusCode: 400 }
    : { type: 'abort', message: `The engine failed to run this request: ${error.message}`, statusCode: 500 };
  const failedRids: string[] = [];
  const retriedRids: string[] = [];
  const involved = batch ? batch.filter((r) => s.live.get(r.rid) === r) : [...s.live.values()];
  for (const req of involved) {
    req.numFailedSteps++;
    const fails = batch === null || involved.length === 1 || req.numFailedSteps >= MAX_FAILED_STEPS;
    if (req.isFinished || fails) {
      if (req.grammar) s.grammar?.close(req.rid);
    }
    if (req.isFinished) {
      // It reached its end (stop / length) before the failure: deliver that, without caching its KV.
      dropReq(s, req);
      outputs.push(req.takeOutput());
    } else if (fails) {
      dropReq(s, req);
      req.finishReason = reason;
      outputs.push(req.takeOutput());
      failedRids.push(req.rid);
    } else {
      dropReq(s, req);
      req.isolate = true;
      if (!req.inputLogprobsSent) {
        // recomputed on re-admission, as after a retraction
        req.inputTokenLogprobs = null;
        req.inputTopLogprobs = null;
      }
      s.waiting.push(req);
      s.live.set(req.rid, req);
      retriedRids.push(req.rid);
    }
  }
  return { stats: null, outputs, failure: { error, failedRids, retriedRids } };
}

/** Takes `req` out of every queue and frees its KV without caching it (also what a failed step allocated). */
export function dropReq(s: Scheduler, req: Req): void {
  s.unqueue(req);
  s.live.delete(req.rid);
  try {
    s.mem.releaseRetracted(req);
  } catch {
    // The failure left this request's KV bookkeeping inconsistent: its pages stay allocated (leaked) rather than
    // risk freeing pages another request uses; the request itself is still finished or retried.
    req.reqPoolIdx = -1;
    req.kvCommittedLen = 0;
    req.kvAllocatedLen = 0;
    req.cacheProtectedLen = 0;
    req.lastNode = null;
  }
  req.isChunked = false;
}
