// Parser vectors (../shared/design/vectors/parser-vectors.json): every case, non-streaming and with its own
// chunking, as its `applies_to` says, compared as its `rules` say; plus a property test feeding every case in
// random chunkings (and one UTF-16 unit / one code point at a time) that checks streaming ≡ non-streaming exactly.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Rng } from '../../src/common/index.js';
import { ChatOutputProcessor, aggregateChatDeltas, parseChatOutput } from '../../src/parsers/index.js';
import type { ChatParseOptions, ParsedChatOutput } from '../../src/parsers/index.js';
import { DESIGN_DIR, NEEDS_SHARED, readSharedJson } from '../helpers/paths.js';

interface ParserCase {
  id: string;
  tool_parser: string | null;
  reasoning_parser: string | null;
  request: { separate_reasoning?: boolean; stream_reasoning?: boolean; tool_choice?: unknown; chat_template_kwargs?: Record<string, unknown> };
  tools: unknown[] | null;
  model_output_text: string;
  stream_chunks: string[];
  expected: { content: string | null; reasoning_content: string | null; tool_calls: { name: string; arguments: unknown }[] | null };
  applies_to: string[];
}

const vectors = readSharedJson<unknown>(join(DESIGN_DIR, 'vectors', 'parser-vectors.json'), { cases: [] }) as { cases: ParserCase[] };

function optionsOf(c: ParserCase): ChatParseOptions {
  let n = 0;
  return {
    reasoningParser: c.reasoning_parser,
    toolCallParser: c.tool_parser,
    tools: c.tools,
    toolChoice: c.request.tool_choice,
    separateReasoning: c.request.separate_reasoning,
    streamReasoning: c.request.stream_reasoning,
    chatTemplateKwargs: c.request.chat_template_kwargs ?? null,
    newCallId: () => `call_${String(n++).padStart(24, '0')}`,
  };
}

function streamed(c: ParserCase, chunks: readonly string[]): ParsedChatOutput {
  const p = new ChatOutputProcessor(optionsOf(c));
  const deltas = chunks.flatMap((ch) => p.push(ch));
  deltas.push(...p.finish());
  return aggregateChatDeltas(deltas);
}

/** The vector file's comparison rules (trimmed text, null ≡ "" ≡ absent, arguments as parsed JSON). */
function assertMatches(got: ParsedChatOutput, c: ParserCase, mode: string): void {
  const norm = (s: string | null | undefined): string => (s ?? '').trim();
  assert.equal(norm(got.content), norm(c.expected.content), `${c.id} [${mode}] content`);
  assert.equal(norm(got.reasoningContent), norm(c.expected.reasoning_content), `${c.id} [${mode}] reasoning_content`);
  const want = c.expected.tool_calls ?? [];
  assert.equal(got.toolCalls.length, want.length, `${c.id} [${mode}] number of tool calls`);
  want.forEach((w, i) => {
    assert.equal(got.toolCalls[i].name, w.name, `${c.id} [${mode}] call ${i} name`);
    assert.deepEqual(JSON.parse(got.toolCalls[i].arguments), w.arguments, `${c.id} [${mode}] call ${i} arguments`);
    assert.equal(got.toolCalls[i].index, i, `${c.id} [${mode}] call ${i} index`);
    assert.match(got.toolCalls[i].id, /^call_/, `${c.id} [${mode}] call ${i} id`);
  });
}

test('parser vectors file is the expected format', NEEDS_SHARED, () => {
  assert.ok(vectors.cases.length >= 51);
  for (const c of vectors.cases) assert.equal(c.stream_chunks.join(''), c.model_output_text, `${c.id}: chunks concatenate to the output`);
});

for (const c of vectors.cases) {
  test(`parser vector ${c.id}`, NEEDS_SHARED, () => {
    if (c.applies_to.includes('non_stream')) assertMatches(parseChatOutput(c.model_output_text, optionsOf(c)), c, 'non_stream');
    if (c.applies_to.includes('stream')) {
      assertMatches(streamed(c, c.stream_chunks), c, 'stream: vector chunks');
      assertMatches(streamed(c, [...c.model_output_text]), c, 'stream: one code point at a time');
    }
  });
}

/** Splits `text` at random UTF-16 offsets (surrogate pairs may be split: the parsers must not care). */
function randomChunks(text: string, rng: Rng, maxLen: number): string[] {
  const out: string[] = [];
  let i = 0;
  while (i < text.length) {
    const n = 1 + rng.nextInt(maxLen);
    out.push(text.slice(i, i + n));
    i += n;
  }
  return out;
}

test('property: streaming ≡ non-streaming for random chunkings of every vector', NEEDS_SHARED, () => {
  const rng = new Rng(20261129);
  for (const c of vectors.cases) {
    const oneShot = parseChatOutput(c.model_output_text, optionsOf(c));
    const chunkings: string[][] = [
      c.model_output_text.split(''), // one UTF-16 unit at a time
      [...c.model_output_text], // one code point at a time
      c.stream_chunks,
      ['', c.model_output_text, ''],
    ];
    for (let k = 0; k < 40; k++) chunkings.push(randomChunks(c.model_output_text, rng, 1 + (k % 12)));
    for (const chunks of chunkings) {
      const got = streamed(c, chunks);
      assert.deepEqual(got, oneShot, `${c.id}: chunking ${JSON.stringify(chunks)}`);
    }
  }
});

test('streaming is truly incremental: prose is released before the end of generation', NEEDS_SHARED, () => {
  // Text that can no longer start a tag must come out with the push that completes it, not at finish().
  for (const c of vectors.cases) {
    const p = new ChatOutputProcessor(optionsOf(c));
    const before = [...c.model_output_text].flatMap((ch) => p.push(ch));
    const atEnd = p.finish();
    const streamedText = before.map((d) => (d.content ?? '') + (d.reasoningContent ?? '')).join('');
    const heldText = atEnd.map((d) => (d.content ?? '') + (d.reasoningContent ?? '')).join('');
    // At most a tag prefix or a whitespace run may be held to the end.
    assert.ok(heldText.trim().length <= '</think>'.length, `${c.id}: held back to the end: ${JSON.stringify(heldText)}`);
    if (c.expected.content && c.expected.content.trim().length > 10 && c.reasoning_parser !== 'minimax-append-think') {
      assert.ok(streamedText.length > 0, `${c.id}: nothing streamed before finish()`);
    }
  }
});
