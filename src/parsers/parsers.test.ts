// Behaviour of the parsers beyond the shared vectors: every case is checked one-shot and, chunk-invariance, in
// many chunkings (one char at a time, random) against the same expectation.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { InvalidRequestError, Rng } from '../common/index.js';
import {
  ChatOutputProcessor,
  aggregateChatDeltas,
  assertReasoningParserName,
  assertToolCallParserName,
  finishReasonWithTools,
  newToolCallId,
  parseChatOutput,
} from './index.js';
import type { ChatDelta, ChatParseOptions, ParsedChatOutput } from './index.js';

const rng = new Rng(5);

function feed(opts: ChatParseOptions, chunks: string[]): { deltas: ChatDelta[]; beforeFinish: number } {
  const p = new ChatOutputProcessor(opts);
  const deltas = chunks.flatMap((c) => p.push(c));
  const beforeFinish = deltas.length;
  deltas.push(...p.finish());
  return { deltas, beforeFinish };
}

function chunkings(text: string): string[][] {
  const out = [[text], [...text], text.split('')];
  for (let k = 0; k < 25; k++) {
    const c: string[] = [];
    for (let i = 0; i < text.length; ) {
      const n = 1 + rng.nextInt(1 + (k % 9));
      c.push(text.slice(i, i + n));
      i += n;
    }
    out.push(c);
  }
  return out;
}

/** Parses `text` one-shot and in many chunkings; all must equal `want` (ids ignored). */
function expectParse(text: string, opts: ChatParseOptions, want: { content?: string | null; reasoning?: string | null; calls?: [string, unknown][] }): ParsedChatOutput {
  const oneShot = parseChatOutput(text, opts);
  assert.equal(oneShot.content, want.content ?? null, 'content');
  assert.equal(oneShot.reasoningContent, want.reasoning ?? null, 'reasoning_content');
  assert.deepEqual(
    oneShot.toolCalls.map((c) => [c.name, JSON.parse(c.arguments)]),
    want.calls ?? [],
    'tool calls',
  );
  const strip = (r: ParsedChatOutput) => ({ ...r, toolCalls: r.toolCalls.map((c) => ({ ...c, id: '' })) });
  for (const chunks of chunkings(text)) assert.deepEqual(strip(aggregateChatDeltas(feed(opts, chunks).deltas)), strip(oneShot), JSON.stringify(chunks));
  return oneShot;
}

