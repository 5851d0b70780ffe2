// End to end: the real HTTP server (engine, scheduler, KV cache, detokenizer, prompt builder, parsers, SSE) on a
// scripted model (models/scripted.ts) that replays known outputs, driven by the `openai` npm client. Checks the seed
// documents' examples: MiniMax-M2.7 with minimax-append-think (the client-side think-tag splitter loop) and the
// get_weather round trip with a `role: tool` message; DeepSeek-V3.2 with deepseekv32 + deepseek-v3 (thinking kwarg).
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { SILENT_LOGGER } from '../../src/common/index.js';
import { engineSlice, httpServerSlice, loadModelConfig, parseServerArgs } from '../../src/config/index.js';
import { Engine } from '../../src/engine/index.js';
import { SCRIPTED_ARCHITECTURE, ScriptedModel } from '../../src/models/index.js';
import { BuilderChatPrompt, HttpServer, ParserChatOutput } from '../../src/server/index.js';
import { ChatPromptBuilder, loadTokenizer, tinyTokenizerSpec, writeTinyTokenizer } from '../../src/tokenizer/index.js';
import type { ChatRequestLike, TinyTokenizerFamily, Tokenizer } from '../../src/tokenizer/index.js';
import { FIXTURES_DIR, NEEDS_SHARED, REPO_ROOT, SHARED_MISSING } from '../helpers/paths.js';
import { SEED_WEATHER_TOOL } from '../helpers/seed_tools.js';

interface Script {
  /** Text whose tokens must appear in the prompt for this script to be chosen ('' = always). */
  when: string;
  output: string;
}

interface Running {
  client: OpenAI;
  close(): Promise<void>;
}

const tmpDirs: string[] = [];
const running: Running[] = [];

/**
 * Writes a scripted checkpoint (family tokenizer + optional template + config.json with the scripts as token ids)
 * and serves it in-process with the given --tool-call-parser / --reasoning-parser.
 */
async function serveScripted(opts: {
  family: TinyTokenizerFamily;
  chatTemplate?: string;
  serveArgs: string[];
  afterTexts: string[];
  scripts: Script[];
  /** Requests whose rendered prompts must end with one of afterTexts (self-check of the script markers). */
  probes: ChatRequestLike[];
}): Promise<Running & { tokenizer: Tokenizer }> {
  const dir = mkdtempSync(join(tmpdir(), 'tsglang-scripted-'));
  tmpDirs.push(dir);
  writeTinyTokenizer(dir, opts.family);
  if (opts.chatTemplate) copyFileSync(opts.chatTemplate, join(dir, 'chat_template.jinja'));
  const tokenizer = loadTokenizer(dir);
  const enc = (s: string): number[] => tokenizer.encode(s, { addSpecialTokens: false });
  const spec = tinyTokenizerSpec(opts.family);
  const config = {
    architectures: [SCRIPTED_ARCHITECTURE],
    model_type: 'tsglang_scripted',
    vocab_size: spec.vocabSize,
    hidden_size: 8,
    num_hidden_layers: 1,
    num_attention_heads: 1,
    max_position_embeddings: 8192,
    bos_token_id: spec.bosTokenId,
    eos_token_id: spec.eosTokenId,
    tsglang_script: { after: opts.afterTexts.map(enc), scripts: opts.scripts.map((s) => ({ when: s.when ? enc(s.when) : [], output: enc(s.output) })) },
  };
  writeFileSync(join(dir, 'config.json'), JSON.stringify(config));

  const { args } = parseServerArgs(['--model-path', dir, ...opts.serveArgs, '--max-total-tokens', '65536', '--skip-server-warmup']);
  const builder = ChatPromptBuilder.fromModelDir(dir, { chatTemplate: args.chatTemplate, toolCallParser: args.toolCallParser });
  for (const probe of opts.probes) {
    const ids = builder.build(probe).segments.flatMap(enc);
    const ok = config.tsglang_script.after.some((tail) => tail.length <= ids.length && tail.every((t, i) => ids[ids.length - tail.length + i] === t));
    assert.ok(ok, `prompt of ${JSON.stringify(probe.messages)} does not end with a scripted generation tail`);
  }
  const modelConfig = loadModelConfig(dir, {});
  const engine = await Engine.create({ ...engineSlice(args, dir), useWorkerThread: false }, SILENT_LOGGER, {
    model: new ScriptedModel(modelConfig),
    architecture: SCRIPTED_ARCHITECTURE,
    vocabSize: spec.vocabSize,
    maxPositionEmbeddings: 8192,
    eosTokenIds: [spec.eosTokenId],
  });
  const server = new HttpServer({
    engine,
    tokenizer: engine.tokenizer,
    config: httpServerSlice(args, 'scripted'),
    chatPrompt: new BuilderChatPrompt(builder),
    chatOutput: new ParserChatOutput(args.reasoningParser, args.toolCallParser),
    modelFacts: { modelType: 'tsglang_scripted', architectures: [SCRIPTED_ARCHITECTURE] },
    serverArgs: {},
    metrics: null,
    logger: SILENT_LOGGER,
    version: 'test',
  });
  const port = await server.listen('127.0.0.1', 0);
  server.setReady(true);
  const r = {
    tokenizer,
    client: new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'EMPTY', maxRetries: 0 }),
    close: async () => {
      await server.close();
      await engine.shutdown();
    },
  };
  running.push(r);
  return r;
}

