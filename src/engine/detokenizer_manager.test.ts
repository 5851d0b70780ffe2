import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Tokenizer } from '../tokenizer/index.js';
import type { ReqTokenOutput } from '../scheduler/index.js';
import { DetokenizerManager } from './detokenizer_manager.js';

// Token table: id → text; 9 is a special EOS; 7/8 are the two halves of the UTF-8 encoding of 'é'.
const TEXT: Record<number, Uint8Array> = {
  1: Buffer.from('Hello'),
  2: Buffer.from(' wor'),
  3: Buffer.from('ld'),
  4: Buffer.from(' ST'),
  5: Buffer.from('OP'),
  6: Buffer.from('!'),
  7: Uint8Array.of(0xc3),
  8: Uint8Array.of(0xa9),
  9: Buffer.from('<eos>'),
};
const tok = { tokenBytes: (id: number) => TEXT[id] ?? new Uint8Array(0), isSpecialToken: (id: number) => id === 9 } as unknown as Tokenizer;

let n = 0;
function out(rid: string, ids: number[], finish: ReqTokenOutput['finishReason'] = null): ReqTokenOutput {
  n += ids.length;
  return { rid, newIds: ids, finishReason: finish, promptTokens: 3, completionTokens: n, cachedTokens: 0, numRetractions: 0 };
}

test('streaming: deltas never split a UTF-8 character; a stop string is held back, then cut and reported', () => {
  n = 0;
  const d = new DetokenizerManager(tok);
  d.add('r', { skipSpecialTokens: true, stop: [' STOP'], noStopTrim: false }, true);
  const texts: string[] = [];
  for (const id of [1, 7, 8, 2, 4]) texts.push(...d.process([out('r', [id])]).outputs.map((o) => o.text));
  // With stop strings, an update with no final text is suppressed and its ids wait for the next one: 7 is half of 'é',
  // ' ST' may start ' STOP'.
  assert.deepEqual(texts, ['Hello', 'é', ' wor']);
  const r = d.process([out('r', [5])]);
  assert.deepEqual(r.outputs[0].outputIds, [4, 5], 'the held id goes out with the final output');
  assert.deepEqual(r.stopMatches, [{ rid: 'r', matched: ' STOP' }]);
  assert.equal(r.outputs[0].text, '');
  assert.deepEqual(r.outputs[0].finishReason, { type: 'stop', matched: ' STOP' });
  assert.equal(d.size, 0, 'finished request forgotten');
});

test('non-streaming: one output at the end; a matched stop token is trimmed from the text but kept in the ids', () => {
  n = 0;
  const d = new DetokenizerManager(tok);
  d.add('q', { skipSpecialTokens: true, stop: [], noStopTrim: false }, false);
  assert.equal(d.process([out('q', [1])]).outputs.length, 0);
  assert.equal(d.process([out('q', [2, 3])]).outputs.length, 0);
  const r = d.process([out('q', [6], { type: 'stop', matched: 6 })]);
  assert.equal(r.outputs.length, 1);
  assert.equal(r.outputs[0].text, 'Hello world');
  assert.deepEqual(r.outputs[0].outputIds, [1, 2, 3, 6]);
  // no_stop_trim keeps it.
  d.add('k', { skipSpecialTokens: true, stop: [], noStopTrim: true }, false);
  assert.equal(d.process([out('k', [1, 6], { type: 'stop', matched: 6 })]).outputs[0].text, 'Hello!');
});

test('stream interval: emits on the first token and every k-th', () => {
  n = 0;
  const d = new DetokenizerManager(tok, 3);
  d.add('s', { skipSpecialTokens: true, stop: [], noStopTrim: false }, true);
  const counts = [1, 2, 3, 6, 6, 6].map((id) => d.process([out('s', [id])]).outputs.length);
  assert.deepEqual(counts, [1, 0, 1, 0, 0, 1]);
});

test('several tokens in one step (a speculative verify): a stop string matched mid-way drops the later tokens', () => {
  n = 0;
  const d = new DetokenizerManager(tok);
  d.add('v', { skipSpecialTokens: true, stop: [' STOP'], noStopTrim: false }, false);
  assert.equal(d.process([out('v', [1, 2, 3])]).outputs.length, 0);
  const r = d.process([{ ...out('v', [4, 5, 6, 1]), outputTokenLogprobs: [[-1, 4], [-2, 5], [-3, 6], [-4, 1]], outputTopLogprobs: [[], [], [], []] }]);
  assert.deepEqual(r.stopMatches, [{ rid: 'v', matched: ' STOP' }]);
  assert.equal(r.outputs[0].text, 'Hello world');
  assert.deepEqual(r.outputs[0].outputIds, [1, 2, 3, 4, 5], 'tokens after the match are dropped');
  assert.equal(r.outputs[0].completionTokens, 5);
  assert.deepEqual(r.outputs[0].outputTokenLogprobs, [[-1, 4], [-2, 5]]);
});