const weather = [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' }, days: { type: 'integer' } } } } }];

test('reasoning: stream_reasoning=false releases reasoning in one piece, and flushes it when </think> never comes', () => {
  const opts: ChatParseOptions = { reasoningParser: 'minimax', streamReasoning: false };
  const { deltas } = feed(opts, [...'abc def</think>\n\nHi']);
  assert.deepEqual(deltas.filter((d) => d.reasoningContent !== undefined), [{ reasoningContent: 'abc def' }]);
  expectParse('still thinking', opts, { reasoning: 'still thinking' });
  assert.deepEqual(feed(opts, [...'still']).deltas, [{ reasoningContent: 'still' }]);
});

test('reasoning: per-parser forcing (deepseek-v3 needs thinking: true; qwen3 unless enable_thinking: false; r1 always)', () => {
  expectParse('a</think>b', { reasoningParser: 'deepseek-v3' }, { content: 'a</think>b' });
  expectParse('a</think>b', { reasoningParser: 'deepseek-v3', chatTemplateKwargs: { thinking: 1 } }, { content: 'a</think>b' });
  expectParse('a</think>b', { reasoningParser: 'deepseek-v3', chatTemplateKwargs: { thinking: true } }, { reasoning: 'a', content: 'b' });
  expectParse('<think>a</think>b', { reasoningParser: 'qwen3' }, { reasoning: 'a', content: 'b' });
  expectParse('plain', { reasoningParser: 'qwen3', chatTemplateKwargs: { enable_thinking: false } }, { content: 'plain' });
  expectParse('<think><think>x</think>y</think>z', { reasoningParser: 'deepseek-r1' }, { reasoning: 'x', content: 'y</think>z' });
  expectParse('hello <think>x</think>y', { reasoningParser: 'deepseek-v3' }, { content: 'hello y', reasoning: 'x' });
  expectParse('', { reasoningParser: 'minimax-append-think' }, { content: '<think>' });
});

test('reasoning streams as it arrives, holding only a possible </think> prefix', () => {
  const p = new ChatOutputProcessor({ reasoningParser: 'minimax' });
  assert.deepEqual(p.push('abc </thi'), [{ reasoningContent: 'abc ' }]);
  assert.deepEqual(p.push('nk>\n\nok'), [{ content: '\n\nok' }]);
});

test('tool parsing is skipped without tools, with tool_choice none, or without a tool parser', () => {
  const text = '<minimax:tool_call>\n<invoke name="get_weather">\n</invoke>\n</minimax:tool_call>';
  expectParse(text, { toolCallParser: 'minimax-m2', tools: weather, toolChoice: 'none' }, { content: text });
  expectParse(text, { toolCallParser: 'minimax-m2', tools: [] }, { content: text });
  expectParse(text, { tools: weather }, { content: text });
});

test('minimax-m2: truncated value discarded, unknown tool dropped, duplicate parameter, newline trimming, typing', () => {
  const opts: ChatParseOptions = { toolCallParser: 'minimax-m2', tools: weather };
  expectParse('<minimax:tool_call>\n<invoke name="get_weather">\n<parameter name="city">Lim', opts, { calls: [['get_weather', {}]] });
  expectParse(
    'a<minimax:tool_call>\n<invoke name="nope">\n<parameter name="x">1</parameter>\n</invoke>\n<invoke name="get_weather">\n<parameter name="city">\n Rome \n</parameter>\n<parameter name="days">03</parameter>\n<parameter name="days">4</parameter>\n</invoke>\n</minimax:tool_call>b',
    opts,
    { content: 'ab', calls: [['get_weather', { city: ' Rome ', days: 4 }]] },
  );
  expectParse('<minimax:tool_call><invoke name="get_weather"><parameter name="days">x1</parameter></invoke></minimax:tool_call>', opts, {
    calls: [['get_weather', { days: 'x1' }]],
  });
  // Forwarded when asked to (SGLANG_FORWARD_UNKNOWN_TOOLS).
  expectParse('<minimax:tool_call><invoke name="nope"></invoke></minimax:tool_call>', { ...opts, forwardUnknownTools: true }, { calls: [['nope', {}]] });
});

test('minimax-m2 streams each parameter as soon as the next tag proves it complete (OpenAI delta shape)', () => {
  const p = new ChatOutputProcessor({ toolCallParser: 'minimax-m2', tools: weather, newCallId: () => 'call_x' });
  const d1 = p.push('Hi <minimax:tool_call>\n<invoke name="get_weather">\n<parameter name="city">Oslo</parameter>\n');
  assert.deepEqual(d1, [{ content: 'Hi ' }, { toolCall: { index: 0, id: 'call_x', name: 'get_weather', arguments: '' } }]);
  const d2 = p.push('<parameter name="days">2</parameter>\n</invoke>');
  assert.deepEqual(d2, [
    { toolCall: { index: 0, id: null, name: null, arguments: '{"city": "Oslo"' } },
    { toolCall: { index: 0, id: null, name: null, arguments: ', "days": 2' } },
    { toolCall: { index: 0, id: null, name: null, arguments: '}' } },
  ]);
  assert.equal(p.hasToolCalls, true);
});

test('deepseekv32: prose after a section, self-closing invoke, stray closers, cut-short tag, JSON body, parameters without string attr', () => {
  const opts: ChatParseOptions = { toolCallParser: 'deepseekv32', tools: weather };
  const call = '<｜DSML｜function_calls>\n<｜DSML｜invoke name="get_weather">\n<｜DSML｜parameter name="city" string="true">Kyiv</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>';
  expectParse(`Before.\n\n${call}\n\nAfter it.  `, opts, { content: 'Before.\nAfter it.', calls: [['get_weather', { city: 'Kyiv' }]] });
  expectParse('<｜DSML｜function_calls>\n<｜DSML｜invoke name="get_weather"/>\n</｜DSML｜function_calls>', opts, { calls: [['get_weather', {}]] });
  expectParse('x </｜DSML｜invoke> y', opts, { content: 'x  y' });
  expectParse('Partial <｜DSML｜func', opts, { content: 'Partial' });
  expectParse('a < b and c </ d <', opts, { content: 'a < b and c </ d <' });
  expectParse(
    '<｜DSML｜function_calls><｜DSML｜invoke name="get_weather">{"city": "A", "days": 2.0}</｜DSML｜invoke><｜DSML｜invoke name="get_weather">[1]</｜DSML｜invoke></｜DSML｜function_calls>',
    opts,
    { calls: [['get_weather', { city: 'A', days: 2 }], ['get_weather', {}]] },
  );
  const r = parseChatOutput('<｜DSML｜function_calls><｜DSML｜invoke name="get_weather">{"days": 2.0}</｜DSML｜invoke>', opts);
  assert.equal(r.toolCalls[0].arguments, '{"days": 2.0}'); // Python json.dumps spelling
});

test('deepseekv32 keeps the valid invokes after a malformed one (unclosed parameter, invoke tag missing its ">"), streamed and not', () => {
  const opts: ChatParseOptions = { toolCallParser: 'deepseekv32', tools: weather };
  const good = '<｜DSML｜invoke name="get_weather">\n<｜DSML｜parameter name="city" string="true">Oslo</｜DSML｜parameter>\n</｜DSML｜invoke>';
  // unclosed parameter: its value is discarded at the invoke's end; the invoke keeps its completed parameters
  expectParse(`Hi\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name="get_weather">\n<｜DSML｜parameter name="days" string="false">2</｜DSML｜parameter>\n<｜DSML｜parameter name="city" string="true">Ky\n</｜DSML｜invoke>\n${good}\n</｜DSML｜function_calls>`, opts,
    { content: 'Hi', calls: [['get_weather', { days: 2 }], ['get_weather', { city: 'Oslo' }]] });
  // invoke tag without '>': that invoke is dropped, the next one kept (whether or not the broken one was closed)
  expectParse(`<｜DSML｜function_calls>\n<｜DSML｜invoke name="get_weather"\n</｜DSML｜invoke>\n${good}\n</｜DSML｜function_calls>`, opts, { calls: [['get_weather', { city: 'Oslo' }]] });
  expectParse(`<｜DSML｜function_calls>\n<｜DSML｜invoke name="get_weather"\n<｜DSML｜parameter name="city" string="true">X</｜DSML｜parameter>\n${good}\n</｜DSML｜function_calls>`, opts, { calls: [['get_weather', { city: 'Oslo' }]] });
});

test('deepseekv32 emits text that shares a chunk with the section opener, and streams parameters one by one', () => {
  const p = new ChatOutputProcessor({ toolCallParser: 'deepseekv32', tools: weather, newCallId: () => 'call_y' });
  assert.deepEqual(p.push('Sure!'), [{ content: 'Sure!' }]);
  const d = p.push('\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name="get_weather">\n<｜DSML｜parameter name="days" string="false">3</｜DSML｜parameter>\n');
  assert.deepEqual(d, [
    { toolCall: { index: 0, id: 'call_y', name: 'get_weather', arguments: '' } },
    { toolCall: { index: 0, id: null, name: null, arguments: '{"days": 3' } },
  ]);
  assert.deepEqual(p.finish(), [{ toolCall: { index: 0, id: null, name: null, arguments: '}' } }]);
});

test('deepseekv31 / deepseekv3: malformed JSON dropped, lone end tokens removed, text after the section is not content', () => {
  const v31: ChatParseOptions = { toolCallParser: 'deepseekv31', tools: weather };
  const good = '<｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"city": "Rome"}<｜tool▁call▁end｜>';
  const bad = '<｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"city": Rome}<｜tool▁call▁end｜>';
  expectParse(`Hi  <｜tool▁calls▁begin｜>${bad}${good}<｜tool▁calls▁end｜>trailing`, v31, { content: 'Hi', calls: [['get_weather', { city: 'Rome' }]] });
  expectParse('a<｜tool▁call▁end｜>b<｜tool▁calls▁end｜>c', v31, { content: 'abc' });
  const v3: ChatParseOptions = { toolCallParser: 'deepseekv3', tools: weather };
  expectParse(
    '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{"days": 1e2}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
    v3,
    { calls: [['get_weather', { days: 100 }]] },
  );
  expectParse('<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n{"a": 1}<｜tool▁call▁end｜>', v3, {});
});

test('tool_choice required / named: accepts the JSON-array shape and the native shape; unparseable text stays content', () => {
  const base: ChatParseOptions = { toolCallParser: 'deepseekv31', tools: weather, toolChoice: 'required' };
  expectParse(' [{"name": "get_weather", "parameters": {"city": "Rome"}}, {"name": "get_weather", "parameters": {"days": 2}}]', base, {
    calls: [['get_weather', { city: 'Rome' }], ['get_weather', { days: 2 }]],
  });
  expectParse('<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{}<｜tool▁call▁end｜><｜tool▁calls▁end｜>', base, { calls: [['get_weather', {}]] });
  expectParse('[citation needed] no call', base, { content: '[citation needed] no call' });
  const named: ChatParseOptions = { ...base, toolChoice: { type: 'function', function: { name: 'get_weather' } } };
  expectParse('[{"name": "get_weather", "parameters": {"city": "X"}}, {"name": "get_weath', named, { calls: [['get_weather', { city: 'X' }]] });
});

test('ids, indexes, finish reasons and name checks', () => {
  assert.match(newToolCallId(), /^call_[0-9a-f]{24}$/);
  const r = parseChatOutput(
    '<minimax:tool_call><invoke name="get_weather"></invoke><invoke name="get_weather"></invoke></minimax:tool_call>',
    { toolCallParser: 'minimax-m2', tools: weather },
  );
  assert.deepEqual(r.toolCalls.map((c) => c.index), [0, 1]);
  assert.notEqual(r.toolCalls[0].id, r.toolCalls[1].id);
  assert.equal(finishReasonWithTools('stop', true), 'tool_calls');
  assert.equal(finishReasonWithTools('length', true), 'length');
  assert.equal(finishReasonWithTools('stop', false), 'stop');
  assert.throws(() => assertReasoningParserName('nope'), InvalidRequestError);
  assert.doesNotThrow(() => assertReasoningParserName('DeepSeek-V3'));
  assert.throws(() => assertToolCallParserName('MiniMax-M2'), InvalidRequestError);
  assert.throws(() => new ChatOutputProcessor({ toolCallParser: 'minimax-m2', tools: weather, toolChoice: 42 }), InvalidRequestError);
});

test('property: streaming ≡ one-shot on random well- and ill-formed outputs of every parser combination', () => {
  const pieces: Record<string, string[]> = {
    'minimax-m2': ['<minimax:tool_call>', '</minimax:tool_call>', '<invoke name="get_weather">', '<invoke name="nope">', '</invoke>',
      '<parameter name="city">', '<parameter name="days">', '</parameter>', '<minimax:tool', '<invoke name="', '">', '\n'],
    deepseekv32: ['<｜DSML｜function_calls>', '</｜DSML｜function_calls>', '<｜DSML｜invoke name="get_weather">', '<｜DSML｜invoke name="get_weather"/>',
      '</｜DSML｜invoke>', '<｜DSML｜parameter name="city" string="true">', '<｜DSML｜parameter name="days" string="false">', '</｜DSML｜parameter>',
      '<｜DSML｜', '</｜', '<｜', '{"city": "A"}', '\n\n'],
    deepseekv31: ['<｜tool▁calls▁begin｜>', '<｜tool▁calls▁end｜>', '<｜tool▁call▁begin｜>', '<｜tool▁call▁end｜>', '<｜tool▁sep｜>', 'get_weather', '{"days": 2}', '{bad'],
    deepseekv3: ['<｜tool▁calls▁begin｜>', '<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{"days": 1}\n```<｜tool▁call▁end｜>', '<｜tool▁calls▁end｜>', '```', '\n'],
  };
  const prose = ['Hi', ' ', '5 < 6', 'a</b', '<think>', '</think>', '</thi', 'é🌍', '\n', 'Rome', '3', 'null', '  '];
  const parsersR = [null, 'deepseek-v3', 'minimax', 'minimax-append-think', 'qwen3'];
  const local = new Rng(11);
  for (const tool of Object.keys(pieces)) {
    for (const reasoning of parsersR) {
      for (const toolChoice of ['auto', 'required']) {
        for (let n = 0; n < 12; n++) {
          const parts: string[] = [];
          const len = 3 + local.nextInt(14);
          for (let i = 0; i < len; i++) parts.push(local.nextInt(2) ? pieces[tool][local.nextInt(pieces[tool].length)] : prose[local.nextInt(prose.length)]);
          const text = parts.join('');
          const opts: ChatParseOptions = { toolCallParser: tool, tools: weather, toolChoice, reasoningParser: reasoning, chatTemplateKwargs: { thinking: local.nextInt(2) === 0 } };
          const oneShot = parseChatOutput(text, opts);
          const strip = (r: ParsedChatOutput) => ({ ...r, toolCalls: r.toolCalls.map((c) => ({ ...c, id: '' })) });
          for (const t of oneShot.toolCalls) assert.doesNotThrow(() => JSON.parse(t.arguments), `${tool}: arguments are JSON: ${t.arguments}`);
          for (const chunks of [[...text], text.split(''), parts]) {
            assert.deepEqual(strip(aggregateChatDeltas(feed(opts, chunks).deltas)), strip(oneShot), `${tool}/${reasoning}/${toolChoice}: ${JSON.stringify(text)}`);
          }
        }
      }
    }
  }
});
