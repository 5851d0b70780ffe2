// TokenToKVPoolAllocator: hands out KV locs page by page (SGLang mem_cache/allocator.py TokenToKVPoolAllocator /
// PagedTokenToKVPoolAllocator). Knows only locs and pages; never a Req or a token id.
//
// Loc space: page p covers locs [p·pageSize, (p+1)·pageSize). Page 0 is reserved (loc 0 = padding slot), so usable
// pages are 1..numPages and the KV pool holds (numPages + 1)·pageSize locs. Pages are taken from a free stack first,
// then from the high-water mark upward, so KVPool storage grows only as far as pages are really used.
import { assert } from '../common/index.js';
import type { KVPool } from './kv_pool.js';

/** Paged allocator of KV locs over a KVPool. With pageSize 1 it is SGLang's token-granular allocator. */
export class TokenToKVPoolAllocator {
  readonly pageSize: number;
  /** Usable pages (excluding the reserved page 0). */
  readonly numPages: number;
  private readonly kvPool: KVPool | null;
  /** Freed pages below the high-water mark, ready for reuse. */
  private readonly freeStack: number[] = [];
  /** Next never-used page. */
  private highWater = 1;
  /** [numPages + 1] 1 = page in use. */
  private readonly pageUsed: Uint8Array;
  /** Pages freed while `freeGroup` is open; released on `freeGroupEnd`. */
  private group: number[] | null = null;

  /**
   * @param size token capacity (a multiple of pageSize; rounded down otherwise)
   * @param pageSize tokens per page (--page-size)
   * @param kvPool storage grown on demand (null for tests without storage)
   * @throws InternalError if sizes are not positive or the pool is too small
   */
  constructor(size: number, pageSize: number, kvPool: KVPool | null) {
    assert(pageSize >= 1 && size >= pageSize, () => `allocator: size ${size} must be ≥ page size ${pageSize} ≥ 1`);
    this.pageSize = pageSize;
    this.numPages = Math.floor(size / pageSize);
    this.kvPool = kvPool;
    this.pageUsed = new Uint8Array(this.numPages + 1);
    if (kvPool) assert(kvPool.maxLocs >= (this.numPages + 1) * pageSize, 'allocator: KV pool smaller than the allocator');
  }

  /** Token capacity (numPages · pageSize). */
  get size(): number {
    return this.numPages * this.pageSize;
  }

  /** Free tokens (whole free pages · pageSize). */
  availableSize(): number {
    return (this.freeStack.length + (this.numPages + 1 - this.highWater)) * this.pageSize;
  }

  /** Pages ever touched (storage committed for them); for tests and start-up logs. */
  get usedHighWaterPages(): number {
    return this.highWater - 1;
  }

  private takePage(): number {
    let p = this.freeStack.pop();
    if (p === undefined) {
      p = this.highWater++;
      this.kvPool?.ensureLocs((p + 1) * this.pageSize);
    }
    this.pageUsed[p] = 1;
    return p;
  }

  /**
   * Allocates `n` locs for a request whose last cached token sits at `lastLoc` with `prefixLen` tokens cached: first
   * the rest of that partial page, then whole new pages (SGLang alloc_extend / alloc_decode semantics, one req).
   * @param prefixLen tokens the request already has KV for
   * @param lastLoc loc of its token prefixLen−1 (ignored when prefixLen % pageSize == 0)
   * @param n tokens to allocate
   * @returns [n] i32 locs, or null (nothing allocated) when not enough pages are free
   */
  allocFor(prefixLen: number, lastLoc: number, n: number): Int32Array | null {
    const P = this.pageSize;
    const inPage = prefixLen % P;
    const fromPartial = inPage === 0 ? 0 : Math.min(n, P - inPage);
    const newPages = Math.ceil((n - fromPartial) / P);
    if (newPages * P > this.availableSize()) return null;
    const out = new Int32Array(n);
    let i = 0;
    for (; i < fromPartial; i++) out[i] = lastLoc + 1 + i;
    while (i < n) {
      const base = this.takePage() * P;
      for (let j = 0; j < P && i < n; j++) out[i++] = base + j;
    }
    return out;
  }

  /**
   * Allocates `n` locs on fresh pages (prefixLen 0).
   * @returns [n] i32 locs or null when not enough pages are free
   */
  alloc(n: number): Int32Array | null {
    return this.allocFor(0, 0, n);
  }

  /** Pages needed to extend a request from prefixLen by n tokens (0 if it fits in its partial page). */
  pagesNeeded(prefixLen: number, n: number): number {
    const inPage = prefixLen % this.pageSize;
    const fromPartial = inPage === 0 ? 0 : Math.min(n, this.pageSize - inPage);
    return Math.ceil((n - fromPartial) / this.pageSize);
  }

  /**
   * Frees the pages touched by `locs` (any loc of a page frees the whole page, as SGLang's paged free).
   * Callers free a page only when no live token remains on it.
   * @param locs [n] i32 KV locs (0 = padding, ignored)
   * @throws InternalError for a loc outside the pool
   */
  free(locs: ArrayLike<number>): void {
    const P = this.pageSize;
    const freedNow = P > 1 ? new Set<number>() : null;
    for (let i = 0; i < locs.length; i++) {
      const loc = locs[i];
      if (loc === 0) continue;
      const page = Math.floor(loc / P);
      assert(page >= 1 && page < this.highWater, () => `allocator: free of loc ${loc} outside allocated pages`);
      if (freedNow?.has(page)) continue;
      assert(this.pageUsed[page] === 1, () => `allocator: double free of page ${page} (loc ${loc})`);
      this.pageUsed[page] = 0;
      freedNow?.add(page);
      if (this.group) this.group.push(page);
      else this.freeStack.push(page);
    }
  }

  /** Starts batching frees (SGLang free_group_begin); pages return to the free list at `freeGroupEnd`. */
  freeGroupBegin(): void {
    this.group = [];
  }

  /** Releases the pages freed since `freeGroupBegin`. */
  freeGroupEnd(): void {
    const g = this.group ?? [];
    this.group = null;
    for (const p of g) this.freeStack.push(p);
  }

  /** Frees everything (after a cache flush with no running requests). Storage stays committed. */
  clear(): void {
    this.freeStack.length = 0;
    this.group = null;
    this.pageUsed.fill(0);
    for (let p = this.highWater - 1; p >= 1; p--) this.freeStack.push(p);
  }
}
