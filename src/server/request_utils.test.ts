import assert from 'node:assert/strict';
import { test } from 'node:test';
import { childAbortController, mergeAsync } from './request_utils.js';

test('mergeAsync: a source that fails after others have yielded aborts `cancel` (the other prompts stop); a drained merge does not', async () => {
  const parent = new AbortController();
  const cancel = childAbortController(parent.signal);
  let stoppedBySignal = false;
  async function* long(): AsyncGenerator<string> {
    for (let i = 0; i < 1000; i++) {
      if (cancel.signal.aborted) { stoppedBySignal = true; return; }
      yield `a${i}`;
      await new Promise((r) => setTimeout(r, 1));
    }
  }
  async function* failsLate(): AsyncGenerator<string> {
    yield 'b0';
    await new Promise((r) => setTimeout(r, 5));
    throw new Error('refused after the first outputs');
  }
  const seen: string[] = [];
  await assert.rejects(async () => { for await (const v of mergeAsync([long(), failsLate()], cancel)) seen.push(v); }, /refused after the first outputs/);
  assert.ok(seen.includes('a0') && seen.includes('b0'), 'both sources yielded before the failure');
  assert.equal(cancel.signal.aborted, true);
  assert.equal(parent.signal.aborted, false, 'the client signal is untouched');
  await new Promise((r) => setTimeout(r, 10));
  assert.equal(stoppedBySignal, true, 'the other source saw the abort');

  const quiet = new AbortController();
  async function* two(): AsyncGenerator<number> { yield 1; yield 2; }
  const all: number[] = [];
  for await (const v of mergeAsync([two(), two()], quiet)) all.push(v);
  assert.deepEqual(all.sort(), [1, 1, 2, 2]);
  assert.equal(quiet.signal.aborted, false);
});

test('mergeAsync: a consumer that stops early aborts `cancel`', async () => {
  const cancel = new AbortController();
  async function* many(): AsyncGenerator<number> { for (let i = 0; ; i++) yield i; }
  for await (const v of mergeAsync([many(), many()], cancel)) if (v >= 3) break;
  assert.equal(cancel.signal.aborted, true);
});