const WEATHER_TOOLS: OpenAI.Chat.Completions.ChatCompletionTool[] = [SEED_WEATHER_TOOL];
const ASK_WEATHER = "What's the weather in Beijing?";
const TOOL_RESULT = 'The weather in Beijing is 22°C and sunny.';
const ROUND_TRIP: OpenAI.Chat.Completions.ChatCompletionMessageParam[] = [
  { role: 'user', content: ASK_WEATHER },
  {
    role: 'assistant',
    content: null,
    tool_calls: [{ id: 'call_123', type: 'function', function: { name: 'get_weather', arguments: '{"location": "Beijing", "unit": "celsius"}' } }],
  },
  { role: 'tool', tool_call_id: 'call_123', content: TOOL_RESULT },
];

/** Collects a streamed chat completion: content, reasoning, per-index tool calls, finish reason, first content delta. */
async function collect(stream: AsyncIterable<OpenAI.Chat.Completions.ChatCompletionChunk>) {
  let content = '';
  let reasoning = '';
  let firstContent: string | null = null;
  let finish: string | null = null;
  const calls = new Map<number, { id: string | null; name: string; arguments: string }>();
  const contentDeltas: string[] = [];
  for await (const chunk of stream) {
    const choice = chunk.choices[0];
    if (!choice) continue;
    const d = choice.delta as typeof choice.delta & { reasoning_content?: string | null };
    if (d.content) {
      content += d.content;
      contentDeltas.push(d.content);
      firstContent ??= d.content;
    }
    if (d.reasoning_content) reasoning += d.reasoning_content;
    for (const tc of d.tool_calls ?? []) {
      const c = calls.get(tc.index) ?? { id: null, name: '', arguments: '' };
      if (tc.id) c.id = tc.id;
      if (tc.function?.name) c.name = tc.function.name;
      if (tc.function?.arguments) c.arguments += tc.function.arguments;
      calls.set(tc.index, c);
    }
    if (choice.finish_reason) finish = choice.finish_reason;
  }
  return { content, reasoning, firstContent, finish, calls: [...calls.values()], contentDeltas };
}

let minimax: Running & { tokenizer: Tokenizer };
let deepseek: Running & { tokenizer: Tokenizer };
let deepseekExp: Running & { tokenizer: Tokenizer };
const J32_TEMPLATE = join(REPO_ROOT, 'examples', 'chat_template', 'tool_chat_template_deepseekv32.jinja');

