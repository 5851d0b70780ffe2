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

test('a reserve about as large as the machine (a seed page\'s --chunked-prefill-size 16384 on 21 GiB) gives the floor fraction 0.1 and says so', () => {
  const p = planMemory({ ...base, totalMemBytes: 21 * GIB, availableAfterLoadBytes: 21 * GIB, chunkedPrefillSize: 16384, ppSize: 2 });
  // reserved = 512 + 1.5·16384 + 1024·1·2/8 = 25344 MiB > 21504 MiB: the formula's fraction is negative
  assert.equal(p.memFractionStatic, 0.1);
  assert.match(p.notice ?? '', /^The automatic mem_fraction_static reserves 25344 MiB \(chunked_prefill_size 16384\) of 21504 MiB available \(fraction -0\.179\); using mem_fraction_static=0\.1\./);
  // rest = 21 GiB − 21 GiB·0.9 = 2150.4 MiB → 2150 tokens of 1 MiB
  assert.equal(p.maxTotalNumTokens, 2150);
  assert.equal(planMemory(base).notice, null);
  // an explicit fraction is never raised
  assert.throws(() => planMemory({ ...base, memFractionStatic: -0.2 }), /--mem-fraction-static must be in \(0, 1\], got -0\.2/);
});
