// pyJsonLoads' string literals (delimited by indexOf and decoded by JSON.parse; malformed ones rescanned run by run)
// against the character-at-a-time literal decoder they replaced (kept below, unchanged, as the oracle): the same
// values, the same errors at the same positions, standalone and inside arrays and objects. Only the literal decoding
// changed, so the oracle is only that; the rest of the parser is the one py_json.test.ts tests.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PyFloat, PyJsonDecodeError, pyJsonLoads, type PyJson } from './py_json.js';
import { Rng } from './rng.js';

/** What the old decoder made of the literal at text[begin] (a '"'): its value and end, or Python's error and where. */
type LiteralOutcome = { value: string; end: number } | { error: string; at: number };

/** The string-literal decoder as it was before this change (py_json.ts, strings built a character at a time). */
function referenceLiteral(text: string, begin: number): LiteralOutcome {
  let i = begin + 1;
  let out = '';
  const simple: Record<string, string> = { '"': '"', '\\': '\\', '/': '/', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t' };
  for (;;) {
    if (i >= text.length) return { error: 'Unterminated string starting at', at: begin };
    const c = text[i];
    if (c === '"') return { value: out, end: i + 1 };
    if (c === '\\') {
      const e = text[i + 1];
      if (e === undefined) return { error: 'Unterminated string starting at', at: begin };
      if (e in simple) {
        out += simple[e];
        i += 2;
      } else if (e === 'u') {
        const hex = text.slice(i + 2, i + 6);
        if (!/^[0-9a-fA-F]{4}$/.test(hex)) return { error: 'Invalid \\uXXXX escape', at: i + 1 };
        out += String.fromCharCode(parseInt(hex, 16));
        i += 6;
      } else {
        return { error: 'Invalid \\escape', at: i };
      }
      continue;
    }
    if (c.charCodeAt(0) < 0x20) return { error: 'Invalid control character at', at: i };
    out += c;
    i++;
  }
}

type Outcome = { ok: true; value: PyJson } | { ok: false; message: string; pos: number };

function outcome(text: string): Outcome {
  try {
    return { ok: true, value: pyJsonLoads(text) };
  } catch (err) {
    assert.ok(err instanceof PyJsonDecodeError, String(err));
    return { ok: false, message: err.message, pos: err.pos };
  }
}

/**
 * Checks one literal (its text, closing quote included or not) alone, as an array element and as an object value
 * (where an unterminated literal runs into what follows), and, when it decodes alone, as an object key: pyJsonLoads
 * must give what the old decoder gives for the literal at that place.
 * @returns the literal's value alone, or null when it does not decode
 */
function assertSameLiteral(literal: string): string | null {
  const places: [string, string, (v: string) => PyJson][] = [
    ['', '', (v) => v],
    ['[1, ', ']', (v) => [1, v]],
    ['{"k": ', '}', (v) => ({ k: v })],
  ];
  let alone: string | null = null;
  for (const [pre, post, wrap] of places) {
    const text = pre + literal + post;
    const ref = referenceLiteral(text, pre.length);
    let want: Outcome;
    if ('error' in ref) want = { ok: false, message: new PyJsonDecodeError(ref.error, text, ref.at).message, pos: ref.at };
    else if (ref.end === pre.length + literal.length) want = { ok: true, value: wrap(ref.value) };
    else continue; // an unterminated literal closed by a quote of the context: not a literal case
    assert.deepStrictEqual(outcome(text), want, JSON.stringify(text.slice(0, 200)));
    if (pre === '' && want.ok) alone = want.value as string;
  }
  if (alone !== null) assert.deepStrictEqual(outcome(`{${literal}: 2}`), { ok: true, value: { [alone]: 2 } }, `key ${JSON.stringify(literal.slice(0, 200))}`);
  return alone;
}

/** Pieces of string contents: plain runs, every escape, \u escapes (valid, surrogate halves, bad hex), raw controls. */
const STRING_PIECES = [
  'abc', 'hello world ', 'é', '你好', '🌍', '\ud800', '\udfff', '\\"', '\\\\', '\\/', '\\b', '\\f', '\\n', '\\r', '\\t',
  '\\u00e9', '\\u0000', '\\uD83C\\uDF0D', '\\ud83c', '\\udf0d', '\\uFFFF', '\\u12', '\\uZZ12', '\\x', '\\\'', '\u0001', '\t', '\n', '\u007f',
];

/** A random literal: up to maxPieces pieces, unterminated one time in 20. */
function randomString(rng: Rng, maxPieces: number): string {
  let s = '"';
  const n = rng.nextInt(maxPieces);
  for (let k = 0; k < n; k++) s += STRING_PIECES[rng.nextInt(STRING_PIECES.length)].repeat(1 + rng.nextInt(3));
  return s + (rng.nextInt(20) === 0 ? '' : '"');
}

test('pyJsonLoads string literals = the old decoder (escapes, surrogates, controls, unterminated), in every place', () => {
  const cases = [
    '"é\\n\\u0001\\"\\\\/ ☀ 🌍"', '"\\ud83c\\udf0d \\ud83c x \\udf0d"', '"\ud800 lone \udfff"', '"a\\u00"', '"a\\u00e"', '"\\', '"abc',
    '"abc\\"', '"a\\qb"', '"tab\there"', '"\u0000"', '"\u001f"', '"\u0020"', '""', '"\\"\\""', '"\\u00e9"', '"__proto__"',
    '"' + 'x'.repeat(100_000) + '\\n' + 'y'.repeat(100_000) + '"',
  ];
  for (const literal of cases) assertSameLiteral(literal);
  assert.equal(assertSameLiteral('"' + 'long \\"prompt\\" é 🌍 '.repeat(20_000) + '"'), 'long "prompt" é 🌍 '.repeat(20_000));
  assert.ok((pyJsonLoads('[1.0]') as PyJson[])[0] instanceof PyFloat);
});

test('pyJsonLoads string literals = the old decoder on 3000 random literals (valid and broken)', () => {
  const rng = new Rng(2024);
  let valid = 0;
  for (let k = 0; k < 3000; k++) if (assertSameLiteral(randomString(rng, 8)) !== null) valid++;
  assert.ok(valid > 500, `only ${valid} valid literals: the generator should produce many`);
});
