// Decode memory check and retraction (SGLang schedule_batch.py check_decode_mem / retract_decode, scheduler.py
// update_running_batch): before a decode step every running request needs room for its next token(s); the prefix
// cache is evicted first, then the requests with the fewest generated tokens go back to the waiting queue.
import { assert } from '../common/index.js';
import type { Req } from './req.js';
import type { Scheduler } from './scheduler.js';

/** SGLANG_RETRACT_DECODE_STEPS: decode steps a retraction assumes every survivor still takes. */
const RETRACT_DECODE_STEPS = 20;

/**
 * Makes room for one more token per running request (SGLang update_running_batch / check_decode_mem /
 * retract_decode): evict the prefix cache, then retract the requests with the fewest generated tokens (ties: the
 * longest prompt) back to the waiting queue, keeping at least one. Updates new_token_ratio.
 * @param reqs the requests that decode next (default every running one; PP: those not in flight)
 * @param canWait PP: other micro-batches are in flight, so running out of memory may wait for them
 * @returns number of retracted requests, or −1 when the step must wait (canWait only)
 * @throws InternalError when one request alone does not fit the pool
 */
export function prepareDecode(s: Scheduler, reqs: readonly Req[] = s.running, canWait = false): number {
  const P = s.cfg.pageSize;
  // one token per request (a page when it crosses into one); speculative: its verify slots
  const D = s.spec?.tokensPerStep ?? 1;
  const pagesFor = (rs: readonly Req[]): number => rs.reduce((sum, r) => sum + s.mem.allocator.pagesNeeded(r.kvCommittedLen, D), 0) * P;
  let numRetracted = 0;
  if (!s.mem.ensureFree(pagesFor(reqs))) {
    const order = [...reqs].sort(
      (a, b) => b.outputIds.length - a.outputIds.length || a.originInputIds.length - b.originInputIds.length,
    );
    while (!s.mem.ensureFree(pagesFor(order))) {
      if (order.length > 1) {
        const victim = order.pop()!;
        retractReq(s, victim);
        numRetracted++;
      } else if (s.chunkedReq && s.chunkedReq.inFlight === 0) {
        retractReq(s, s.chunkedReq);
        numRetracted++;
      } else if (canWait) {
        return -1; // PP: the micro-batches in flight come back first (finishing requests free their KV)
      } else {
        assert(false, 'decode: out of KV cache with one request left (pool smaller than one request)');
      }
    }
    // retractReq removed the victims from s.running; survivors keep their order.
    let gen = 0;
    let maxNew = 0;
    for (const r of s.running) {
      gen += r.outputIds.length;
      maxNew += r.maxNewTokens;
    }
    s.newTokenRatio = Math.min(1, (gen + RETRACT_DECODE_STEPS * s.running.length) / (maxNew + 1));
  } else {
    s.newTokenRatio = Math.max(s.newTokenRatio - s.newTokenRatioDecay, s.minNewTokenRatio);
  }
  return numRetracted;
}

/** Sends a running (or chunked) request back to the waiting queue, its KV freed uncached; prompt logprobs not yet sent are recomputed. */
export function retractReq(s: Scheduler, req: Req): void {
  s.mem.releaseRetracted(req);
  req.numRetractions++;
  s.totalRetracted++;
  if (s.chunkedReq === req) s.chunkedReq = null;
  const ri = s.running.indexOf(req);
  if (ri >= 0) s.running.splice(ri, 1);
  if (!req.inputLogprobsSent) {
    req.inputTokenLogprobs = null;
    req.inputTopLogprobs = null;
  }
  s.waiting.push(req);
}
