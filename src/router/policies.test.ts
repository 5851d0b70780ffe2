// Router policies on Worker objects (no HTTP): the cache-aware prefix tree, round_robin, power_of_two with and
// without monitored loads, cache_aware's prefix stickiness and imbalance fallback, manual's sticky keys with failover,
// assignment modes and idle eviction, and bucket's length ranges (the cases of SGLang's bucket.rs tests).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BucketPolicy } from './bucket_policy.js';
import { ManualPolicy } from './manual_policy.js';
import { CacheAwarePolicy, PowerOfTwoPolicy, RoundRobinPolicy } from './policies.js';
import { ApproxRadixTree } from './radix_tree.js';
import { CircuitBreaker, Worker } from './worker.js';
import { backoffMs } from './http_forward.js';

const CB = { failureThreshold: 10, successThreshold: 3, timeoutMs: 60_000, windowMs: 120_000, disabled: false };
const workers = (...urls: string[]): Worker[] => urls.map((u) => new Worker(u, 'regular', null, CB));
const t = (text: string, routingKey: string | null = null) => ({ text, routingKey });

test('radix tree: prefix match, tenant sizes, LRU eviction by size', () => {
  let clock = 0;
  const tree = new ApproxRadixTree(() => ++clock);
  tree.insert('hello world', 'a');
  tree.insert('hello there', 'b');
  assert.deepEqual(tree.prefixMatch('hello world!'), { matchedChars: 11, tenant: 'a' });
  assert.equal(tree.prefixMatch('hello th').tenant, 'b');
  assert.equal(tree.prefixMatch('hello').matchedChars, 5);
  assert.equal(tree.prefixMatch('xyz').tenant, null);
  assert.equal(tree.tenantSizes().get('a'), 11);
  assert.equal(tree.tenantSizes().get('b'), 11);
  tree.insert('goodbye', 'a');
  tree.evictBySize(11); // a owns 18: its oldest leaf (' world' branch) goes first, then the shared 'hello ' (b keeps its 11)
  assert.equal(tree.tenantSizes().get('a'), 7);
  assert.equal(tree.prefixMatch('hello world', new Set(['a'])).tenant, null);
  assert.equal(tree.prefixMatch('goodbye').tenant, 'a');
  assert.equal(tree.prefixMatch('hello there').matchedChars, 11);
});

test('round_robin cycles; power_of_two compares monitored token loads only when both sides have one', () => {
  const ws = workers('http://a', 'http://b', 'http://c');
  const rr = new RoundRobinPolicy();
  assert.deepEqual([0, 1, 2, 3].map(() => rr.select(ws)!.worker.url), ['http://a', 'http://b', 'http://c', 'http://a']);
  ws[0].load = 5;
  const p2 = new PowerOfTwoPolicy(() => 0); // draws a then b
  assert.equal(p2.select(ws)!.worker.url, 'http://b');
  p2.updateLoads(new Map([['http://a', 10], ['http://b', 50_000]]));
  assert.equal(p2.select(ws)!.worker.url, 'http://a', 'token loads win over request counts');
  p2.updateLoads(new Map([['http://a', 10]]));
  assert.equal(p2.select(ws)!.worker.url, 'http://b', 'b has no token load: both fall back to request counts');
  ws[0].load = 0;
  p2.updateLoads(new Map());
  assert.equal(p2.select(ws)!.worker.url, 'http://a', 'ties go to the first drawn');
  assert.equal(p2.select(ws.slice(2))!.worker.url, 'http://c');
  assert.equal(p2.select([]), null);
});

test('cache_aware: sticks to the prefix owner, new text to the smallest tree, least loaded when imbalanced', () => {
  const ws = workers('http://a', 'http://b', 'http://c');
  const ca = new CacheAwarePolicy({ cacheThreshold: 0.3, balanceAbsThreshold: 64, balanceRelThreshold: 1.5, evictionIntervalSecs: 0, maxTreeSize: 1 << 20 });
  const first = ca.select(ws, t('You are a helpful assistant. Question one'))!;
  const again = ca.select(ws, t('You are a helpful assistant. Question two'))!;
  assert.equal(again.worker.url, first.worker.url);
  assert.equal(again.cacheHit, true);
  const other = ca.select(ws, t('Completely different text'))!;
  assert.notEqual(other.worker.url, first.worker.url); // smallest tenant
  assert.equal(other.cacheHit, false);
  first.worker.load = 200;
  const bal = ca.select(ws, t('You are a helpful assistant. Question three'))!;
  assert.equal(bal.balanced, true);
  assert.notEqual(bal.worker.url, first.worker.url);
  ca.removeWorker(first.worker.url);
  assert.equal(ca.tree.prefixMatch('You are a helpful assistant. Question', new Set([first.worker.url])).tenant, null, 'a removed worker leaves the tree');
  ca.close();
});

test('manual: a routing key keeps its worker, fails over to a new one (two candidates kept), keyless is random; idle keys are evicted', () => {
  let now = 0;
  const ws = workers('http://a', 'http://b', 'http://c');
  const seq = [0.0, 0.5, 0.9, 0.4];
  let i = 0;
  const m = new ManualPolicy({ evictionIntervalSecs: 0, maxIdleSecs: 10, assignmentMode: 'random' }, () => seq[i++ % seq.length], () => now);
  const k1 = m.select(ws, t('x', 'user-1'))!.worker.url;
  assert.equal(m.lastBranch, 'vacant');
  for (let j = 0; j < 5; j++) assert.equal(m.select(ws, t('other text', 'user-1'))!.worker.url, k1);
  assert.equal(m.lastBranch, 'occupied_hit');
  // its worker goes away: a new one, then back to the first once it is back (it is still a candidate)
  const without = ws.filter((w) => w.url !== k1);
  const k2 = m.select(without, t('x', 'user-1'))!.worker.url;
  assert.equal(m.lastBranch, 'occupied_miss');
  assert.notEqual(k2, k1);
  assert.equal(m.select(ws, t('x', 'user-1'))!.worker.url, k1);
  m.select(ws, t('x', null));
  assert.equal(m.lastBranch, 'no_routing_id');
  now = 5_000;
  m.select(ws, t('x', 'user-2'));
  now = 12_000;
  assert.equal(m.evictIdle(), 1, 'user-1 idle for 12 s > 10 s; user-2 for 7 s stays');
  assert.equal(m.size, 1);
  m.close();
});

