// The package entry (src/index.ts) exposes the public API by name and works through it alone: flags → engine
// options, a checkpoint's config, the wire schemas, the parsers. Importing it starts nothing.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as api from '../src/index.js';
import { FIXTURES_DIR, NEEDS_SHARED } from './helpers/paths.js';

test('the entry exports the engine, launch and loader functions and the error classes', () => {
  for (const name of ['Engine', 'HttpServer', 'serve', 'main', 'loadModel', 'loadTokenizer', 'createOps', 'parseServerArgs', 'InvalidRequestError', 'ModelLoadError'] as const) {
    assert.equal(typeof api[name], 'function', name);
  }
  assert.equal(typeof api.Engine.create, 'function');
});

test('parseServerArgs → engineSlice through the entry carries the flags into the engine options', () => {
  const { args, given } = api.parseServerArgs(['--model-path', '/models/x', '--max-running-requests', '7', '--port', '31000']);
  assert.equal(args.modelPath, '/models/x');
  assert.equal(args.port, 31000);
  assert.deepEqual([...given].sort(), ['max-running-requests', 'model-path', 'port']);
  const slice = api.engineSlice(args, '/models/x');
  assert.equal(slice.modelPath, '/models/x');
  assert.equal(slice.maxRunningRequests, 7);
  assert.throws(() => api.parseServerArgs(['--no-such-flag']), api.InvalidRequestError);
});

test('loadModelConfig through the entry reads the fixture checkpoint config.json', NEEDS_SHARED, () => {
  const dir = join(FIXTURES_DIR, 'tiny-minimax-m2');
  const raw = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8')) as { vocab_size: number; hidden_size: number; architectures: string[] };
  const cfg = api.loadModelConfig(dir);
  assert.equal(cfg.vocabSize, raw.vocab_size);
  assert.equal(cfg.hiddenSize, raw.hidden_size);
  assert.ok(api.getModelDefinition(cfg).architectures.includes(raw.architectures[0]));
});

test('wire schema and parser through the entry', () => {
  const body = api.parseWire(api.ChatCompletionRequestSchema, { messages: [{ role: 'user', content: 'hi' }], temperature: '0.5' });
  assert.equal(body.temperature, 0.5);
  assert.equal(body.model, 'default');
  assert.throws(() => api.parseWire(api.ChatCompletionRequestSchema, { messages: 'x' }), /messages/);
  const parsed = api.parseChatOutput('<think>a</think>b', { reasoningParser: 'qwen3', toolCallParser: null, tools: undefined, toolChoice: undefined, separateReasoning: true, streamReasoning: true, chatTemplateKwargs: null });
  assert.equal(parsed.reasoningContent, 'a');
  assert.equal(parsed.content, 'b');
});
