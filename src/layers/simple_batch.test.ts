import { test } from 'node:test';
import assert from 'node:assert/strict';
import { KVPool } from '../mem_cache/index.js';
import { SimpleBatchContext } from './simple_batch.js';

const pool = (): KVPool => new KVPool({ numLayers: 1, buffers: [{ name: 'k', width: 2 }] }, 32);

test('makeBatch: flat rows, positions after the cached prefix, sequential locs from 1, reqToToken rows', () => {
  const ctx = new SimpleBatchContext(pool(), 2, 8);
  const [a, b] = [ctx.addReq(), ctx.addReq()];
  const first = ctx.makeBatch([{ req: a, inputIds: [10, 11, 12] }, { req: b, inputIds: [20, 21] }]);
  assert.equal(first.forwardMode, 'extend');
  assert.deepEqual(Array.from(first.inputIds), [10, 11, 12, 20, 21]);
  assert.deepEqual(Array.from(first.positions), [0, 1, 2, 0, 1]);
  assert.deepEqual(Array.from(first.outCacheLoc), [1, 2, 3, 4, 5]);
  assert.deepEqual(Array.from(first.extendStartLoc), [0, 3]);
  assert.deepEqual(Array.from(first.logitRows), [2, 4]);
  const dec = ctx.makeBatch([{ req: b, inputIds: [22] }, { req: a, inputIds: [13] }]);
  assert.equal(dec.forwardMode, 'decode');
  assert.deepEqual(Array.from(dec.positions), [2, 3]);
  assert.deepEqual(Array.from(dec.extendPrefixLens), [2, 3]);
  assert.deepEqual(Array.from(dec.seqLens), [3, 4]);
  assert.deepEqual(Array.from(dec.reqPoolIndices), [1, 0]);
  assert.deepEqual(Array.from(ctx.reqToToken.subarray(0, 4)), [1, 2, 3, 7]);
  assert.deepEqual(Array.from(ctx.reqToToken.subarray(8, 11)), [4, 5, 6]);
  const mixed = ctx.makeBatch([{ req: a, inputIds: [14, 15] }, { req: b, inputIds: [23] }], { logits: 'all' });
  assert.equal(mixed.forwardMode, 'mixed');
  assert.deepEqual(Array.from(mixed.logitRows), [0, 1, 2]);
});

test('makeBatch: custom allocator, and invariant errors', () => {
  const ctx = new SimpleBatchContext(pool(), 1, 4, (n) => Int32Array.from({ length: n }, (_, i) => 30 - i));
  const r = ctx.addReq();
  assert.deepEqual(Array.from(ctx.makeBatch([{ req: r, inputIds: [1, 2] }]).outCacheLoc), [30, 29]);
  assert.throws(() => ctx.addReq(), /more than 1 reqs/);
  assert.throws(() => ctx.makeBatch([{ req: r, inputIds: [1, 2, 3] }]), /exceeds 4 tokens/);
  assert.throws(() => ctx.makeBatch([{ req: r, inputIds: [] }]), /empty chunk/);
});
