// Conformance suite for BasePrefixCache implementations (layout-and-style.md §3.9): every implementation runs it;
// sharing-only cases are skipped with a reason for caches that never share (ChunkCache).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { TokenToKVPoolAllocator } from './allocator.js';
import type { BasePrefixCache } from './base_prefix_cache.js';

/** Builds a cache over a fresh allocator. */
export type PrefixCacheFactory = (allocator: TokenToKVPoolAllocator) => BasePrefixCache;

function seq(n: number, start = 1): number[] {
  return Array.from({ length: n }, (_, i) => start + i);
}

/** Simulates one request: match, allocate the rest, cache it finished. Returns the locs it used. */
function runReq(cache: BasePrefixCache, alloc: TokenToKVPoolAllocator, tokens: number[]): { locs: Int32Array; prefixLen: number } {
  const m = cache.matchPrefix(tokens);
  cache.incLockRef(m.lastNode);
  const prefixLen = m.indices.length;
  const lastLoc = prefixLen > 0 ? m.indices[prefixLen - 1] : 0;
  const rest = alloc.allocFor(prefixLen, lastLoc, tokens.length - prefixLen);
  assert.ok(rest, 'allocation failed');
  const locs = new Int32Array(tokens.length);
  locs.set(m.indices, 0);
  locs.set(rest, prefixLen);
  cache.cacheFinished(tokens, locs, prefixLen, m.lastNode);
  return { locs, prefixLen };
}

/**
 * Registers the conformance tests for one implementation.
 * @param name implementation name (test titles)
 * @param make factory
 */
export function prefixCacheConformance(name: string, make: PrefixCacheFactory): void {
  for (const pageSize of [1, 4]) {
    const title = (t: string): string => `${name} (page ${pageSize}): ${t}`;
    const fresh = (size = 256): { alloc: TokenToKVPoolAllocator; cache: BasePrefixCache } => {
      const alloc = new TokenToKVPoolAllocator(size, pageSize, null);
      return { alloc, cache: make(alloc) };
    };

    test(title('empty key matches nothing at root'), () => {
      const { cache } = fresh();
      const m = cache.matchPrefix([]);
      assert.equal(m.indices.length, 0);
      assert.equal(m.lastNode, cache.root);
    });

    test(title('finished requests + reset return every loc to the allocator'), () => {
      const { alloc, cache } = fresh();
      const total = alloc.availableSize();
      runReq(cache, alloc, seq(13));
      runReq(cache, alloc, [...seq(9), 100, 101, 102]);
      runReq(cache, alloc, seq(3, 50));
      assert.equal(cache.protectedSize(), 0);
      cache.reset();
      assert.equal(alloc.availableSize(), total);
      assert.equal(cache.evictableSize(), 0);
    });

    test(title('matches are page-aligned prefixes of the key with locs of the cached request'), { skip: make(new TokenToKVPoolAllocator(8, pageSize, null)).isDisabled ? 'never shares' : false }, () => {
      const { alloc, cache } = fresh();
      const a = seq(11);
      const { locs } = runReq(cache, alloc, a);
      const m = cache.matchPrefix([...seq(10), 999]);
      assert.equal(m.indices.length, Math.floor(10 / pageSize) * pageSize);
      assert.deepEqual([...m.indices], [...locs.subarray(0, m.indices.length)]);
      // Divergence inside a node splits it; both halves still match.
      const m2 = cache.matchPrefix(seq(5));
      assert.equal(m2.indices.length, Math.floor(5 / pageSize) * pageSize);
      const m3 = cache.matchPrefix(a);
      assert.equal(m3.indices.length, Math.floor(11 / pageSize) * pageSize);
    });

    test(title('a second request reuses the shared prefix and frees nothing twice'), { skip: make(new TokenToKVPoolAllocator(8, pageSize, null)).isDisabled ? 'never shares' : false }, () => {
      const { alloc, cache } = fresh();
      const total = alloc.availableSize();
      runReq(cache, alloc, seq(12));
      const before = alloc.availableSize();
      const r = runReq(cache, alloc, [...seq(8), 70, 71, 72, 73]);
      assert.equal(r.prefixLen, 8);
      // Only the 4 new tokens (one page at page 4, four at page 1) were taken.
      assert.equal(before - alloc.availableSize(), 4);
      assert.equal(cache.evictableSize(), 16);
      cache.reset();
      assert.equal(alloc.availableSize(), total);
    });

    test(title('locked nodes survive eviction; unlocked leaves go LRU first'), { skip: make(new TokenToKVPoolAllocator(8, pageSize, null)).isDisabled ? 'never shares' : false }, () => {
      const { alloc, cache } = fresh();
      runReq(cache, alloc, seq(8, 1)); // A (oldest)
      runReq(cache, alloc, seq(8, 100)); // B
      runReq(cache, alloc, seq(8, 200)); // C
      cache.matchPrefix(seq(8, 1)); // touch A: B is now the oldest
      const mc = cache.matchPrefix(seq(8, 200));
      assert.equal(cache.incLockRef(mc.lastNode), -8);
      assert.equal(cache.protectedSize(), 8);
      const freed = cache.evict(1);
      assert.equal(freed, 8);
      assert.equal(cache.matchPrefix(seq(8, 100)).indices.length, 0, 'B evicted first (LRU)');
      assert.equal(cache.matchPrefix(seq(8, 1)).indices.length, 8, 'A kept');
      assert.equal(cache.evict(1000), 8, 'only A is evictable now');
      assert.equal(cache.matchPrefix(seq(8, 200)).indices.length, 8, 'locked C kept');
      assert.equal(cache.decLockRef(mc.lastNode), 8);
      assert.equal(cache.evict(1000), 8);
      assert.equal(alloc.availableSize(), alloc.size);
    });

    test(title('cacheUnfinished keeps the request locked and its row canonical'), () => {
      const { alloc, cache } = fresh();
      const tokens = seq(10);
      const locs = alloc.alloc(10)!;
      const r = cache.cacheUnfinished(tokens, locs, 0, cache.root);
      if (cache.isDisabled) {
        assert.equal(r.protectedLen, 0);
      } else {
        assert.equal(r.protectedLen, Math.floor(10 / pageSize) * pageSize);
        assert.deepEqual([...r.indices], [...locs.subarray(0, r.protectedLen)]);
        assert.equal(cache.protectedSize(), r.protectedLen);
        assert.equal(cache.evict(1000), 0, 'locked: nothing evictable');
      }
      // Finish it: everything back after reset.
      cache.cacheFinished(tokens, locs, r.protectedLen, r.lastNode);
      assert.equal(cache.protectedSize(), 0);
      cache.reset();
      assert.equal(alloc.availableSize(), alloc.size);
    });

    test(title('unbalanced unlock is an error'), { skip: make(new TokenToKVPoolAllocator(8, pageSize, null)).isDisabled ? 'no locks' : false }, () => {
      const { alloc, cache } = fresh();
      runReq(cache, alloc, seq(8));
      const m = cache.matchPrefix(seq(8));
      assert.throws(() => cache.decLockRef(m.lastNode), /unbalanced/);
    });
  }
}
