import { test } from 'node:test';
import assert from 'node:assert/strict';
import { prefixCacheConformance } from './prefix_cache.case.js';
import { RadixCache } from './radix_cache.js';
import { TokenToKVPoolAllocator } from './allocator.js';

prefixCacheConformance('RadixCache', (a) => new RadixCache(a));

test('RadixCache: insert returns the already-present length and splits at divergence', () => {
  const alloc = new TokenToKVPoolAllocator(64, 1, null);
  const c = new RadixCache(alloc);
  assert.equal(c.insert([1, 2, 3, 4], [11, 12, 13, 14]), 0);
  assert.equal(c.insert([1, 2, 9], [21, 22, 23]), 2);
  assert.equal(c.totalSize(), 5);
  assert.deepEqual([...c.matchPrefix([1, 2, 9, 9]).indices], [11, 12, 23]);
  assert.deepEqual([...c.matchPrefix([1, 2, 3, 4, 5]).indices], [11, 12, 13, 14]);
  assert.equal(c.evictableSize(), 5);
});

test('RadixCache: page size 4 shares only whole pages', () => {
  const alloc = new TokenToKVPoolAllocator(64, 4, null);
  const c = new RadixCache(alloc);
  c.insert([1, 2, 3, 4, 5, 6, 7, 8], [4, 5, 6, 7, 8, 9, 10, 11]);
  assert.equal(c.matchPrefix([1, 2, 3, 4, 5, 6, 7, 9]).indices.length, 4);
  assert.equal(c.matchPrefix([1, 2, 3, 5]).indices.length, 0);
  assert.equal(c.matchPrefix([1, 2, 3, 4, 5, 6, 7]).indices.length, 4, 'key truncated to whole pages');
});