const MM_THINK = 'The user asks for 15% of 240. 0.15 × 240 = 36.\n</think>\n\n';
const MM_ANSWER = '**Step-by-step**\n15% = 0.15, and 240 × 0.15 = **36**.';
const MM_CALL_THINK = 'I need the weather tool.\n</think>\n\n';
const MM_CALL = '<minimax:tool_call>\n<invoke name="get_weather">\n<parameter name="location">Beijing</parameter>\n<parameter name="unit">celsius</parameter>\n</invoke>\n</minimax:tool_call>';
const MM_FINAL = 'Done.\n</think>\n\nThe weather in Beijing is currently 22°C and sunny.';

const DS_THINK = 'The user is asking about the weather in Beijing. I should call get_weather with location="Beijing".';
const DS_CALL = '\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name="get_weather">\n<｜DSML｜parameter name="location" string="true">Beijing</｜DSML｜parameter>\n<｜DSML｜parameter name="unit" string="true">celsius</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>';
const DS_MATH_THINK = 'To solve this problem, I need to calculate 15% of 240.\nStep 1: 15% = 0.15\nStep 2: 240 × 0.15 = 36';
const DS_MATH_ANSWER = '\n\nThe answer is 36.';
const DS_FINAL = 'The weather in Beijing is currently 22°C and sunny.';
const V31_CALL = '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"location": "Beijing", "unit": "celsius"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>';

before(async () => {
  if (SHARED_MISSING !== null) return; // its tests skip; test/shared_dir.test reports the missing folder
  minimax = await serveScripted({
    family: 'minimax-m2',
    chatTemplate: join(FIXTURES_DIR, 'tiny-minimax-m2', 'chat_template.jinja'),
    serveArgs: ['--tool-call-parser', 'minimax-m2', '--reasoning-parser', 'minimax-append-think'],
    afterTexts: [']~b]ai\n<think>\n'],
    scripts: [
      { when: ']~b]tool', output: MM_FINAL },
      { when: 'weather', output: MM_CALL_THINK + MM_CALL },
      { when: '', output: MM_THINK + MM_ANSWER },
    ],
    probes: [{ messages: [{ role: 'user', content: ASK_WEATHER }], tools: WEATHER_TOOLS }, { messages: ROUND_TRIP }],
  });
  deepseek = await serveScripted({
    family: 'deepseek-v32',
    serveArgs: ['--tool-call-parser', 'deepseekv32', '--reasoning-parser', 'deepseek-v3'],
    afterTexts: ['<｜Assistant｜><think>', '<｜Assistant｜></think>', '</function_results>\n\n</think>', '</function_results>\n\n<think>'],
    scripts: [
      { when: '22°C', output: DS_FINAL },
      { when: 'weather', output: DS_THINK + '</think>' + DS_CALL },
      { when: '', output: DS_MATH_THINK + '</think>' + DS_MATH_ANSWER },
    ],
    probes: [
      { messages: [{ role: 'user', content: ASK_WEATHER }], tools: WEATHER_TOOLS, chat_template_kwargs: { thinking: true } },
      { messages: ROUND_TRIP },
    ],
  });
  deepseekExp = await serveScripted({
    family: 'deepseek-v32',
    serveArgs: ['--tool-call-parser', 'deepseekv31', '--reasoning-parser', 'deepseek-v3', '--chat-template', J32_TEMPLATE],
    afterTexts: ['<｜Assistant｜>      <think>', '<｜Assistant｜>      </think>', '<｜tool▁output▁end｜>'],
    scripts: [
      { when: '<｜tool▁output▁end｜>', output: DS_FINAL },
      { when: 'weather', output: DS_THINK + '</think>' + V31_CALL },
    ],
    probes: [
      { messages: [{ role: 'user', content: ASK_WEATHER }], tools: WEATHER_TOOLS, chat_template_kwargs: { thinking: true } },
      { messages: ROUND_TRIP },
    ],
  });
});

