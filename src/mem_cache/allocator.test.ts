import { test } from 'node:test';
import assert from 'node:assert/strict';
import { TokenToKVPoolAllocator } from './allocator.js';
import { KVPool } from './kv_pool.js';
import { ReqToTokenPool } from './req_to_token_pool.js';

test('allocator (page 1): alloc, free, reuse, exhaustion returns null', () => {
  const a = new TokenToKVPoolAllocator(10, 1, null);
  assert.equal(a.availableSize(), 10);
  const x = a.alloc(7)!;
  assert.deepEqual([...x], [1, 2, 3, 4, 5, 6, 7], 'loc 0 is reserved');
  assert.equal(a.alloc(4), null);
  assert.equal(a.availableSize(), 3, 'failed alloc takes nothing');
  a.free(x.subarray(0, 2));
  assert.equal(a.availableSize(), 5);
  const y = a.alloc(5)!;
  assert.equal(new Set([...y]).size, 5);
  assert.ok([...y].every((l) => l >= 1 && l <= 10));
  assert.throws(() => a.free([3, 3]), /double free/);
});

test('allocator (page 4): extends a partial page first, then whole pages; locs keep position % pageSize', () => {
  const a = new TokenToKVPoolAllocator(32, 4, null);
  assert.equal(a.numPages, 8);
  const first = a.alloc(6)!; // pages 1, 2
  assert.deepEqual([...first], [4, 5, 6, 7, 8, 9]);
  assert.equal(a.availableSize(), 24);
  assert.equal(a.pagesNeeded(6, 2), 0);
  assert.equal(a.pagesNeeded(6, 3), 1);
  const more = a.allocFor(6, 9, 5)!; // 10, 11 then a new page
  assert.deepEqual([...more.subarray(0, 2)], [10, 11]);
  assert.equal(more[2] % 4, 0);
  assert.equal(a.availableSize(), 20);
  for (let p = 0; p < 11; p++) {
    const loc = p < 6 ? first[p] : more[p - 6];
    assert.equal(loc % 4, p % 4);
  }
  a.free([...first, ...more]);
  assert.equal(a.availableSize(), 32);
});

test('allocator grows KV pool storage only as pages are used', () => {
  const pool = new KVPool({ numLayers: 1, buffers: [{ name: 'k', width: 2 }] }, 1 + 1000, 1);
  const a = new TokenToKVPoolAllocator(1000, 1, pool);
  assert.equal(pool.committedLocs, 1);
  const locs = a.alloc(5)!;
  assert.ok(pool.committedLocs >= 6 && pool.committedLocs < 1000);
  a.free(locs);
  a.alloc(5);
  assert.equal(a.usedHighWaterPages, 5, 'freed pages reused before new ones');
});

test('free groups release pages only at the end', () => {
  const a = new TokenToKVPoolAllocator(8, 1, null);
  const x = a.alloc(8)!;
  a.freeGroupBegin();
  a.free(x);
  assert.equal(a.availableSize(), 0);
  a.freeGroupEnd();
  assert.equal(a.availableSize(), 8);
});

test('ReqToTokenPool: rows, writes, reads, exhaustion', () => {
  const p = new ReqToTokenPool(2, 8);
  const r0 = p.alloc();
  const r1 = p.alloc();
  assert.deepEqual([r0, r1], [0, 1]);
  assert.equal(p.availableSize(), 0);
  assert.throws(() => p.alloc(), /no free request slot/);
  p.write(r1, 2, [7, 8, 9]);
  assert.deepEqual([...p.read(r1, 2, 5)], [7, 8, 9]);
  assert.equal(p.reqToToken[1 * 8 + 3], 8);
  assert.throws(() => p.write(r0, 6, [1, 2, 3]), /exceeds/);
  p.free(r0);
  assert.equal(p.alloc(), 0);
});
