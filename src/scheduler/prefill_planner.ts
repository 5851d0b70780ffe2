// Admission: building a step's prefill batch from the chunked request and the waiting queue (SGLang scheduler.py
// get_new_batch_prefill with schedule_policy.py PrefillAdder and schedule_batch.py prepare_for_extend). Takes requests
// off the waiting queue, matches and locks their cached prefixes, allocates the KV of this step's tokens.
import type { MatchResult } from '../mem_cache/index.js';
import type { Req } from './req.js';
import type { ExtendItem, ScheduleBatch } from './schedule_batch.js';
import { CLIP_MAX_NEW_TOKENS_ESTIMATION, PrefillAdder, sortWaitingQueue } from './schedule_policy.js';
import type { Scheduler } from './scheduler.js';

/**
 * Builds this step's prefill (SGLang get_new_batch_prefill + PrefillAdder), allocating its KV: the chunked request's
 * next chunk first, then waiting requests in policy order while the token budget, the running-request limit and the
 * req→token rows allow; a request that does not fit in the chunk budget becomes the new chunked request.
 * @param maxNewReqs most requests to admit (PP: pp_max_micro_batch_size minus the micro-batch's running requests)
 * @returns the batch (extends, plus the running decodes under --enable-mixed-chunk), or null when nothing is admitted
 */
export function schedulePrefill(s: Scheduler, maxNewReqs = Infinity): ScheduleBatch | null {
  // PP: a chunked request whose abort waits for its chunk in flight takes no further chunk
  const chunked = s.chunkedReq?.toFinish ? null : s.chunkedReq;
  if (!chunked && (s.waiting.length === 0 || maxNewReqs <= 0)) return null;
  const P = s.cfg.pageSize;
  // Requests under suspicion (Req.isolate) run alone: a suspect's prefill takes the whole step, and nothing mixes
  // with a suspect's decode. The chunk in progress finishes first.
  const suspect = chunked ? null : s.waiting.find((r) => r.isolate) ?? null;
  const alone = suspect !== null || chunked?.isolate === true;
  let mixedDecodes: Req[] = s.cfg.enableMixedChunk && !alone && !s.running.some((r) => r.isolate) ? [...s.running] : [];
  const budget = new PrefillAdder(
    s.mem.availableWithEvictable(),
    s.running,
    s.newTokenRatio,
    s.cfg.maxPrefillTokens,
    s.cfg.chunkedPrefillSize,
    mixedDecodes.length,
    P,
  );
  const plan: { req: Req; n: number }[] = [];
  let cached = 0;
  if (chunked) {
    const remaining = chunked.seqLen - chunked.kvCommittedLen;
    const n = budget.chunkedReqTokens(remaining);
    if (n > 0) {
      plan.push({ req: chunked, n });
      budget.take(n, n === remaining ? Math.min(chunked.maxNewTokens - chunked.outputIds.length, CLIP_MAX_NEW_TOKENS_ESTIMATION) : 0);
    }
  }
  sortWaitingQueue(s.waiting, s.cfg.schedulePolicy, s.mem.cache);
  let numAdmitted = 0;
  const candidates = suspect ? [suspect] : chunked?.isolate ? [] : s.waiting.filter((r) => !r.isolate);
  for (const req of candidates) {
    if (chunked && plan.length === 1 && plan[0].n < chunked.seqLen - chunked.kvCommittedLen) break;
    if (s.running.length + numAdmitted + (chunked ? 1 : 0) >= s.cfg.maxRunningRequests || numAdmitted >= maxNewReqs) break;
    if (s.mem.reqToTokenPool.availableSize() === 0) break;
    if (budget.state() !== 'continue') break;
    const match: MatchResult = s.mem.matchForAdmission(req);
    const extendLen = req.seqLen - match.indices.length;
    const { tokens, result } = budget.newReqTokens(req, extendLen, plan.length > 0);
    if (result !== 'continue') break;
    s.mem.admit(req, match);
    s.spec?.onAdmit(req, s.mem, match.indices.length);
    req.cachedTokens += match.indices.length;
    cached += match.indices.length;
    s.totalCachedTokens += match.indices.length;
    req.inputTokenLogprobs ??= req.wantsInputLogprobs ? [] : null;
    req.inputTopLogprobs ??= req.wantsInputLogprobs ? [] : null;
    if (req.wantsInputLogprobs && req.logprobStartLen === 0 && req.inputTokenLogprobs!.length === 0) {
      req.inputTokenLogprobs!.push([null, req.originInputIds[0]]);
      req.inputTopLogprobs!.push(null);
    }
    const reserve = tokens === extendLen ? Math.min(req.maxNewTokens - req.outputIds.length, CLIP_MAX_NEW_TOKENS_ESTIMATION) : 0;
    budget.take(tokens, reserve);
    s.waiting.splice(s.waiting.indexOf(req), 1);
    plan.push({ req, n: tokens });
    numAdmitted++;
    if (tokens < extendLen) {
      req.isChunked = true;
      s.chunkedReq = req;
      break;
    }
  }
  if (plan.length === 0) return null;

  // Memory: extends first; mixed decodes only if their pages also fit.
  const extendPages = plan.reduce((sum, p) => sum + s.mem.allocator.pagesNeeded(p.req.kvCommittedLen, p.n), 0) * P;
  const decodePages = mixedDecodes.filter((r) => r.kvCommittedLen % P === 0).length * P;
  if (mixedDecodes.length > 0 && !s.mem.ensureFree(extendPages + decodePages)) mixedDecodes = [];
  const items: ExtendItem[] = [];
  for (const { req, n } of plan) {
    const locs = s.mem.allocTokens(req, n);
    if (!locs) {
      // Budget estimate was optimistic (page rounding): put the request back untouched.
      if (req === chunked) continue; // the in-progress chunk waits for the next step
      s.mem.releaseRetracted(req);
      if (s.chunkedReq === req) s.chunkedReq = null;
      s.waiting.unshift(req);
      continue;
    }
    items.push({ req, n, locs, scorePositions: req.scorePositions(n) });
  }
  if (items.length === 0) return null;
  return { extendItems: items, decodeReqs: mixedDecodes, numCachedTokens: cached };
}
