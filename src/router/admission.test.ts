// Admission control: the token bucket's refill and give-back arithmetic on a fake clock, and the FIFO wait queue
// (first come first served, 429 when full or without a queue, 408 when the wait times out or the client leaves).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { AdmissionControl, TokenBucket, type Admission } from './admission.js';

test('token bucket: capacity, refill at the rate, give-back capped at the capacity', () => {
  let now = 0;
  const b = new TokenBucket(2, 4, () => now);
  assert.equal(b.tryAcquire(), true);
  assert.equal(b.tryAcquire(), true);
  assert.equal(b.tryAcquire(), false);
  assert.equal(b.msUntilToken(), 250);
  now = 125; // half a token
  assert.equal(b.tryAcquire(), false);
  now = 250;
  assert.equal(b.tryAcquire(), true);
  b.giveBack(); b.giveBack(); b.giveBack();
  assert.equal(b.available(), 2);
  const noRefill = new TokenBucket(1, 0, () => now);
  assert.equal(noRefill.tryAcquire(), true);
  now = 1e9;
  assert.equal(noRefill.tryAcquire(), false);
  assert.equal(noRefill.msUntilToken(), Infinity);
});

test('admission queue: FIFO hand-over on release, 429 when full, 408 on timeout or client abort', async () => {
  const ac = new AdmissionControl(new TokenBucket(1, 0), 2, 200);
  const first = await ac.admit();
  assert.equal(first.ok, true);
  const order: string[] = [];
  const w1 = ac.admit().then((a) => { order.push('w1'); return a; });
  const w2 = ac.admit().then((a) => { order.push('w2'); return a; });
  assert.equal(ac.queued, 2);
  assert.deepEqual(await ac.admit(), { ok: false, status: 429 });
  (first as Extract<Admission, { ok: true }>).release();
  const a1 = await w1;
  assert.equal(a1.ok, true);
  assert.deepEqual(order, ['w1']);
  (a1 as Extract<Admission, { ok: true }>).release();
  const a2 = await w2;
  assert.equal(a2.ok, true);
  // the token is held by w2: the next waiter times out
  assert.deepEqual(await ac.admit(), { ok: false, status: 408 });
  const ctl = new AbortController();
  const w3 = ac.admit(ctl.signal);
  ctl.abort();
  assert.deepEqual(await w3, { ok: false, status: 408 });
  assert.equal(ac.queued, 0);
  (a2 as Extract<Admission, { ok: true }>).release();
  const noQueue = new AdmissionControl(new TokenBucket(1, 0), 0, 1000);
  assert.equal((await noQueue.admit()).ok, true);
  assert.deepEqual(await noQueue.admit(), { ok: false, status: 429 });
});

test('admission with a refill rate: a waiter is admitted when the refill makes a token, without any release', async () => {
  const ac = new AdmissionControl(new TokenBucket(1, 50), 4, 5000);
  assert.equal((await ac.admit()).ok, true);
  const w = await ac.admit(); // 1/50 s later the refill gives one
  assert.equal(w.ok, true);
  ac.close();
});
