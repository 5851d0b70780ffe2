// Structured output on the embedded default model (tiny MiniMax-M2, random weights, DeepSeek-V3 BPE vocabulary of
// 128,832 tokens): for each constraint kind, 50 seeded temperature-1 requests through /generate; every output
// validates with an independent validator (ajv / RegExp / recursive descent), and streamed concatenation equals the
// non-streamed text for the same seed. Then chat response_format json_schema / json_object, tool_choice required /
// named with parallel_tool_calls, n > 1, logprobs of the masked distribution, stop strings and invalid grammars.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { CASES, BOUNDED_TOOLS, WEATHER_SCHEMA } from './so_cases.js';
import { embeddedModelDir, jsonTextErrors, post, schemaErrors, serve, sseEvents, type Served } from './so_helpers.js';

let s: Served;
const N = 50;

before(async () => {
  s = await serve(embeddedModelDir(), ['--constrained-json-disable-any-whitespace', '--tool-call-parser', 'minimax-m2', '--enable-metrics']);
});
after(async () => {
  await s?.close();
});

for (const c of CASES) {
  test(`${c.name}: ${N} seeded temperature-1 /generate requests all validate; streamed = non-streamed`, async () => {
    const one = (seed: number, stream: boolean) =>
      post(s.base, '/generate', { text: `Request ${seed}:`, stream, sampling_params: { temperature: 1, sampling_seed: seed, max_new_tokens: 160, ...c.params } });
    const outs = await Promise.all(Array.from({ length: N }, (_, i) => one(1000 + i, false)));
    const bad: string[] = [];
    for (const [i, o] of outs.entries()) {
      assert.equal(o.status, 200, o.text);
      const err = c.validate(o.json.text);
      if (err) bad.push(`seed ${1000 + i} (${o.json.meta_info.finish_reason.type}): ${err}`);
    }
    assert.deepEqual(bad, [], `${bad.length}/${N} invalid`);
    // finished by the grammar: EOS only where it accepts
    assert.ok(outs.every((o) => o.json.meta_info.finish_reason.type === 'stop'));
    const streamed = await Promise.all([0, 1, 2, 3, 4].map((i) => one(1000 + i, true)));
    streamed.forEach((st, i) => {
      const events = sseEvents(st.text);
      assert.equal(events.at(-1).text, outs[i].json.text, 'streamed (cumulative) text = non-streamed');
    });
  });
}

test('chat response_format json_schema (strict, name) and json_object; streaming equals non-streaming', async () => {
  const rf = { type: 'json_schema', json_schema: { name: 'weather', strict: true, schema: WEATHER_SCHEMA } };
  const reqs = Array.from({ length: 10 }, (_, i) => s.client.chat.completions.create({ model: 'default', messages: [{ role: 'user', content: `Weather ${i}?` }], temperature: 1, seed: i, max_tokens: 200, response_format: rf as never }));
  for (const r of await Promise.all(reqs)) assert.equal(jsonTextErrors(WEATHER_SCHEMA, r.choices[0].message.content ?? ''), null, r.choices[0].message.content ?? '');
  const stream = await s.client.chat.completions.create({ model: 'default', messages: [{ role: 'user', content: 'Weather 3?' }], temperature: 1, seed: 3, max_tokens: 200, response_format: rf as never, stream: true });
  let text = '';
  for await (const ch of stream) text += ch.choices[0]?.delta?.content ?? '';
  const once = await s.client.chat.completions.create({ model: 'default', messages: [{ role: 'user', content: 'Weather 3?' }], temperature: 1, seed: 3, max_tokens: 200, response_format: rf as never });
  assert.equal(text, once.choices[0].message.content);
  // json_object = schema {"type": "object"} (SGLang): a JSON object; logit_bias only makes strings and objects close sooner
  const tok = s.engine.tokenizer!;
  const bias: Record<string, number> = {};
  for (const t of ['"', '}', '"}', '",', '1']) for (const id of tok.encode(t, { addSpecialTokens: false })) bias[String(id)] = 20;
  const objs = await Promise.all(Array.from({ length: 10 }, (_, i) => s.client.chat.completions.create({ model: 'default', messages: [{ role: 'user', content: `Object ${i}` }], temperature: 1, seed: i, max_tokens: 400, logit_bias: bias, response_format: { type: 'json_object' } })));
  for (const r of objs) {
    const v = JSON.parse(r.choices[0].message.content ?? '');
    assert.ok(v !== null && typeof v === 'object' && !Array.isArray(v), r.choices[0].message.content ?? '');
  }
});

