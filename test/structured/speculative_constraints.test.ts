// Structured output and the HTTP surface under speculative decoding, on a tiny DeepSeek-V3.2 checkpoint (random weights
// with its MTP layer, DeepSeek tokenizer) served with the seed's --speculative-algorithm EAGLE flags: json_schema
// requests validate (the grammar advances token by token through each verify, so accepted draft tokens are masked
// exactly as plain decoding would mask them); meta_info carries SGLang's spec_* fields, /get_server_info
// avg_spec_accept_length and /metrics sglang:spec_accept_length; greedy text equals the server without speculation.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { WEATHER_SCHEMA } from './so_cases.js';
import { deepseekV32Dir, jsonTextErrors, post, serve, type Served } from './so_helpers.js';

let s: Served;
let plain: Served;
const SPEC = ['--speculative-algorithm', 'EAGLE', '--speculative-num-steps', '3', '--speculative-eagle-topk', '1', '--speculative-num-draft-tokens', '4'];

before(async () => {
  s = await serve(deepseekV32Dir(), [...SPEC, '--constrained-json-disable-any-whitespace', '--enable-metrics']);
  plain = await serve(deepseekV32Dir(), ['--constrained-json-disable-any-whitespace']);
});
after(async () => {
  await s?.close();
  await plain?.close();
});

test('json_schema under EAGLE: 6 seeded requests validate; greedy constrained text equals plain decoding', async () => {
  const outs = await Promise.all(Array.from({ length: 6 }, (_, i) =>
    post(s.base, '/generate', { text: `Weather ${i}`, sampling_params: { temperature: i === 0 ? 0 : 1, sampling_seed: 500 + i, max_new_tokens: 160, json_schema: JSON.stringify(WEATHER_SCHEMA) } })));
  const bad = outs.map((o, i) => [i, jsonTextErrors(WEATHER_SCHEMA, o.json.text)] as const).filter(([, e]) => e !== null);
  assert.deepEqual(bad, []);
  const ref = await post(plain.base, '/generate', { text: 'Weather 0', sampling_params: { temperature: 0, max_new_tokens: 160, json_schema: JSON.stringify(WEATHER_SCHEMA) } });
  assert.equal(outs[0].json.text, ref.json.text);
});

test('meta_info spec fields, /get_server_info avg_spec_accept_length, /metrics sglang:spec_accept_length', async () => {
  const r = await post(s.base, '/generate', { text: 'Hello there', sampling_params: { temperature: 0, max_new_tokens: 24, ignore_eos: true } });
  const m = r.json.meta_info;
  assert.equal(m.completion_tokens, 24);
  assert.ok(m.spec_verify_ct >= 6 && m.spec_verify_ct <= 23, JSON.stringify(m));
  assert.equal(m.spec_accept_length, 24 / m.spec_verify_ct);
  assert.equal(m.spec_draft_token_num, m.spec_verify_ct * 3);
  assert.equal(m.spec_accept_rate, m.spec_accept_token_num / m.spec_draft_token_num);
  const ref = await post(plain.base, '/generate', { text: 'Hello there', sampling_params: { temperature: 0, max_new_tokens: 24, ignore_eos: true } });
  assert.equal(r.json.text, ref.json.text);
  assert.equal(ref.json.meta_info.spec_verify_ct, undefined, 'no spec fields without speculation');
  const info = await (await fetch(`${s.base}/get_server_info`)).json() as { internal_states: { avg_spec_accept_length: number }[] };
  assert.ok(info.internal_states[0].avg_spec_accept_length >= 1, JSON.stringify(info.internal_states));
  const metrics = await (await fetch(`${s.base}/metrics`)).text();
  assert.match(metrics, /^sglang:spec_accept_length\{model_name="default",tp_rank="0"\} [0-9.]+$/m);
});
