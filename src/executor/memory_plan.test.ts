import { test } from 'node:test';
import assert from 'node:assert/strict';
import { planMemory } from './memory_plan.js';

const GIB = 1024 ** 3;
const base = {
  totalMemBytes: 16 * GIB,
  availableAfterLoadBytes: 15 * GIB,
  memFractionStatic: null,
  chunkedPrefillSize: null,
  maxPrefillTokens: 16384,
  kvBytesPerToken: 1024 * 1024, // 1 MiB per token
  maxTotalTokens: null,
  pageSize: 1,
  contextLength: 4096,
  maxRunningRequests: null,
};

test('auto fraction and capacity follow the SGLang formula with RAM as device memory', () => {
  const p = planMemory(base);
  // M = 16384 MiB < 35 GiB → chunk 2048; reserved = 512 + 1.5·2048 + 128 = 3712 MiB → fraction round(12672/16384, 3)
  assert.equal(p.chunkedPrefillSize, 2048);
  assert.equal(p.memFractionStatic, 0.773);
  // rest = 15 GiB − 16 GiB·0.227 = 15360 − 3719.168 MiB = 11640.832 MiB → 11640 tokens of 1 MiB
  assert.equal(p.maxTotalNumTokens, 11640);
  assert.equal(p.reqToTokenPoolSize, 2048);
  assert.equal(p.maxRunningRequests, 2048);
});

test('--max-total-tokens caps, page size rounds down, explicit fraction and max-running are used', () => {
  const p = planMemory({ ...base, memFractionStatic: 0.5, maxTotalTokens: 1003, pageSize: 16, maxRunningRequests: 8, chunkedPrefillSize: -1 });
  assert.equal(p.memFractionStatic, 0.5);
  assert.equal(p.maxTotalNumTokens, 992);
  assert.equal(p.profiledTokens, 7 * 1024);
  assert.equal(p.maxRunningRequests, 8);
  assert.equal(p.chunkedPrefillSize, null);
});

test('no room → "Not enough memory"', () => {
  assert.throws(() => planMemory({ ...base, memFractionStatic: 0.05 }), /Not enough memory\. Please try to increase --mem-fraction-static\./);
});