after(async () => {
  for (const r of running) await r.close();
  for (const d of tmpDirs) rmSync(d, { recursive: true, force: true });
});

test('MiniMax + minimax-append-think: the seed think-tag splitter loop separates thinking from content', NEEDS_SHARED, async () => {
  const stream = await minimax.client.chat.completions.create({
    model: 'scripted',
    messages: [{ role: 'user', content: 'Solve this problem step by step: What is 15% of 240?' }],
    max_tokens: 2048,
    stream: true,
  });
  // The seed document's client loop, in TypeScript.
  let inThink = false;
  let buffer = '';
  let thinking = '';
  let answer = '';
  const got = await collect(stream);
  for (const piece of got.contentDeltas) {
    buffer += piece;
    while (buffer) {
      if (inThink) {
        const end = buffer.indexOf('</think>');
        if (end !== -1) {
          thinking += buffer.slice(0, end);
          buffer = buffer.slice(end + '</think>'.length);
          inThink = false;
        } else {
          thinking += buffer;
          buffer = '';
        }
      } else {
        const start = buffer.indexOf('<think>');
        if (start !== -1) {
          answer += buffer.slice(0, start);
          buffer = buffer.slice(start + '<think>'.length);
          inThink = true;
        } else {
          answer += buffer;
          buffer = '';
        }
      }
    }
  }
  assert.ok(got.firstContent?.startsWith('<think>'), `first content delta: ${JSON.stringify(got.firstContent)}`);
  assert.ok(got.contentDeltas.length > 3, 'content arrives in several deltas');
  assert.equal(got.reasoning, '');
  assert.equal(thinking, MM_THINK.replace('</think>\n\n', ''));
  assert.equal(answer, '\n\n' + MM_ANSWER);
  assert.equal(got.finish, 'stop');
  const one = await minimax.client.chat.completions.create({ model: 'scripted', messages: [{ role: 'user', content: 'What is 15% of 240?' }] });
  assert.equal(one.choices[0].message.content, '<think>' + MM_THINK + MM_ANSWER);
});

test('MiniMax + minimax-m2: get_weather call (non-streaming and streaming), then the role: tool round trip', NEEDS_SHARED, async () => {
  const r = await minimax.client.chat.completions.create({ model: 'scripted', messages: [{ role: 'user', content: ASK_WEATHER }], tools: WEATHER_TOOLS });
  const choice = r.choices[0];
  assert.equal(choice.finish_reason, 'tool_calls');
  assert.equal(choice.message.content, '<think>' + MM_CALL_THINK);
  const calls = choice.message.tool_calls ?? [];
  assert.equal(calls.length, 1);
  const call = calls[0] as OpenAI.Chat.Completions.ChatCompletionMessageFunctionToolCall;
  assert.match(call.id, /^call_[0-9a-f]{24}$/);
  assert.equal(call.function.name, 'get_weather');
  assert.equal(call.function.arguments, '{"location": "Beijing", "unit": "celsius"}');

  const s = await collect(await minimax.client.chat.completions.create({ model: 'scripted', messages: [{ role: 'user', content: ASK_WEATHER }], tools: WEATHER_TOOLS, stream: true }));
  assert.equal(s.finish, 'tool_calls');
  assert.equal(s.content, '<think>' + MM_CALL_THINK);
  assert.deepEqual(s.calls.map((c) => [c.name, JSON.parse(c.arguments)]), [['get_weather', { location: 'Beijing', unit: 'celsius' }]]);
  assert.match(s.calls[0].id ?? '', /^call_/);

  const final = await minimax.client.chat.completions.create({ model: 'scripted', messages: ROUND_TRIP });
  assert.equal(final.choices[0].message.content, '<think>' + MM_FINAL);
  assert.equal(final.choices[0].finish_reason, 'stop');
});

