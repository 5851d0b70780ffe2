// The trained MiniMax-M2 demo checkpoint (issue 22; assets/demo/, scripts/demo_model/train.py), served in-process
// with the seed page's parser flags: on questions whose cities and numbers are absent from the training corpus
// (checked against scripts/demo_model/corpus_data.mjs), greedy answers come back in the trained formats — a thinking
// section then content; a get_weather call that the minimax-m2 tool parser turns into {"location": <string>}; after a
// tool result, the corpus's answer sentence. What the demo has not learned (README, Demo models): copying values — the
// city in the call and the numbers in answers are not asserted because they are usually wrong.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { writeDemoModelWithTokenizer } from '../src/cli/embedded_model.js';
import { REPO_ROOT } from './helpers/paths.js';
import { serve, type Served } from './structured/so_helpers.js';

const CORPUS_DATA = readFileSync(join(REPO_ROOT, 'scripts', 'demo_model', 'corpus_data.mjs'), 'utf8');
const HELD_OUT_CITIES = ['Reykjavik', 'Nairobi', 'Lima', 'Hanoi'];

const WEATHER_TOOL = {
  type: 'function' as const,
  function: {
    name: 'get_weather', description: 'Get the current weather for a location',
    parameters: { type: 'object', properties: { location: { type: 'string', description: 'The city name' }, unit: { type: 'string', enum: ['celsius', 'fahrenheit'], description: 'Temperature unit' } }, required: ['location'] },
  },
};

let dir: string;
let served: Served;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'tsglang-demo-minimax-'));
  writeDemoModelWithTokenizer('minimax-m2', dir);
  served = await serve(dir, ['--tool-call-parser', 'minimax-m2', '--reasoning-parser', 'minimax-append-think']);
});

after(async () => {
  await served?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** [thinking, content] of a minimax-append-think answer (the tags stay in content). */
function parts(content: string | null): [string, string] {
  const m = /^<think>([\s\S]*?)<\/think>([\s\S]*)$/.exec(content ?? '');
  assert.ok(m, `no <think>...</think> section in ${JSON.stringify(content)}`);
  return [m[1].trim(), m[2].trim()];
}

test('held-out cities and numbers are absent from the training corpus', () => {
  for (const city of HELD_OUT_CITIES) assert.ok(!CORPUS_DATA.includes(city), city);
  const percents = /export const PERCENTS = \[([^\]]*)\]/.exec(CORPUS_DATA);
  assert.ok(percents && !percents[1].split(',').map(Number).includes(35));
});

test('MiniMax-M2 demo, held-out percent question: a thinking section, then the step-by-step content', async () => {
  const r = await served.client.chat.completions.create({ model: 'demo', messages: [{ role: 'user', content: 'Solve this problem step by step: What is 35% of 460?' }], max_tokens: 300, temperature: 0 });
  assert.equal(r.choices[0].finish_reason, 'stop');
  const [thought, content] = parts(r.choices[0].message.content);
  assert.match(thought, /^The user asks: "Solve this problem step by step: What is /);
  assert.match(content, /^\*\*Step-by-step solution\*\*/);
});

test('MiniMax-M2 demo, held-out cities with the seed page\'s get_weather tool: one parsed get_weather call with a location', async () => {
  for (const city of HELD_OUT_CITIES) {
    const r = await served.client.chat.completions.create({ model: 'demo', messages: [{ role: 'user', content: `What's the weather in ${city}?` }], tools: [WEATHER_TOOL], max_tokens: 200, temperature: 0 });
    const message = r.choices[0].message;
    assert.equal(r.choices[0].finish_reason, 'tool_calls', `${city}: ${JSON.stringify(message)}`);
    assert.equal(message.tool_calls?.length, 1);
    const call = message.tool_calls![0] as { function: { name: string; arguments: string } };
    assert.equal(call.function.name, 'get_weather');
    const args = JSON.parse(call.function.arguments) as Record<string, unknown>;
    assert.deepEqual(Object.keys(args), ['location']);
    assert.equal(typeof args.location, 'string');
    const [thought] = parts(message.content);
    assert.match(thought, /^The user is asking about the weather in .+ I need to use the get_weather function/);
  }
});

test('MiniMax-M2 demo, tool-result round trip (no tools in the request, as the seed page): the answer sentence after the result', async () => {
  for (const [city, temp, cond] of [['Nairobi', 27, 'rainy'], ['Reykjavik', -3, 'windy']] as const) {
    const messages = [
      { role: 'user' as const, content: `What's the weather in ${city}?` },
      { role: 'assistant' as const, content: null, tool_calls: [{ id: 'call_123', type: 'function' as const, function: { name: 'get_weather', arguments: `{"location": "${city}", "unit": "celsius"}` } }] },
      { role: 'tool' as const, tool_call_id: 'call_123', content: `The weather in ${city} is ${temp}°C and ${cond}.` },
    ];
    const r = await served.client.chat.completions.create({ model: 'demo', messages, max_tokens: 200, temperature: 0 });
    assert.equal(r.choices[0].finish_reason, 'stop');
    const [thought, content] = parts(r.choices[0].message.content);
    assert.match(thought, /^The tool returned: The weather in /);
    assert.match(content, /^The weather in .+ is currently -?\d+°[CF] and \w+\.$/);
  }
});

test('MiniMax-M2 demo: generation_config.json sets top_k 1, so a request without sampling fields (as the seed pages\' examples) answers as a greedy one', async () => {
  assert.equal((JSON.parse(readFileSync(join(dir, 'generation_config.json'), 'utf8')) as { top_k?: number }).top_k, 1);
  const messages = [{ role: 'user' as const, content: 'Solve this problem step by step: What is 15% of 240?' }];
  const plain = await served.client.chat.completions.create({ model: 'demo', messages, max_tokens: 120 });
  const greedy = await served.client.chat.completions.create({ model: 'demo', messages, max_tokens: 120, temperature: 0 });
  assert.equal(plain.choices[0].message.content, greedy.choices[0].message.content);
  const sampled = await served.client.chat.completions.create({ model: 'demo', messages, max_tokens: 120, top_k: -1, seed: 1 } as never);
  assert.notEqual((sampled as { choices: { message: { content: string } }[] }).choices[0].message.content, greedy.choices[0].message.content, 'top_k -1 in the request overrides the default');
});
