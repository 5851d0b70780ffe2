// `tsglang parse` and `tsglang render-chat` over the shared vectors: every case through the commands' functions,
// and a few through the real binary (stdin bytes in, one JSON value out).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseModelOutput, parseParseArgs } from '../../src/cli/parse.js';
import { parseRenderChatArgs, renderChat } from '../../src/cli/render_chat.js';
import { DESIGN_DIR, FIXTURES_DIR, NEEDS_SHARED, readSharedJson, TSGLANG_BIN } from '../helpers/paths.js';
import { tempDir } from '../helpers/tmp.js';

interface ParserCase {
  id: string;
  tool_parser: string | null;
  reasoning_parser: string | null;
  request: Record<string, unknown>;
  tools: unknown[] | null;
  model_output_text: string;
  stream_chunks: string[];
  expected: { content: string | null; reasoning_content: string | null; tool_calls: { name: string; arguments: unknown }[] | null };
  applies_to: string[];
}
const parserCases = (readSharedJson<unknown>(join(DESIGN_DIR, 'vectors', 'parser-vectors.json'), { cases: [] }) as { cases: ParserCase[] }).cases;
const templateCases = (
  readSharedJson<unknown>(join(DESIGN_DIR, 'vectors', 'template-vectors.json'), { cases: [] }) as {
    cases: { id: string; model: string; messages: unknown[]; tools: unknown[] | null; kwargs: Record<string, unknown>; expected_prompt: string }[];
  }
).cases;

function argvOf(c: ParserCase): string[] {
  const argv: string[] = [];
  if (c.reasoning_parser) argv.push('--reasoning-parser', c.reasoning_parser);
  if (c.tool_parser) argv.push('--tool-call-parser', c.tool_parser);
  return argv;
}

function requestOf(c: ParserCase): Record<string, unknown> {
  const r: Record<string, unknown> = { messages: [{ role: 'user', content: 'x' }] };
  if (c.tools && c.tools.length > 0) r.tools = c.tools;
  for (const [k, v] of Object.entries(c.request)) if (v !== null) r[k] = v;
  return r;
}

function check(c: ParserCase, got: { content: string | null; reasoningContent: string | null; toolCalls: { name: string; arguments: string }[] }): void {
  const norm = (s: string | null | undefined): string => (s ?? '').trim();
  assert.equal(norm(got.content), norm(c.expected.content), `${c.id} content`);
  assert.equal(norm(got.reasoningContent), norm(c.expected.reasoning_content), `${c.id} reasoning`);
  assert.deepEqual(
    got.toolCalls.map((t) => ({ name: t.name, arguments: JSON.parse(t.arguments) as unknown })),
    c.expected.tool_calls ?? [],
    `${c.id} tool calls`,
  );
}

test('parse command functions: every parser vector, one-shot and with --chunks', NEEDS_SHARED, () => {
  for (const c of parserCases) {
    const args = parseParseArgs(argvOf(c));
    if (c.applies_to.includes('non_stream')) check(c, parseModelOutput(args, c.model_output_text, requestOf(c), null));
    if (c.applies_to.includes('stream')) check(c, parseModelOutput(args, c.model_output_text, requestOf(c), c.stream_chunks));
  }
});

test('render-chat command function: every template vector', NEEDS_SHARED, () => {
  for (const c of templateCases) {
    const dir = join(FIXTURES_DIR, c.model === 'minimax-m2' ? 'tiny-minimax-m2' : 'tiny-deepseek-v32');
    const body = JSON.stringify({ model: 'm', messages: c.messages, tools: c.tools ?? undefined, ...c.kwargs });
    if (c.id === 'tm-ds-tool-choice-none-still-renders-tools') {
      // deliberate difference (README "Structured outputs"): tool_choice none → the DeepSeek-V3.2 prompt has no tools
      assert.equal(renderChat(parseRenderChatArgs(['--model-path', dir]), body), renderChat(parseRenderChatArgs(['--model-path', dir]), JSON.stringify({ model: 'm', messages: c.messages })), c.id);
      continue;
    }
    assert.equal(renderChat(parseRenderChatArgs(['--model-path', dir]), body), c.expected_prompt, c.id);
  }
});

test('tsglang parse / render-chat binaries: stdin in, one JSON value out', NEEDS_SHARED, () => {
  const dir = tempDir('tsglang-parse-');
  const c = parserCases.find((x) => x.id === 'v32-tags-split-mid-marker') ?? parserCases[0];
  writeFileSync(join(dir, 'request.json'), JSON.stringify(requestOf(c)));
  writeFileSync(join(dir, 'chunks.json'), JSON.stringify(c.stream_chunks));
  for (const extra of [[], ['--chunks', join(dir, 'chunks.json')]]) {
    const r = spawnSync(process.execPath, [TSGLANG_BIN, 'parse', ...argvOf(c), '--request', join(dir, 'request.json'), ...extra], {
      input: Buffer.from(c.model_output_text, 'utf8'),
      encoding: 'utf8',
    });
    assert.equal(r.status, 0, r.stderr);
    const out = JSON.parse(r.stdout) as { content: string | null; reasoning_content: string | null; tool_calls: { name: string; arguments: string }[] };
    assert.deepEqual(Object.keys(out), ['content', 'reasoning_content', 'tool_calls']);
    check(c, { content: out.content, reasoningContent: out.reasoning_content, toolCalls: out.tool_calls });
  }
  const empty = spawnSync(process.execPath, [TSGLANG_BIN, 'parse'], { input: '', encoding: 'utf8' });
  assert.equal(empty.stdout.trim(), '{"content":null,"reasoning_content":null,"tool_calls":[]}');
  const bad = spawnSync(process.execPath, [TSGLANG_BIN, 'parse', '--tool-call-parser', 'nope'], { input: '', encoding: 'utf8' });
  assert.equal(bad.status, 2);
  assert.match(bad.stderr, /unknown parser 'nope'/);

  const t = templateCases.find((x) => x.id === 'tm-ds-system-tools-thinking') ?? templateCases[0];
  const rc = spawnSync(process.execPath, [TSGLANG_BIN, 'render-chat', '--model-path', join(FIXTURES_DIR, 'tiny-deepseek-v32')], {
    input: JSON.stringify({ messages: t.messages, tools: t.tools, ...t.kwargs }),
    encoding: 'utf8',
  });
  assert.equal(rc.status, 0, rc.stderr);
  assert.equal(JSON.parse(rc.stdout), t.expected_prompt);
  const err = spawnSync(process.execPath, [TSGLANG_BIN, 'render-chat', '--model-path', join(FIXTURES_DIR, 'tiny-deepseek-v32')], {
    input: '{"messages": []}',
    encoding: 'utf8',
  });
  assert.equal(err.status, 1);
  assert.match(err.stderr, /Messages cannot be empty/);
  const notList = spawnSync(process.execPath, [TSGLANG_BIN, 'render-chat', '--model-path', join(FIXTURES_DIR, 'tiny-deepseek-v32')], {
    input: '{"messages": "oops"}',
    encoding: 'utf8',
  });
  assert.equal(notList.status, 1);
  assert.equal(notList.stderr, 'tsglang render-chat: messages: Input should be a valid list (a list of message objects), got string\n');
});
