import { test } from 'node:test';
import assert from 'node:assert/strict';
import { RadixCache, TokenToKVPoolAllocator } from '../mem_cache/index.js';
import { normalizeSamplingParams } from '../sampling/index.js';
import { Req } from './req.js';
import { PrefillAdder, sortWaitingQueue } from './schedule_policy.js';

function req(rid: string, ids: number[], maxNew = 10): Req {
  const params = normalizeSamplingParams({ maxNewTokens: maxNew }, 100);
  return new Req({ rid, inputIds: ids, params, rngSeed: 1, returnLogprob: false, logprobStartLen: -1, topLogprobsNum: 0, stream: false, arrivalMs: 0 }, maxNew, [0]);
}

test('PrefillAdder: decode reserve of running requests, no_token / other / chunk truncation', () => {
  const running = [req('a', [1, 2], 100)];
  running[0].outputIds.push(5, 6, 7, 8);
  // reserve = (100 - 4) · 0.5 = 48 → remTotal = 100 − 48 = 52
  const b = new PrefillAdder(100, running, 0.5, 30, 16, 0, 4);
  assert.equal(b.remTotalTokens, 52);
  assert.deepEqual(b.newReqTokens(req('x', [1], 50), 10, false), { tokens: 0, result: 'no_token' }, '10 + 50 ≥ 52');
  assert.deepEqual(b.newReqTokens(req('y', [1], 10), 12, false), { tokens: 12, result: 'continue' });
  assert.deepEqual(b.newReqTokens(req('z', [1], 10), 20, false), { tokens: 16, result: 'continue' }, 'chunked to 16');
  b.take(16, 0);
  assert.equal(b.state(), 'other', 'chunk budget spent');
  assert.equal(b.chunkedReqTokens(100), 0);
  const c = new PrefillAdder(100, [], 0.5, 8, null, 0, 4);
  assert.equal(c.chunkedReqTokens(20), 8);
  assert.equal(c.chunkedReqTokens(7), 7, 'the last piece need not be page-aligned');
  assert.deepEqual(c.newReqTokens(req('w', [1], 1), 9, true), { tokens: 0, result: 'other' }, 'input budget exceeded with something admitted');
});

test('lpm sorts by cached prefix length, stable; fcfs keeps arrival order', () => {
  const alloc = new TokenToKVPoolAllocator(64, 1, null);
  const cache = new RadixCache(alloc);
  cache.insert([1, 2, 3, 4, 5, 6], alloc.alloc(6)!);
  const q = [req('none', [9, 9, 9]), req('two', [1, 2, 7, 7]), req('five', [1, 2, 3, 4, 5, 8]), req('two-b', [1, 2, 8])];
  const f = [...q];
  sortWaitingQueue(f, 'fcfs', cache);
  assert.deepEqual(f.map((r) => r.rid), ['none', 'two', 'five', 'two-b']);
  sortWaitingQueue(q, 'lpm', cache);
  assert.deepEqual(q.map((r) => r.rid), ['five', 'two', 'two-b', 'none']);
});
