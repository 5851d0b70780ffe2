import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ChatCompletionRequestSchema, CompletionRequestSchema, deltaMessage, excludeNone, parseWire, toolCallWire, usageInfo } from './openai.js';
import { GenerateReqInputSchema } from './generate.js';
import { InvalidRequestError } from '../common/index.js';

test('chat request: seed body parses; unknown fields ignored; numeric strings coerced as pydantic does', () => {
  const r = parseWire(ChatCompletionRequestSchema, {
    model: 'MiniMaxAI/MiniMax-M2.7',
    messages: [
      { role: 'system', content: [{ type: 'text', text: 'You are a helpful assistant.' }] },
      { role: 'user', content: [{ type: 'text', text: 'Who won the world series in 2020?' }] },
    ],
    temperature: '0.5',
    extra_body_field: 1,
  });
  assert.equal(r.model, 'MiniMaxAI/MiniMax-M2.7');
  assert.equal(r.temperature, 0.5);
  assert.equal(r.messages.length, 2);
  assert.equal(parseWire(ChatCompletionRequestSchema, { messages: [] }).model, 'default');
});

test('chat request errors name the field', () => {
  const bad = (body: unknown, re: RegExp) =>
    assert.throws(() => parseWire(ChatCompletionRequestSchema, body), (e: unknown) => e instanceof InvalidRequestError && re.test(e.message));
  bad({}, /messages: Field required/);
  bad({ messages: [{ role: 'wizard', content: 'x' }] }, /messages\.0\.role/);
  bad({ messages: [], max_tokens: 1.5 }, /max_tokens/);
  bad({ messages: [], temperature: 'hot' }, /temperature/);
  bad({ messages: [], stream: 'yes' }, /stream/);
});

test('completion request: max_tokens defaults to 16; prompt forms', () => {
  assert.equal(parseWire(CompletionRequestSchema, { prompt: 'hi' }).max_tokens, 16);
  assert.equal(parseWire(CompletionRequestSchema, { prompt: 'hi', max_tokens: null }).max_tokens, null);
  assert.deepEqual(parseWire(CompletionRequestSchema, { prompt: [1, 2, 3] }).prompt, [1, 2, 3]);
  assert.deepEqual(parseWire(CompletionRequestSchema, { prompt: [[1], [2]] }).prompt, [[1], [2]]);
  assert.throws(() => parseWire(CompletionRequestSchema, { prompt: { a: 1 } }), /prompt/);
});

test('generate request: text or ids, sampling params snake_case', () => {
  const g = parseWire(GenerateReqInputSchema, { input_ids: [[1, 2], [3]], sampling_params: { max_new_tokens: 4, stop: ['x'] }, foo: 1 });
  assert.deepEqual(g.input_ids, [[1, 2], [3]]);
  assert.equal((g.sampling_params as { max_new_tokens: number }).max_new_tokens, 4);
  assert.throws(() => parseWire(GenerateReqInputSchema, { text: 'a', sampling_params: { max_new_tokens: 'x' } }), /sampling_params/);
});

test('parseWire names the offending field: absent prompt is "Field required", union members report their inner field', () => {
  const msg = (schema: Parameters<typeof parseWire>[0], body: unknown): { message: string; param: string | null } => {
    try {
      parseWire(schema, body);
    } catch (e) {
      assert.ok(e instanceof InvalidRequestError);
      return { message: e.message, param: e.param };
    }
    assert.fail('no error');
  };
  assert.deepEqual(msg(CompletionRequestSchema, {}), { message: '1 validation error: prompt: Field required', param: 'prompt' });
  assert.deepEqual(msg(CompletionRequestSchema, { prompt: 3 }), { message: '1 validation error: prompt: Invalid input', param: 'prompt' });
  const g = msg(GenerateReqInputSchema, { text: 'a', sampling_params: { max_new_tokens: 'x' } });
  assert.equal(g.param, 'sampling_params.max_new_tokens');
  assert.match(g.message, /^1 validation error: sampling_params\.max_new_tokens: Invalid input: expected number, received string$/);
  const gl = msg(GenerateReqInputSchema, { text: ['a', 'b'], sampling_params: [{}, { temperature: 'hot' }] });
  assert.equal(gl.param, 'sampling_params.1.temperature');
  // a token-id prompt with a fractional id: the int-list member (one issue) explains it, not the string list (two)
  assert.deepEqual(msg(CompletionRequestSchema, { prompt: [1, 2.5] }), { message: '1 validation error: prompt.1: Invalid input: expected int, received number', param: 'prompt.1' });
  assert.deepEqual(msg(GenerateReqInputSchema, { input_ids: [[1, 2], [3, 4.5]] }).param, 'input_ids.1.1');
});

test('response builders write SGLang\'s field order: UsageInfo, DeltaMessage, ToolCall; excludeNone drops nulls at every depth', () => {
  assert.equal(JSON.stringify(usageInfo(10, 15)), '{"prompt_tokens":10,"total_tokens":25,"completion_tokens":15,"prompt_tokens_details":null,"reasoning_tokens":0}');
  assert.equal(JSON.stringify(usageInfo(10, 15, 4)), '{"prompt_tokens":10,"total_tokens":25,"completion_tokens":15,"prompt_tokens_details":{"cached_tokens":4},"reasoning_tokens":0}');
  // --enable-cache-report with nothing cached: null (UsageProcessor._details_if_cached)
  assert.equal(usageInfo(10, 15, 0).prompt_tokens_details, null);
  assert.equal(JSON.stringify(deltaMessage({ content: 'Hel' })), '{"role":null,"content":"Hel","reasoning_content":null,"tool_calls":null}');
  assert.equal(JSON.stringify(deltaMessage({ role: 'assistant', content: '' })), '{"role":"assistant","content":"","reasoning_content":null,"tool_calls":null}');
  assert.equal(JSON.stringify(deltaMessage()), '{"role":null,"content":null,"reasoning_content":null,"tool_calls":null}');
  assert.equal(JSON.stringify(toolCallWire(null, 1, null, '{"a"')), '{"id":null,"index":1,"type":"function","function":{"name":null,"arguments":"{\\"a\\""}}');
  assert.equal(JSON.stringify(excludeNone({ a: null, b: [null, { c: null, d: 0 }], e: { f: null } })), '{"b":[null,{"d":0}],"e":{}}');
});
