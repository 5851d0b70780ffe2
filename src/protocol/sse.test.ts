import { test } from 'node:test';
import assert from 'node:assert/strict';
import { encodeSseEvent, encodeSseError, encodeOpenAISseError, SSE_CONTENT_TYPE, SSE_DONE, parseSseLine, SseLineSplitter, iterateSseData } from './sse.js';

test('encodes data events, errors and the [DONE] sentinel', () => {
  assert.equal(encodeSseEvent({ text: 'a"b', meta_info: { completion_tokens: 2 } }), 'data: {"text":"a\\"b","meta_info":{"completion_tokens":2}}\n\n');
  assert.equal(encodeSseEvent('[DONE]'), SSE_DONE);
  assert.equal(SSE_DONE, 'data: [DONE]\n\n');
  assert.equal(encodeSseError('boom', { code: 400 }), 'data: {"error":{"message":"boom","code":400}}\n\n');
  assert.equal(SSE_CONTENT_TYPE, 'text/event-stream; charset=utf-8');
});

test('OpenAI in-stream errors are Python json.dumps of {"error": ErrorResponse} (spaced separators, non-ASCII escaped)', () => {
  assert.equal(encodeOpenAISseError('bad "x"\n é'),
    'data: {"error": {"object": "error", "message": "bad \\"x\\"\\n \\u00e9", "type": "BadRequestError", "param": null, "code": 400}}\n\n');
  assert.equal(encodeOpenAISseError('gone', 'InternalServerError', 500),
    'data: {"error": {"object": "error", "message": "gone", "type": "InternalServerError", "param": null, "code": 500}}\n\n');
});

test('classifies lines like the bench client', () => {
  assert.deepEqual(parseSseLine('data: {"a":1}'), { kind: 'data', data: '{"a":1}' });
  assert.deepEqual(parseSseLine('data:{"a":1}\r'), { kind: 'data', data: '{"a":1}' });
  assert.deepEqual(parseSseLine('data: [DONE]'), { kind: 'done' });
  assert.deepEqual(parseSseLine(''), { kind: 'skip' });
  assert.deepEqual(parseSseLine(': keep-alive'), { kind: 'skip' });
  assert.deepEqual(parseSseLine('event: message'), { kind: 'skip' });
  assert.deepEqual(parseSseLine('{"text":"x"}'), { kind: 'data', data: '{"text":"x"}' });
});

test('splits lines across chunk boundaries, including a split UTF-8 sequence', () => {
  const s = new SseLineSplitter();
  const bytes = new TextEncoder().encode('data: {"t":"é"}\n\ndata: [DO');
  // cut inside the two-byte 'é'
  const cut = bytes.indexOf(0xc3) + 1;
  assert.deepEqual(s.push(bytes.subarray(0, cut)), []);
  assert.deepEqual(s.push(bytes.subarray(cut)), ['data: {"t":"é"}', '']);
  assert.deepEqual(s.push('NE]'), []);
  assert.deepEqual(s.end(), ['data: [DONE]']);
  assert.deepEqual(s.end(), []);
});

test('iterateSseData yields payloads and stops at [DONE]', async () => {
  async function* body(): AsyncGenerator<string> {
    yield encodeSseEvent({ i: 0 }) + 'data: {"i"';
    yield ':1}\n\n' + SSE_DONE + encodeSseEvent({ i: 2 });
  }
  const got: string[] = [];
  for await (const d of iterateSseData(body())) got.push(d);
  assert.deepEqual(got, ['{"i":0}', '{"i":1}']);
});
