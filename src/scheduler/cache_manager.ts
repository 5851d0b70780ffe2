// CacheManager: the only glue between a Req and the memory pools (ReqToTokenPool, allocator, prefix cache)
// (layout-and-style.md §2.4; SGLang schedule_batch.py prepare_for_extend / cache_finished_req / retract parts).
import { assert } from '../common/index.js';
import type { BasePrefixCache, MatchResult, ReqToTokenPool, TokenToKVPoolAllocator } from '../mem_cache/index.js';
import type { Req } from './req.js';

/** Request-level KV operations over the three memory structures. */
export class CacheManager {
  readonly reqToTokenPool: ReqToTokenPool;
  readonly allocator: TokenToKVPoolAllocator;
  readonly cache: BasePrefixCache;

  constructor(reqToTokenPool: ReqToTokenPool, allocator: TokenToKVPoolAllocator, cache: BasePrefixCache) {
    this.reqToTokenPool = reqToTokenPool;
    this.allocator = allocator;
    this.cache = cache;
  }

  /** Free tokens plus evictable cached tokens. */
  availableWithEvictable(): number {
    return this.allocator.availableSize() + this.cache.evictableSize();
  }

  /**
   * Prefix match for a (re-)admission: at most fillLen − 1 tokens (one token is always recomputed so logits exist),
   * and no further than the first prompt position whose logprob is wanted (SGLang init_next_round_input).
   */
  matchForAdmission(req: Req): MatchResult {
    const fill = req.fillIds();
    let maxLen = fill.length - 1;
    if (req.wantsInputLogprobs) maxLen = Math.min(maxLen, Math.max(0, req.logprobStartLen - 1));
    return this.cache.matchPrefix(maxLen === fill.length ? fill : fill.slice(0, Math.max(0, maxLen)));
  }

  /** Evicts from the prefix cache until `tokens` are free (if possible). @returns true if they are */
  ensureFree(tokens: number): boolean {
    const avail = this.allocator.availableSize();
    if (avail >= tokens) return true;
    this.cache.evict(tokens - avail);
    return this.allocator.availableSize() >= tokens;
  }

  /**
   * Starts a request on a matched prefix: locks the match, takes a row, writes the prefix locs.
   * @throws InternalError if the request already holds a row
   */
  admit(req: Req, match: MatchResult): void {
    assert(req.reqPoolIdx === -1, () => `admit: ${req.rid} already has a row`);
    req.reqPoolIdx = this.reqToTokenPool.alloc();
    this.cache.incLockRef(match.lastNode);
    req.lastNode = match.lastNode;
    req.prefixLen = match.indices.length;
    req.cacheProtectedLen = match.indices.length;
    req.kvCommittedLen = match.indices.length;
    req.kvAllocatedLen = match.indices.length;
    this.reqToTokenPool.write(req.reqPoolIdx, 0, match.indices);
  }

  /**
   * Allocates KV for `n` more tokens of `req` after its committed ones (evicting if needed) and writes them into its row.
   * @returns [n] i32 locs, or null when memory is short even after eviction (nothing changed)
   */
  allocTokens(req: Req, n: number): Int32Array | null {
    const start = req.kvCommittedLen;
    const needed = this.allocator.pagesNeeded(start, n) * this.allocator.pageSize;
    if (!this.ensureFree(needed)) return null;
    const lastLoc = start > 0 ? this.reqToTokenPool.locAt(req.reqPoolIdx, start - 1) : 0;
    const locs = this.allocator.allocFor(start, lastLoc, n);
    if (!locs) return null;
    this.reqToTokenPool.write(req.reqPoolIdx, start, locs);
    req.kvAllocatedLen = start + n;
    return locs;
  }

  /** After a non-final prefill chunk: hands the computed prefix to the cache (locked) and makes the row canonical. */
  cacheUnfinished(req: Req): void {
    const n = req.kvCommittedLen;
    const locs = this.reqToTokenPool.read(req.reqPoolIdx, 0, n);
    const r = this.cache.cacheUnfinished(req.fillIds().slice(0, n), locs, req.cacheProtectedLen, req.lastNode!);
    this.reqToTokenPool.write(req.reqPoolIdx, 0, r.indices);
    req.lastNode = r.lastNode;
    if (r.protectedLen > 0) req.cacheProtectedLen = r.protectedLen;
  }

  /** A finished request: its KV goes to the prefix cache (or is freed), its row is released. */
  releaseFinished(req: Req): void {
    if (req.reqPoolIdx === -1) return;
    const n = req.kvCommittedLen;
    const locs = this.reqToTokenPool.read(req.reqPoolIdx, 0, n);
    this.cache.cacheFinished(req.fillIds().slice(0, n), locs, req.cacheProtectedLen, req.lastNode!);
    this.reqToTokenPool.free(req.reqPoolIdx);
    this.resetKvState(req);
  }

  /**
   * A retracted request, or one whose step failed: its own KV is freed without caching (locs allocated for a step
   * that never committed included), the lock dropped, the row released.
   */
  releaseRetracted(req: Req): void {
    if (req.reqPoolIdx === -1) return;
    const end = Math.max(req.kvCommittedLen, req.kvAllocatedLen);
    const own = this.reqToTokenPool.read(req.reqPoolIdx, req.cacheProtectedLen, end);
    this.allocator.free(own);
    this.cache.decLockRef(req.lastNode!);
    this.reqToTokenPool.free(req.reqPoolIdx);
    this.resetKvState(req);
  }

  private resetKvState(req: Req): void {
    req.reqPoolIdx = -1;
    req.kvCommittedLen = 0;
    req.kvAllocatedLen = 0;
    req.cacheProtectedLen = 0;
    req.lastNode = null;
    req.prefixLen = 0;
    req.isChunked = false;
  }
}