test('DeepSeek-V3.2 + deepseek-v3 reasoning: thinking kwarg splits reasoning_content (streaming and not)', NEEDS_SHARED, async () => {
  const req = { model: 'scripted', messages: [{ role: 'user' as const, content: 'Solve this problem step by step: What is 15% of 240?' }], temperature: 0.7 };
  const s = await collect(await deepseek.client.chat.completions.create({ ...req, stream: true, chat_template_kwargs: { thinking: true } } as OpenAI.Chat.Completions.ChatCompletionCreateParamsStreaming));
  assert.equal(s.reasoning, DS_MATH_THINK);
  assert.equal(s.content, DS_MATH_ANSWER);
  const one = await deepseek.client.chat.completions.create({ ...req, chat_template_kwargs: { thinking: true } } as OpenAI.Chat.Completions.ChatCompletionCreateParamsNonStreaming);
  const msg = one.choices[0].message as typeof one.choices[0]['message'] & { reasoning_content?: string | null };
  assert.equal(msg.reasoning_content, DS_MATH_THINK);
  assert.equal(msg.content, DS_MATH_ANSWER);
});

test('DeepSeek-V3.2 + deepseekv32: DSML get_weather call with thinking, streamed per the seed loop, then the tool round trip', NEEDS_SHARED, async () => {
  const s = await collect(
    await deepseek.client.chat.completions.create({
      model: 'scripted',
      messages: [{ role: 'user', content: ASK_WEATHER }],
      tools: WEATHER_TOOLS,
      temperature: 0.7,
      stream: true,
      chat_template_kwargs: { thinking: true },
    } as OpenAI.Chat.Completions.ChatCompletionCreateParamsStreaming),
  );
  assert.equal(s.reasoning, DS_THINK);
  assert.equal(s.content.trim(), '');
  assert.equal(s.finish, 'tool_calls');
  assert.deepEqual(s.calls.map((c) => [c.name, c.arguments]), [['get_weather', '{"location": "Beijing", "unit": "celsius"}']]);

  const final = await deepseek.client.chat.completions.create({ model: 'scripted', messages: ROUND_TRIP, temperature: 0.7 });
  assert.equal(final.choices[0].message.content, DS_FINAL);
  assert.equal(final.choices[0].finish_reason, 'stop');
});

test('DeepSeek-V3.2-Exp recipe (deepseekv31 + examples/chat_template/tool_chat_template_deepseekv32.jinja): call, then round trip', NEEDS_SHARED, async () => {
  const s = await collect(
    await deepseekExp.client.chat.completions.create({
      model: 'scripted',
      messages: [{ role: 'user', content: ASK_WEATHER }],
      tools: WEATHER_TOOLS,
      stream: true,
      chat_template_kwargs: { thinking: true },
    } as OpenAI.Chat.Completions.ChatCompletionCreateParamsStreaming),
  );
  assert.equal(s.reasoning, DS_THINK);
  assert.equal(s.finish, 'tool_calls');
  assert.deepEqual(s.calls.map((c) => [c.name, JSON.parse(c.arguments)]), [['get_weather', { location: 'Beijing', unit: 'celsius' }]]);
  const one = await deepseekExp.client.chat.completions.create({
    model: 'scripted',
    messages: [{ role: 'user', content: ASK_WEATHER }],
    tools: WEATHER_TOOLS,
    chat_template_kwargs: { thinking: true },
  } as OpenAI.Chat.Completions.ChatCompletionCreateParamsNonStreaming);
  assert.equal(one.choices[0].finish_reason, 'tool_calls');
  assert.equal((one.choices[0].message.tool_calls?.[0] as OpenAI.Chat.Completions.ChatCompletionMessageFunctionToolCall).function.arguments, '{"location": "Beijing", "unit": "celsius"}');
  const final = await deepseekExp.client.chat.completions.create({ model: 'scripted', messages: ROUND_TRIP });
  assert.equal(final.choices[0].message.content, DS_FINAL);
});
