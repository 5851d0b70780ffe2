// pyJsonLoads (literals delimited by indexOf and decoded by JSON.parse; malformed ones rescanned run by run) against
// the character-at-a-time decoder it replaced (kept below, unchanged, as the oracle): the same values, the same key
// order, the same errors at the same positions.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PyFloat, PyJsonDecodeError, pyJsonDumps, pyJsonLoads, type PyJson } from './py_json.js';
import { Rng } from './rng.js';

const WS = new Set([' ', '\t', '\n', '\r']);

/** The decoder as it was before this change (py_json.ts pyJsonRawDecode, strings built a character at a time). */
function referenceRawDecode(text: string, start = 0): { value: PyJson; end: number } {
  let i = start;
  const skipWs = (): void => {
    while (i < text.length && WS.has(text[i])) i++;
  };
  const fail = (msg: string, at = i): never => {
    throw new PyJsonDecodeError(msg, text, at);
  };
  const parseString = (): string => {
    // i at the opening quote
    const begin = i;
    i++;
    let out = '';
    for (;;) {
      if (i >= text.length) fail('Unterminated string starting at', begin);
      const c = text[i];
      if (c === '"') {
        i++;
        return out;
      }
      if (c === '\\') {
        const e = text[i + 1];
        if (e === undefined) fail('Unterminated string starting at', begin);
        const simple: Record<string, string> = { '"': '"', '\\': '\\', '/': '/', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t' };
        if (e in simple) {
          out += simple[e];
          i += 2;
        } else if (e === 'u') {
          const hex = text.slice(i + 2, i + 6);
          if (!/^[0-9a-fA-F]{4}$/.test(hex)) fail('Invalid \\uXXXX escape', i + 1);
          out += String.fromCharCode(parseInt(hex, 16));
          i += 6;
        } else {
          fail('Invalid \\escape', i);
        }
        continue;
      }
      if (c.charCodeAt(0) < 0x20) fail('Invalid control character at', i);
      out += c;
      i++;
    }
  };
  const parseValue = (): PyJson => {
    skipWs();
    const c = text[i];
    if (c === '"') return parseString();
    if (c === '{') {
      i++;
      const obj: Record<string, PyJson> = {};
      skipWs();
      if (text[i] === '}') {
        i++;
        return obj;
      }
      for (;;) {
        skipWs();
        if (text[i] !== '"') fail('Expecting property name enclosed in double quotes');
        const key = parseString();
        skipWs();
        if (text[i] !== ':') fail("Expecting ':' delimiter");
        i++;
        const val = parseValue();
        if (key === '__proto__') Object.defineProperty(obj, key, { value: val, enumerable: true, writable: true, configurable: true });
        else obj[key] = val;
        skipWs();
        if (text[i] === ',') {
          i++;
          continue;
        }
        if (text[i] === '}') {
          i++;
          return obj;
        }
        fail("Expecting ',' delimiter");
      }
    }
    if (c === '[') {
      i++;
      const arr: PyJson[] = [];
      skipWs();
      if (text[i] === ']') {
        i++;
        return arr;
      }
      for (;;) {
        arr.push(parseValue());
        skipWs();
        if (text[i] === ',') {
          i++;
          continue;
        }
        if (text[i] === ']') {
          i++;
          return arr;
        }
        fail("Expecting ',' delimiter");
      }
    }
    if (text.startsWith('null', i)) return (i += 4), null;
    if (text.startsWith('true', i)) return (i += 4), true;
    if (text.startsWith('false', i)) return (i += 5), false;
    if (text.startsWith('NaN', i)) return (i += 3), new PyFloat(NaN);
    if (text.startsWith('Infinity', i)) return (i += 8), new PyFloat(Infinity);
    if (text.startsWith('-Infinity', i)) return (i += 9), new PyFloat(-Infinity);
    const m = /^-?(?:0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)?/.exec(text.slice(i, i + 400));
    if (!m) fail('Expecting value');
    const lit = m![0];
    i += lit.length;
    if (m![1] !== undefined || m![2] !== undefined) return new PyFloat(Number(lit));
    const n = Number(lit);
    return Number.isSafeInteger(n) ? (n === 0 ? 0 : n) : BigInt(lit);
  };
  const value = parseValue();
  return { value, end: i };
}

function referenceLoads(text: string): PyJson {
  const { value, end } = referenceRawDecode(text, 0);
  let i = end;
  while (i < text.length && WS.has(text[i])) i++;
  if (i !== text.length) throw new PyJsonDecodeError('Extra data', text, i);
  return value;
}

type Outcome = { ok: true; value: PyJson; dumped: string } | { ok: false; message: string; pos: number };

function outcome(loads: (t: string) => PyJson, text: string): Outcome {
  try {
    const value = loads(text);
    return { ok: true, value, dumped: pyJsonDumps(value, { ensureAscii: true }) };
  } catch (err) {
    assert.ok(err instanceof PyJsonDecodeError, String(err));
    return { ok: false, message: err.message, pos: err.pos };
  }
}

function assertSame(text: string): Outcome {
  const want = outcome(referenceLoads, text);
  const got = outcome(pyJsonLoads, text);
  assert.deepStrictEqual(got, want, JSON.stringify(text.slice(0, 200)));
  return got;
}

/** Pieces of string contents: plain runs, every escape, \u escapes (valid, surrogate halves, bad hex), raw controls. */
const STRING_PIECES = [
  'abc', 'hello world ', 'é', '你好', '🌍', '\ud800', '\udfff', '\\"', '\\\\', '\\/', '\\b', '\\f', '\\n', '\\r', '\\t',
  '\\u00e9', '\\u0000', '\\uD83C\\uDF0D', '\\ud83c', '\\udf0d', '\\uFFFF', '\\u12', '\\uZZ12', '\\x', '\\\'', '\u0001', '\t', '\n', '\u007f',
];

function randomString(rng: Rng, maxPieces: number): string {
  let s = '"';
  const n = rng.nextInt(maxPieces);
  for (let k = 0; k < n; k++) s += STRING_PIECES[rng.nextInt(STRING_PIECES.length)].repeat(1 + rng.nextInt(3));
  return s + (rng.nextInt(20) === 0 ? '' : '"');
}

const NUMBERS = ['0', '-0', '1', '-17', '1.0', '-0.5e1', '1E+400', '2.5e-3', '9007199254740993', '-123456789012345678901234567890', '01', '1.', '.5', '-', 'NaN', 'Infinity', '-Infinity'];
const WORDS = ['true', 'false', 'null', 'nul', 'True'];

function randomValue(rng: Rng, depth: number): string {
  const ws = () => [' ', '', '\n  ', '\t', '\r\n'][rng.nextInt(5)];
  const r = rng.nextInt(depth > 3 ? 4 : 7);
  if (r === 0 || r === 1) return randomString(rng, 8);
  if (r === 2) return NUMBERS[rng.nextInt(NUMBERS.length)];
  if (r === 3) return WORDS[rng.nextInt(WORDS.length)];
  if (r === 4 || r === 5) {
    const keys = ['"a"', '"b"', '"__proto__"', '"1"', '"é\\n"', randomString(rng, 3)];
    const n = rng.nextInt(4);
    const items = Array.from({ length: n }, () => ws() + keys[rng.nextInt(keys.length)] + ws() + ':' + ws() + randomValue(rng, depth + 1) + ws());
    return '{' + items.join(',') + (n === 0 ? ws() : '') + '}';
  }
  const n = rng.nextInt(4);
  return '[' + Array.from({ length: n }, () => ws() + randomValue(rng, depth + 1) + ws()).join(',') + ']';
}

test('pyJsonLoads = the old decoder on hand-picked inputs (escapes, surrogates, big numbers, nesting, errors)', () => {
  const cases = [
    '{"b": 1, "a": [1.0, 2, -0.5e1, 12345678901234567890], "s": "é\\n\\u0001\\"\\\\/ ☀ 🌍", "n": null, "t": true}',
    '"\\ud83c\\udf0d \\ud83c x \\udf0d"', '"\ud800 lone \udfff"', '"a\\u00"', '"a\\u00e"', '"\\', '"abc', '"abc\\"', '"a\\qb"',
    '"tab\there"', '"\u0000"', '"\u001f"', '"\u0020"', '""', '"\\"\\""', '{"a": {"b": {"c": [[[{"d": "\\u00e9"}]]]}}}',
    '{"a": 1, "b": 2, "a": 3}', '{"__proto__": {"x": 1}}', '{"1": "x", "a": "y"}', '[1, 2,]', '{"a" 1}', '{"a": 1,}', '  "x"  ', '"x" y',
    '123456789012345678901234567890', '1e999', '-0.0', '[NaN, Infinity, -Infinity]', '', ' ', '\u00a0"x"', '"' + 'x'.repeat(100_000) + '\\n' + 'y'.repeat(100_000) + '"',
  ];
  for (const text of cases) assertSame(text);
  const big = assertSame('{"messages": [{"role": "user", "content": "' + 'long \\"prompt\\" é 🌍 '.repeat(20_000) + '"}], "tools": [{"type": "function"}]}');
  assert.ok(big.ok);
  assert.equal((big.value as { messages: { content: string }[] }).messages[0].content, 'long "prompt" é 🌍 '.repeat(20_000));
  assert.ok((pyJsonLoads('[1.0]') as PyJson[])[0] instanceof PyFloat);
});

test('pyJsonLoads = the old decoder on 3000 random texts (valid and broken)', () => {
  const rng = new Rng(2024);
  let valid = 0;
  for (let k = 0; k < 3000; k++) {
    let text = randomValue(rng, 0);
    if (rng.nextInt(10) === 0) text = text.slice(0, rng.nextInt(text.length + 1)); // truncated
    if (assertSame(text).ok) valid++;
  }
  assert.ok(valid > 500, `only ${valid} valid texts: the generator should produce many`);
});