test('tool_choice required / named (minimax-m2: SGLang JSON-array constraint): calls always parse and validate; parallel_tool_calls false → one call', async () => {
  const ask = (i: number, tool_choice: unknown, parallel = true) =>
    s.client.chat.completions.create({ model: 'default', messages: [{ role: 'user', content: `Call ${i}` }], temperature: 1, seed: i, max_tokens: 300, tools: BOUNDED_TOOLS as never, tool_choice: tool_choice as never, parallel_tool_calls: parallel });
  const req = await Promise.all(Array.from({ length: 10 }, (_, i) => ask(i, 'required')));
  for (const r of req) {
    const calls = r.choices[0].message.tool_calls ?? [];
    assert.ok(calls.length >= 1, JSON.stringify(r.choices[0].message));
    // parallel calls are unbounded: a random-weight model may keep adding calls until max_tokens
    assert.ok(['tool_calls', 'length'].includes(r.choices[0].finish_reason), r.choices[0].finish_reason);
    for (const c of calls) {
      const fn = (c as { function: { name: string; arguments: string } }).function;
      const tool = BOUNDED_TOOLS.find((t) => t.function.name === fn.name);
      assert.ok(tool, fn.name);
      assert.equal(schemaErrors(tool.function.parameters, JSON.parse(fn.arguments)), null, fn.arguments);
    }
  }
  const named = await Promise.all(Array.from({ length: 10 }, (_, i) => ask(i, { type: 'function', function: { name: 'get_time' } }, false)));
  for (const r of named) {
    const calls = r.choices[0].message.tool_calls ?? [];
    assert.equal(calls.length, 1, JSON.stringify(r.choices[0].message));
    assert.equal(r.choices[0].finish_reason, 'tool_calls');
    const fn = (calls[0] as { function: { name: string; arguments: string } }).function;
    assert.equal(fn.name, 'get_time');
    assert.ok(['UTC', 'CET', 'JST'].includes(JSON.parse(fn.arguments).zone));
  }
});

test('n > 1, logprobs of the masked distribution, stop strings', async () => {
  const r = await post(s.base, '/generate', { text: 'Pick:', sampling_params: { temperature: 1, sampling_seed: 5, n: 4, max_new_tokens: 20, regex: '(yes|no|maybe)' }, return_logprob: true, top_logprobs_num: 3 });
  assert.equal(r.status, 200, r.text);
  assert.equal(r.json.length, 4);
  for (const o of r.json) {
    assert.ok(['yes', 'no', 'maybe'].includes(o.text), o.text);
    // each step's top alternatives are allowed tokens only, and their probabilities sum to ≤ 1 of the masked distribution
    for (const tops of o.meta_info.output_top_logprobs) {
      // masked-out alternatives have logprob −inf (null on the wire)
      const mass = tops.reduce((a: number, t: [number | null, number]) => a + (t[0] === null ? 0 : Math.exp(t[0])), 0);
      assert.ok(mass <= 1 + 1e-4);
    }
    const first = o.meta_info.output_top_logprobs[0] as [number, number, null][];
    const finite = first.filter((t) => Number.isFinite(t[0]));
    // at the first step only tokens starting yes / no / maybe are allowed: all their mass is inside the mask
    const tok = s.engine.tokenizer!;
    for (const [, id] of finite) assert.ok(/^(y|ye|yes|n|no|m|ma|may|mayb|maybe)$/.test(tok.decode([id])), tok.decode([id]));
  }
  // a stop string cuts a constrained output (and finishes it) like any other
  const st = await post(s.base, '/generate', { text: 'Mail:', sampling_params: { temperature: 1, sampling_seed: 9, max_new_tokens: 60, regex: '[a-z]{3,8}@example\\.com', stop: ['@'] } });
  assert.equal(st.status, 200, st.text);
  assert.match(st.json.text, /^[a-z]{3,8}$/);
  assert.deepEqual(st.json.meta_info.finish_reason, { type: 'stop', matched: '@' });
});

