import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { writeTinyTokenizer, tinyTokenizerSpec, TSGLANG_MINIMAX_CHAT_TEMPLATE } from './tiny_tokenizer.js';
import { loadTokenizer } from './tokenizer.js';
import { ChatPromptBuilder } from './chat_template.js';
import { DESIGN_DIR, NEEDS_SHARED } from '../../test/helpers/paths.js';
import { tempDir } from '../../test/helpers/tmp.js';

test('minimax-m2 tiny tokenizer: DeepSeek-V3 BPE + MiniMax special tokens, ids agree with config overrides', () => {
  const dir = tempDir('tsglang-tinytok-');
  const files = writeTinyTokenizer(dir, 'minimax-m2');
  assert.deepEqual(files.sort(), ['chat_template.jinja', 'generation_config.json', 'tokenizer.json', 'tokenizer_config.json']);
  const spec = tinyTokenizerSpec('minimax-m2');
  const tok = loadTokenizer(dir);
  assert.equal(tok.bosTokenId, spec.bosTokenId);
  assert.deepEqual(tok.eosTokenIds, [spec.eosTokenId]);
  assert.equal(tok.tokenToId('[e~['), spec.eosTokenId);
  assert.ok(spec.vocabSize >= tok.vocabSize && spec.vocabSize % 64 === 0);
  assert.equal(tok.addBosToken, false);
  // special turn markers are single special ids; think/tool-call tags single non-special ids (kept in the text)
  const ids = tok.encode(']~!b[]~b]user\nhi[e~[\n]~b]ai\n<think>\nx</think><minimax:tool_call>');
  for (const s of [']~!b[', ']~b]', '[e~[', '<think>', '</think>', '<minimax:tool_call>']) assert.ok(ids.includes(tok.tokenToId(s) as number), s);
  assert.equal(tok.isSpecialToken(tok.tokenToId(']~b]') as number), true);
  assert.equal(tok.isSpecialToken(tok.tokenToId('<think>') as number), false);
  assert.equal(tok.decode(ids), 'user\nhi\nai\n<think>\nx</think><minimax:tool_call>');
  assert.equal(readFileSync(join(dir, 'chat_template.jinja'), 'utf8'), TSGLANG_MINIMAX_CHAT_TEMPLATE);
  // deterministic bytes
  const dir2 = tempDir('tsglang-tinytok-');
  writeTinyTokenizer(dir2, 'minimax-m2');
  for (const f of files) assert.ok(readFileSync(join(dir, f)).equals(readFileSync(join(dir2, f))), f);
});

test('our MiniMax-format template renders the MiniMax-M2 prompt vectors without tools exactly', NEEDS_SHARED, () => {
  const dir = tempDir('tsglang-tinytok-');
  writeTinyTokenizer(dir, 'minimax-m2');
  const builder = ChatPromptBuilder.fromModelDir(dir, { architectures: ['MiniMaxM2ForCausalLM'] });
  const vectors = JSON.parse(readFileSync(join(DESIGN_DIR, 'vectors', 'template-vectors.json'), 'utf8')) as {
    cases: { id: string; model: string; messages: unknown[]; tools: unknown[]; expected_prompt: string }[];
  };
  const plain = vectors.cases.filter((c) => c.model === 'minimax-m2' && (!c.tools || c.tools.length === 0));
  assert.ok(plain.length >= 2);
  for (const c of plain) assert.equal(builder.build({ messages: c.messages }).text, c.expected_prompt, c.id);
});

test('deepseek families: V3.2 renames the think placeholders and has no Jinja template; V3 keeps its template', () => {
  const v32 = tempDir('tsglang-tinytok-');
  writeTinyTokenizer(v32, 'deepseek-v32');
  const t32 = loadTokenizer(v32);
  assert.equal(t32.tokenToId('<think>'), 128798);
  assert.equal(t32.tokenToId('</think>'), 128799);
  assert.equal(t32.isSpecialToken(128798), false);
  assert.equal(t32.chatTemplate, null);
  assert.equal(existsSync(join(v32, 'chat_template.jinja')), false);
  assert.deepEqual(tinyTokenizerSpec('deepseek-v32').configOverrides, { vocab_size: 129280, bos_token_id: 0, eos_token_id: 1 });
  const v3 = tempDir('tsglang-tinytok-');
  writeTinyTokenizer(v3, 'deepseek-v3');
  const t3 = loadTokenizer(v3);
  assert.ok(t3.chatTemplate?.includes('<｜Assistant｜>'));
  assert.equal(t3.encode('hi')[0], 0);
});