test('manual assignment modes: min_load takes the fewest requests in flight, min_group the fewest routing keys in flight', () => {
  const ws = workers('http://a', 'http://b');
  const minLoad = new ManualPolicy({ evictionIntervalSecs: 0, maxIdleSecs: 0, assignmentMode: 'min_load' }, () => 0);
  ws[0].load = 3;
  assert.equal(minLoad.select(ws, t('', 'k1'))!.worker.url, 'http://b');
  ws[0].load = 0;
  const minGroup = new ManualPolicy({ evictionIntervalSecs: 0, maxIdleSecs: 0, assignmentMode: 'min_group' }, () => 0);
  const rel = [ws[0].acquire('s1'), ws[0].acquire('s1'), ws[1].acquire('s2'), ws[1].acquire('s3')];
  assert.equal(ws[0].routingKeys.size, 1);
  assert.equal(ws[0].load, 2);
  assert.equal(minGroup.select(ws, t('', 'new'))!.worker.url, 'http://a', 'a has 1 key in flight (2 requests), b has 2 keys');
  for (const r of rel) { r(); r(); } // a release runs once
  assert.equal(ws[0].load, 0);
  assert.equal(ws[0].routingKeys.size + ws[1].routingKeys.size, 0);
});

test('bucket: initial ranges split 4096 chars; recut from the window; imbalance sends to the least loaded (bucket.rs cases)', () => {
  let now = 0;
  const urls = ['http://w1', 'http://w2', 'http://w3'];
  const ws = workers(...urls);
  const a = new BucketPolicy({ balanceAbsThreshold: 300, balanceRelThreshold: 1.0001, adjustIntervalSecs: 0 }, () => now, () => 0);
  a.setWorkers(urls);
  assert.deepEqual(a.boundaries.map((b) => b.range[1]).slice(0, 2), [1364, 2729]);
  for (const n of [5, 10, 15, 20, 24, 26]) assert.equal(a.select(ws, t('a'.repeat(n)))!.worker.url, 'http://w1');
  a.adjustBoundaries();
  assert.deepEqual(a.boundaries.map((b) => b.range), [[0, 20], [21, 26], [27, Number.MAX_SAFE_INTEGER]]);
  assert.equal(a.select(ws, t('a'.repeat(22)))!.worker.url, 'http://w2');

  const b = new BucketPolicy({ balanceAbsThreshold: 32, balanceRelThreshold: 1.0001, adjustIntervalSecs: 10 }, () => now, () => 0);
  b.setWorkers(urls);
  assert.equal(b.select(ws, t('a'.repeat(33)))!.worker.url, 'http://w1');
  const second = b.select(ws, t('a'.repeat(34)))!;
  assert.equal(second.balanced, true);
  assert.equal(second.worker.url, 'http://w2');
  assert.equal(b.select(ws, t('a'.repeat(34)))!.worker.url, 'http://w3');
  b.adjustBoundaries();
  assert.deepEqual(b.boundaries.map((x) => x.range[1]).slice(0, 2), [33, 67]);
  now = 11_000; // the window's requests expire
  const picks = [33, 33, 33].map(() => b.select(ws, t('a'.repeat(33)))!.worker.url);
  assert.equal(picks[0], 'http://w1');
  assert.notEqual(picks[1], 'http://w1');
  assert.notEqual(picks[2], 'http://w1');
  assert.notEqual(picks[1], picks[2]);
  a.close();
  b.close();
});

test('circuit breaker: opens after N failures, half-opens after the timeout, closes after M successes; backoff grows with jitter', () => {
  let now = 0;
  const seen: string[] = [];
  const cb = new CircuitBreaker({ ...CB, failureThreshold: 3, successThreshold: 2, timeoutMs: 1000 }, (f, to) => seen.push(`${f}>${to}`), () => now);
  cb.record(false); cb.record(false);
  assert.equal(cb.state, 'closed');
  cb.record(false);
  assert.equal(cb.state, 'open');
  assert.equal(cb.canExecute(), false);
  now = 1500;
  assert.equal(cb.state, 'half_open');
  cb.record(false);
  assert.equal(cb.state, 'open');
  now = 3000;
  cb.record(true); cb.record(true);
  assert.equal(cb.state, 'closed');
  assert.deepEqual(seen, ['closed>open', 'open>half_open', 'half_open>open', 'open>half_open', 'half_open>closed']);
  const r = { maxRetries: 5, initialBackoffMs: 50, maxBackoffMs: 30000, multiplier: 1.5, jitter: 0.2 };
  assert.equal(backoffMs(r, 1, () => 0.5), 50);
  assert.equal(backoffMs(r, 3, () => 0.5), 112.5);
  assert.equal(backoffMs(r, 1, () => 1), 60);
  assert.equal(backoffMs(r, 1, () => 0), 40);
  assert.equal(backoffMs({ ...r, maxBackoffMs: 70 }, 5, () => 0.5), 70);
});
