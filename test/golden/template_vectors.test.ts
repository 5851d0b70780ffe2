// Template vectors (../shared/design/vectors/template-vectors.json): exact prompt strings. MiniMax cases render the
// real MiniMax template of the tiny-minimax-m2 fixture; DeepSeek-V3.2 cases use the encoder (the fixture directory
// has no template). Plus: our examples/chat_template/tool_chat_template_deepseekv32.jinja against goldens rendered
// from SGLang's example template, SGLang's 400s, continue_final_message, and (when python3 + jinja2 are present)
// a cross-check of @huggingface/jinja + our number fix-up against Python jinja2 on float / non-ASCII tool schemas.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { InvalidRequestError, pyJsonDumps } from '../../src/common/index.js';
import { ChatPromptBuilder } from '../../src/tokenizer/index.js';
import type { ChatRequestLike } from '../../src/tokenizer/index.js';
import { DESIGN_DIR, FIXTURES_DIR, NEEDS_SHARED, readSharedJson, REPO_ROOT } from '../helpers/paths.js';

interface TemplateCase {
  id: string;
  model: 'minimax-m2' | 'deepseek-v3.2';
  messages: unknown[];
  tools: unknown[] | null;
  kwargs: { chat_template_kwargs?: Record<string, unknown>; tool_choice?: unknown };
  expected_prompt: string;
}

const vectors = readSharedJson<unknown>(join(DESIGN_DIR, 'vectors', 'template-vectors.json'), { cases: [] }) as { cases: TemplateCase[] };
const MINIMAX_DIR = join(FIXTURES_DIR, 'tiny-minimax-m2');
const DEEPSEEK_DIR = join(FIXTURES_DIR, 'tiny-deepseek-v32');
const minimax = ChatPromptBuilder.fromModelDir(MINIMAX_DIR);
const deepseek = ChatPromptBuilder.fromModelDir(DEEPSEEK_DIR);
const J32_PATH = join(REPO_ROOT, 'examples', 'chat_template', 'tool_chat_template_deepseekv32.jinja');

test('builders are chosen as SGLang chooses them', NEEDS_SHARED, () => {
  assert.equal(minimax.kind, 'jinja');
  assert.equal(deepseek.kind, 'dsv32'); // DeepseekV3* architecture without a chat template
  assert.equal(ChatPromptBuilder.fromModelDir(MINIMAX_DIR, { toolCallParser: 'deepseekv32' }).kind, 'dsv32');
  assert.equal(ChatPromptBuilder.fromModelDir(DEEPSEEK_DIR, { chatTemplate: J32_PATH, toolCallParser: 'deepseekv31' }).kind, 'jinja');
});

/**
 * Vectors of SGLang behaviour tsglang departs from on purpose (README "Structured outputs"): with tool_choice "none"
 * the DeepSeek-V3.2 prompt carries no tools (the official DeepSeek API's behaviour; SGLang v0.5.10 renders them).
 */
const DELIBERATE: Record<string, (c: TemplateCase) => void> = {
  'tm-ds-tool-choice-none-still-renders-tools': (c) => {
    const p = deepseek.build({ messages: c.messages, tools: c.tools, ...c.kwargs }).text;
    assert.notEqual(p, c.expected_prompt);
    assert.ok(!p.includes('get_weather') && !p.includes('DSML'), p);
    assert.equal(p, deepseek.build({ messages: c.messages }).text);
  },
};

for (const c of vectors.cases) {
  test(`template vector ${c.id}`, NEEDS_SHARED, () => {
    if (DELIBERATE[c.id]) return DELIBERATE[c.id](c);
    const request: ChatRequestLike = { messages: c.messages, tools: c.tools, ...c.kwargs };
    const builder = c.model === 'minimax-m2' ? minimax : deepseek;
    const prompt = builder.build(request);
    assert.equal(prompt.text, c.expected_prompt);
    assert.deepEqual(prompt.segments, [c.expected_prompt]);
    // The same through the raw body (lossless path the server uses).
    assert.equal(builder.build(request, { rawBody: JSON.stringify(request) }).text, c.expected_prompt);
  });
}

const j32 = JSON.parse(readFileSync(join(REPO_ROOT, 'test', 'golden', 'template_deepseekv32_exp.golden.json'), 'utf8')) as {
  cases: { request: ChatRequestLike; expected: string }[];
};
const j32Builder = ChatPromptBuilder.fromModelDir(DEEPSEEK_DIR, { chatTemplate: J32_PATH, toolCallParser: 'deepseekv31' });

