// Waiting-queue ordering and the prefill admission budget (SGLang python/sglang/srt/managers/schedule_policy.py:
// SchedulePolicy.calc_priority and PrefillAdder). Pure bookkeeping: the scheduler performs the allocations.
import type { BasePrefixCache } from '../mem_cache/index.js';
import type { Req } from './req.js';

/** --schedule-policy values built: 'fcfs' (arrival order) and 'lpm' (longest cached prefix first). */
export type SchedulePolicy = 'fcfs' | 'lpm';

/** Max new tokens counted per request when reserving decode room (SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION). */
export const CLIP_MAX_NEW_TOKENS_ESTIMATION = 4096;
/** Above this queue length lpm falls back to fcfs for the round (SGLang). */
export const LPM_MAX_QUEUE = 128;

/**
 * Orders the waiting queue in place. lpm: by longest cached prefix (radix match, no lock), stable; falls back to
 * fcfs when the cache is disabled or the queue is longer than 128.
 */
export function sortWaitingQueue(queue: Req[], policy: SchedulePolicy, cache: BasePrefixCache): void {
  if (policy === 'fcfs' || cache.isDisabled || queue.length > LPM_MAX_QUEUE) return;
  const keyed = queue.map((req, i) => {
    const fill = req.fillIds();
    return { req, i, len: cache.matchPrefix(fill.slice(0, fill.length - 1)).indices.length };
  });
  keyed.sort((a, b) => b.len - a.len || a.i - b.i);
  for (let i = 0; i < keyed.length; i++) queue[i] = keyed[i].req;
}

/** Outcome of trying to add one request. */
export type AddReqResult = 'continue' | 'no_token' | 'other';

/**
 * Token budget of one prefill round (SGLang PrefillAdder):
 * - remTotalTokens = free + evictable − Σ_running min(maxNew − generated, 4096)·newTokenRatio − Σ_admitted (extend + reserve)
 * - remInputTokens = maxPrefillTokens − mixed decode tokens; remChunkTokens = chunkedPrefillSize − mixed decode tokens.
 */
export class PrefillAdder {
  remTotalTokens: number;
  remInputTokens: number;
  remChunkTokens: number;
  private readonly pageSize: number;

  /**
   * @param availableTokens free + evictable KV tokens
   * @param running requests in the decode batch
   * @param newTokenRatio current estimate of the fraction of max_new_tokens a running request still needs
   * @param chunkedPrefillSize null = no chunking
   * @param mixedDecodeTokens decode tokens that share this forward (mixed chunk)
   */
  constructor(
    availableTokens: number,
    running: readonly Req[],
    newTokenRatio: number,
    maxPrefillTokens: number,
    chunkedPrefillSize: number | null,
    mixedDecodeTokens: number,
    pageSize: number,
  ) {
    let reserved = 0;
    for (const r of running) reserved += Math.min(r.maxNewTokens - r.outputIds.length, CLIP_MAX_NEW_TOKENS_ESTIMATION) * newTokenRatio;
    this.remTotalTokens = availableTokens - reserved;
    this.remInputTokens = maxPrefillTokens - mixedDecodeTokens;
    this.remChunkTokens = (chunkedPrefillSize ?? Infinity) - mixedDecodeTokens;
    this.pageSize = pageSize;
  }

  /** Budget state before adding anything: 'no_token' / 'other' stop the round. */
  state(): AddReqResult {
    if (this.remTotalTokens <= 0) return 'no_token';
    if (this.remInputTokens <= 0 || this.remChunkTokens <= 0) return 'other';
    return 'continue';
  }

  /**
   * How many extend tokens of the in-progress chunked request fit this round (no decode reserve, SGLang
   * add_chunked_req): min(remaining, remChunk, remTotal), page-aligned unless it finishes the prefill.
   */
  chunkedReqTokens(remaining: number): number {
    const cap = Math.floor(Math.min(this.remChunkTokens, this.remTotalTokens, this.remInputTokens));
    if (remaining <= cap) return remaining;
    return Math.floor(cap / this.pageSize) * this.pageSize;
  }

  /**
   * How many tokens of a new request's extend fit (0 = none): rejects with 'no_token' when
   * extend + reserve ≥ remTotalTokens, 'other' when the input budget is spent and something is already admitted.
   */
  newReqTokens(req: Req, extendLen: number, hasAdmitted: boolean): { tokens: number; result: AddReqResult } {
    const reserve = Math.min(req.maxNewTokens - req.outputIds.length, CLIP_MAX_NEW_TOKENS_ESTIMATION);
    if (extendLen + reserve >= this.remTotalTokens) return { tokens: 0, result: 'no_token' };
    const paged = Math.ceil(extendLen / this.pageSize) * this.pageSize;
    if (paged >= this.remInputTokens && hasAdmitted) return { tokens: 0, result: 'other' };
    if (extendLen <= this.remChunkTokens) return { tokens: extendLen, result: 'continue' };
    const trunc = Math.floor(this.remChunkTokens / this.pageSize) * this.pageSize;
    return trunc <= 0 ? { tokens: 0, result: 'other' } : { tokens: trunc, result: 'continue' };
  }

  /** Books an admitted extend (with its decode reserve when it completes the prefill). */
  take(extendTokens: number, reserve: number): void {
    this.remTotalTokens -= extendTokens + reserve;
    this.remInputTokens -= extendTokens;
    this.remChunkTokens -= extendTokens;
  }
}