test('a grammar that cannot finish within max_tokens ends with finish_reason length', async () => {
  const r = await post(s.base, '/generate', { text: 'Digits:', sampling_params: { temperature: 1, sampling_seed: 1, max_new_tokens: 8, regex: '[0-9]{40}' } });
  assert.equal(r.status, 200);
  assert.match(r.json.text, /^[0-9]+$/);
  assert.equal(r.json.meta_info.finish_reason.type, 'length');
});

test('invalid schema / regex / EBNF / structural tag → 400 with SGLang message and the compiler reason; two constraints → 400; server healthy after', async () => {
  const cases: [Record<string, string>, RegExp][] = [
    [{ json_schema: '{"type": "foo"}' }, /^Failed to compile json grammar: Unsupported type "foo"/],
    [{ json_schema: '{not json' }, /^Failed to compile json grammar: .*Failed to parse JSON/],
    [{ regex: '(abc' }, /^Failed to compile regex grammar: Regex parsing error at position 5: The parenthesis is not closed\./],
    [{ ebnf: 'root ::= "a' }, /^Failed to compile ebnf grammar: EBNF lexer error/],
    [{ structural_tag: '{"type":"structural_tag","format":{"type":"nope"}}' }, /^Failed to compile structural_tag grammar: .*Format type not recognized: nope/],
  ];
  for (const [p, re] of cases) {
    for (const stream of [false, true]) {
      const r = await post(s.base, '/generate', { text: 'x', stream, sampling_params: { max_new_tokens: 4, ...p } });
      if (!stream) {
        assert.equal(r.status, 400, r.text);
        assert.match(r.json.error.message, re);
      } else {
        const err = sseEvents(r.text).find((e) => e.error);
        assert.ok(err, r.text);
        assert.match(err.error.message, re);
      }
    }
  }
  const chat = await post(s.base, '/v1/chat/completions', { model: 'default', messages: [{ role: 'user', content: 'x' }], response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'foo' } } } });
  assert.equal(chat.status, 400);
  assert.deepEqual(Object.keys(chat.json), ['object', 'message', 'type', 'param', 'code']);
  assert.match(chat.json.message, /^Failed to compile json grammar: Unsupported type "foo"/);
  // streamed: the error event alone (no role chunk before it), then [DONE]
  const streamed = await post(s.base, '/v1/chat/completions', { model: 'default', stream: true, messages: [{ role: 'user', content: 'x' }], response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'foo' } } } });
  const events = sseEvents(streamed.text);
  assert.equal(events.length, 1, streamed.text);
  assert.match(events[0].error.message, /^Failed to compile json grammar: Unsupported type "foo"/);
  assert.ok(streamed.text.trimEnd().endsWith('data: [DONE]'), streamed.text);
  const two = await post(s.base, '/generate', { text: 'x', sampling_params: { regex: 'a', ebnf: 'root ::= "a"' } });
  assert.equal(two.status, 400);
  assert.match(two.json.error.message, /Only one of regex, json_schema, or ebnf can be set\./);
  const ok = await post(s.base, '/generate', { text: 'x', sampling_params: { temperature: 1, sampling_seed: 3, max_new_tokens: 20, regex: '(yes|no)' } });
  assert.ok(['yes', 'no'].includes(ok.json.text));
  const metrics = await (await fetch(`${s.base}/metrics`)).text();
  assert.match(metrics, /sglang:num_so_requests_total\{[^}]*\} [1-9]/);
  assert.match(metrics, /sglang:num_grammar_queue_reqs\{[^}]*\} 0/);
});