test('examples/chat_template/tool_chat_template_deepseekv32.jinja renders as SGLang renders its example template', NEEDS_SHARED, () => {
  assert.ok(j32.cases.length >= 9);
  j32.cases.forEach((c, i) => assert.equal(j32Builder.build(c.request).text, c.expected, `golden case ${i}`));
});

test('deepseekv32 example template: a tool without description is a 400, tool_choice none drops the tools', NEEDS_SHARED, () => {
  const tool = { type: 'function', function: { name: 'f', parameters: { type: 'object' } } };
  assert.throws(() => j32Builder.build({ messages: [{ role: 'user', content: 'x' }], tools: [tool] }), InvalidRequestError);
  const p = j32Builder.build({ messages: [{ role: 'user', content: 'x' }], tools: [tool], tool_choice: 'none' }).text;
  assert.equal(p, '\n\n<｜begin▁of▁sentence｜><｜User｜>x    <｜Assistant｜>      </think>');
});

test("SGLang's 400s for prompt construction", NEEDS_SHARED, () => {
  const tools = [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object' } } }];
  const user = [{ role: 'user', content: 'hi' }];
  const cases: [ChatRequestLike, RegExp][] = [
    [{ messages: [] }, /Messages cannot be empty/],
    [{ messages: 'oops' } as unknown as ChatRequestLike, /^messages: Input should be a valid list \(a list of message objects\), got string$/],
    [{ messages: user, tool_choice: 'required' }, /Tools cannot be empty if tool choice is set to required/],
    [{ messages: user, tool_choice: { type: 'function', function: { name: 'x' } } }, /Tools cannot be empty if tool choice is set to a specific tool/],
    [{ messages: user, tools, tool_choice: { type: 'function', function: { name: 'nope' } } }, /Tool 'nope' not found in tools list/],
    [
      { messages: [...user, { role: 'assistant', content: '', tool_calls: [{ id: 'a', type: 'function', function: { name: 'get_weather', arguments: '{bad' } }] }] },
      /must be valid JSON/,
    ],
    [
      { messages: [...user, { role: 'assistant', content: '', tool_calls: [{ id: 'a', type: 'function', function: { name: 'get_weather', arguments: '[1]' } }] }] },
      /must be a JSON object/,
    ],
    [{ messages: [{ role: 'tool', content: 'orphan' }] }, /tool/], // MiniMax template raise_exception
  ];
  for (const [req, re] of cases) {
    assert.throws(() => minimax.build(req), (e: unknown) => e instanceof InvalidRequestError && re.test(e.message), JSON.stringify(req));
  }
  // The encoder path rejects orphan tool results too.
  assert.throws(() => deepseek.build({ messages: [{ role: 'user', content: 'q' }, { role: 'tool', content: 'r' }] }), InvalidRequestError);
});

test('continue_final_message: the last assistant text is appended raw (DeepSeek: as a second segment)', NEEDS_SHARED, () => {
  const messages = [{ role: 'user', content: 'Count:' }, { role: 'assistant', content: '1, 2,' }];
  const mm = minimax.build({ messages, continue_final_message: true });
  assert.equal(mm.text, ']~!b[]~b]system\nYou are a helpful assistant.[e~[\n]~b]user\nCount:[e~[\n]~b]ai\n<think>\n1, 2,');
  assert.deepEqual(mm.segments, [mm.text]);
  const ds = deepseek.build({ messages, continue_final_message: true });
  assert.deepEqual(ds.segments, ['<｜begin▁of▁sentence｜><｜User｜>Count:<｜Assistant｜></think>', '1, 2,']);
  // Without the flag the assistant turn is rendered as history.
  assert.equal(deepseek.build({ messages }).text, '<｜begin▁of▁sentence｜><｜User｜>Count:<｜Assistant｜></think>1, 2,<｜end▁of▁sentence｜>');
});

test('content parts: MiniMax keeps text parts (its template iterates content), DeepSeek joins them with a space', NEEDS_SHARED, () => {
  const messages = [{ role: 'user', content: [{ type: 'text', text: 'Hello' }, { type: 'text', text: 'there' }] }];
  assert.match(minimax.build({ messages }).text, /\]~b\]user\nHellothere\[e~\[/);
  assert.equal(deepseek.build({ messages }).text, '<｜begin▁of▁sentence｜><｜User｜>Hello there<｜Assistant｜></think>');
});

test("tool schemas keep Python's json.dumps spelling through the raw body (floats, non-ASCII)", NEEDS_SHARED, () => {
  const body = '{"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","description":"météo ☀","parameters":{"type":"object","properties":{"x":{"type":"number","minimum":1.0,"maximum":1e-7,"default":2.50}}}}}]}';
  const req = JSON.parse(body) as ChatRequestLike;
  const want = '{"description": "météo ☀", "name": "f", "parameters": {"type": "object", "properties": {"x": {"type": "number", "minimum": 1.0, "maximum": 1e-07, "default": 2.5}}}, "strict": false}';
  assert.ok(minimax.build(req, { rawBody: body }).text.includes(`<tool>${want}</tool>`));
  assert.ok(deepseek.build(req, { rawBody: body }).text.includes(`<functions>\n${want}\n</functions>`));
});

function python(): { ok: boolean; reason: string } {
  const r = spawnSync('python3', ['-c', 'import jinja2'], { encoding: 'utf8' });
  return r.status === 0 ? { ok: true, reason: '' } : { ok: false, reason: 'python3 with jinja2 not available' };
}

const PY_RENDER = `
import json, sys
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.ext import loopcontrols
from jinja2 import TemplateError
def raise_exception(m): raise TemplateError(m)
def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)
env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
env.filters['tojson'] = tojson
env.globals['raise_exception'] = raise_exception
job = json.loads(sys.stdin.read())
out = [env.from_string(job['template']).render(**ctx) for ctx in job['contexts']]
sys.stdout.write(json.dumps(out))
`;

test('cross-check: MiniMax rendering equals Python jinja2 (HF environment) on tricky requests', { skip: NEEDS_SHARED.skip || (python().ok ? false : python().reason) }, () => {
  const tool = (name: string, params: unknown, description?: string) => ({ type: 'function', function: { name, description, parameters: params } });
  const bodies = [
    { messages: [{ role: 'user', content: 'x' }], tools: [tool('f', { type: 'object', properties: { a: { type: 'number', minimum: 0.0, maximum: 1e16, multipleOf: 0.001 } } }, 'Ünïcødé 🌍')] },
    {
      messages: [
        { role: 'system', content: 'S' },
        { role: 'user', content: [{ type: 'text', text: 'a' }, { type: 'text', text: 'b' }] },
        { role: 'assistant', content: 'ok', reasoning_content: 'r', tool_calls: [{ id: '1', type: 'function', function: { name: 'f', arguments: '{"a": 1.0, "b": [1, 2.5e-5], "c": {"d": "é"}, "e": null, "f": true}' } }, { id: '2', type: 'function', function: { name: 'f', arguments: '{}' } }] },
        { role: 'tool', tool_call_id: '1', content: 'done' },
        { role: 'tool', tool_call_id: '1', content: [{ type: 'text', text: 'part 1' }, { type: 'text', text: 'part 2' }] },
      ],
      tools: [tool('f', { type: 'object' })],
    },
    { messages: [{ role: 'user', content: 'q1' }, { role: 'assistant', content: '<think>\nold\n</think>\n\nA1' }, { role: 'user', content: 'q2' }], tools: [tool('f', null)], tool_choice: 'none' },
  ];
  const template = readFileSync(join(MINIMAX_DIR, 'chat_template.jinja'), 'utf8');
  const contexts: string[] = [];
  const ours: string[] = [];
  for (const b of bodies) {
    const raw = JSON.stringify(b).replace('"minimum":0', '"minimum":0.0').replace('"maximum":10000000000000000', '"maximum":1e16');
    const prep = minimax.prepare(b as ChatRequestLike, { rawBody: raw });
    assert.equal(prep.kind, 'jinja');
    if (prep.kind === 'jinja') contexts.push(pyJsonDumps(prep.context, { ensureAscii: false }));
    ours.push(minimax.build(b as ChatRequestLike, { rawBody: raw }).text);
  }
  const job = `{"template": ${pyJsonDumps(template)}, "contexts": [${contexts.join(', ')}]}`;
  const r = spawnSync('python3', ['-c', PY_RENDER], { input: job, encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(ours, JSON.parse(r.stdout) as string[]);
  assert.ok(ours[0].includes('"minimum": 0.0, "maximum": 1e+16, "multipleOf": 0.001'));
});
