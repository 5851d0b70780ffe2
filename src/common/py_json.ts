// Python-compatible JSON: `json.loads` that keeps what Python keeps (float vs int literals, big ints) and
// `json.dumps` that writes what Python writes (separators, float repr, ensure_ascii escapes).
// Used wherever SGLang's output bytes come from Python's json module: tool definitions rendered into prompts
// (tokenizer/) and tool-call argument text (parsers/). Knows nothing about either.

import { InvalidRequestError } from './errors.js';

/**
 * A JSON number whose literal Python loads as `float` (it had a `.`, `e` or `E`). Kept apart from plain
 * numbers so that `1.0` is written back as `1.0`, as Python does, and not as `1`.
 */
export class PyFloat {
  constructor(readonly value: number) {}
}

/**
 * A value as Python's `json.loads` returns it. Plain `number` = Python int within ±2^53 (or any JS number from
 * elsewhere: integral ones are written as ints, others as floats); `bigint` = a larger Python int;
 * `PyFloat` = a Python float. Objects keep key insertion order, except that JS lists integer-like keys first
 * (a known limit; such property names do not occur in tool schemas in practice).
 */
export type PyJson = null | boolean | number | bigint | string | PyFloat | PyJson[] | { [key: string]: PyJson };

/** Options of {@link pyJsonDumps}, named as in Python's `json.dumps`. */
export interface PyJsonDumpsOptions {
  /** Escape every non-ASCII character as `\uXXXX` (Python default: true; SGLang/HF mostly pass false). */
  ensureAscii?: boolean;
  /** Pretty-print with this many spaces per level (Python `indent`); null = one line. */
  indent?: number | null;
  /** `[itemSeparator, keySeparator]`; default `[', ', ': ']`, or `[',', ': ']` when `indent` is set. */
  separators?: [string, string];
  /** Sort object keys (Python `sort_keys`). */
  sortKeys?: boolean;
}

/**
 * Python's `repr(float)`: shortest round-trip digits, fixed notation for decimal exponents in [-4, 16),
 * otherwise `d.ddde±XX` (at least two exponent digits); integral values keep `.0`.
 * Source: CPython `Objects/floatobject.c` (`float_repr`, format code 'r').
 * @param x the float
 * @returns e.g. `1.0`, `0.1`, `1e-05`, `1e+16`, `inf`→`Infinity` (as json.dumps writes it), `NaN`
 */
export function pyFloatRepr(x: number): string {
  if (Number.isNaN(x)) return 'NaN';
  if (x === Infinity) return 'Infinity';
  if (x === -Infinity) return '-Infinity';
  if (x === 0) return Object.is(x, -0) ? '-0.0' : '0.0';
  const sign = x < 0 ? '-' : '';
  const [mant, expText] = Math.abs(x).toExponential().split('e');
  const exp = Number(expText);
  const digits = mant.replace('.', '');
  if (exp >= -4 && exp < 16) {
    if (exp < 0) return `${sign}0.${'0'.repeat(-exp - 1)}${digits}`;
    const intPart = digits.length > exp + 1 ? digits.slice(0, exp + 1) : digits.padEnd(exp + 1, '0');
    const frac = digits.length > exp + 1 ? digits.slice(exp + 1) : '0';
    return `${sign}${intPart}.${frac}`;
  }
  const m = digits.length > 1 ? `${digits[0]}.${digits.slice(1)}` : digits;
  const e = Math.abs(exp).toString().padStart(2, '0');
  return `${sign}${m}e${exp < 0 ? '-' : '+'}${e}`;
}

/**
 * A string as a JSON string literal, escaped as Python's json encoder does: `\"`, `\\`, `\n`, `\r`, `\t`, `\b`,
 * `\f`, other control characters as `\u00xx`; with `ensureAscii` also every char outside 0x20..0x7e as
 * `\uxxxx` (UTF-16 units, so astral characters become surrogate pairs). Source: CPython `Lib/json/encoder.py`.
 * @param s the string
 * @param ensureAscii escape non-ASCII
 */
export function pyJsonString(s: string, ensureAscii = false): string {
  let out = '"';
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c === 0x22) out += '\\"';
    else if (c === 0x5c) out += '\\\\';
    else if (c === 0x0a) out += '\\n';
    else if (c === 0x0d) out += '\\r';
    else if (c === 0x09) out += '\\t';
    else if (c === 0x08) out += '\\b';
    else if (c === 0x0c) out += '\\f';
    else if (c < 0x20 || (ensureAscii && c > 0x7e)) out += '\\u' + c.toString(16).padStart(4, '0');
    else out += s[i];
  }
  return out + '"';
}

/**
 * Python's `json.dumps(value, ...)` for a {@link PyJson} value (plain JS values from `JSON.parse` work too;
 * `undefined` members are skipped like absent keys).
 * @param value the value
 * @param options Python's keyword arguments
 * @returns the JSON text, byte-identical to CPython's for the same value
 * @throws InvalidRequestError for values JSON cannot hold (functions, symbols)
 */
export function pyJsonDumps(value: unknown, options: PyJsonDumpsOptions = {}): string {
  const ensureAscii = options.ensureAscii ?? true;
  const indent = options.indent ?? null;
  const [itemSep, keySep] = options.separators ?? (indent === null ? [', ', ': '] : [',', ': ']);
  const sortKeys = options.sortKeys ?? false;

  const enc = (v: unknown, level: number): string => {
    if (v === null || v === undefined) return 'null';
    if (v === true) return 'true';
    if (v === false) return 'false';
    if (typeof v === 'string') return pyJsonString(v, ensureAscii);
    if (typeof v === 'bigint') return v.toString();
    if (typeof v === 'number') {
      if (Number.isInteger(v)) return Math.abs(v) < 1e21 ? String(v === 0 ? 0 : v) : BigInt(v).toString();
      return pyFloatRepr(v);
    }
    if (v instanceof PyFloat) return pyFloatRepr(v.value);
    const open = (items: string[], l: string, r: string): string => {
      if (items.length === 0) return l + r;
      if (indent === null) return l + items.join(itemSep) + r;
      const pad = '\n' + ' '.repeat(indent * (level + 1));
      return l + pad + items.join(itemSep + pad) + '\n' + ' '.repeat(indent * level) + r;
    };
    if (Array.isArray(v)) return open(v.map((x) => enc(x, level + 1)), '[', ']');
    if (typeof v === 'object') {
      let keys = Object.keys(v as object).filter((k) => (v as Record<string, unknown>)[k] !== undefined);
      if (sortKeys) keys = keys.sort();
      return open(keys.map((k) => pyJsonString(k, ensureAscii) + keySep + enc((v as Record<string, unknown>)[k], level + 1)), '{', '}');
    }
    throw new InvalidRequestError(`value of type ${typeof v} is not JSON serializable`);
  };
  return enc(value, 0);
}

/** A JSON syntax error with Python's position wording (`Expecting value: line 1 column 5 (char 4)`). */
export class PyJsonDecodeError extends InvalidRequestError {
  readonly pos: number;
  constructor(msg: string, text: string, pos: number) {
    const line = text.slice(0, pos).split('\n').length;
    const col = pos - text.lastIndexOf('\n', pos - 1);
    super(`${msg}: line ${line} column ${col} (char ${pos})`);
    this.name = 'PyJsonDecodeError';
    this.pos = pos;
  }
}

/** JSON whitespace (Python's json module): space, tab, LF, CR. @param c a UTF-16 code unit (NaN past the end) */
function isWs(c: number): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}

/** The character a one-letter escape `\e` stands for, or null (`u` and invalid escapes). @param e its code unit */
function simpleEscape(e: number): string | null {
  switch (e) {
    case 0x22: return '"';
    case 0x5c: return '\\';
    case 0x2f: return '/';
    case 0x62: return '\b';
    case 0x66: return '\f';
    case 0x6e: return '\n';
    case 0x72: return '\r';
    case 0x74: return '\t';
    default: return null;
  }
}

const HEX4 = /^[0-9a-fA-F]{4}$/;

/**
 * Index of the closing quote of the string literal whose opening quote is at `begin`: the first `"` after it that
 * follows an even number of backslashes (in a well-formed literal every backslash run pairs up from its start, so
 * exactly those quotes are unescaped); -1 when there is none. O(literal length), native `indexOf` between quotes.
 */
function stringLiteralEnd(text: string, begin: number): number {
  let from = begin + 1;
  for (;;) {
    const q = text.indexOf('"', from);
    if (q < 0) return -1;
    let b = q - 1;
    while (b > begin && text.charCodeAt(b) === 0x5c) b--;
    if ((q - 1 - b) % 2 === 0) return q;
    from = q + 1;
  }
}

/**
 * Python's strict string scanner (`py_scanstring`) over the literal opening at `begin`, run by run: plain runs are
 * sliced out whole, escapes decoded one by one. Used for literals JSON.parse refused, to throw Python's error at
 * Python's position.
 * @returns the value and the index just past the closing quote
 * @throws PyJsonDecodeError on an unterminated literal, a raw control character, or a bad escape
 */
function scanStringSlow(text: string, begin: number): { value: string; end: number } {
  const n = text.length;
  const fail = (msg: string, at: number): never => {
    throw new PyJsonDecodeError(msg, text, at);
  };
  let j = begin + 1;
  let runStart = j;
  let out = '';
  for (;;) {
    let c = -1;
    while (j < n) {
      c = text.charCodeAt(j);
      if (c === 0x22 || c === 0x5c || c < 0x20) break;
      j++;
    }
    if (j >= n) fail('Unterminated string starting at', begin);
    if (j > runStart) out += text.slice(runStart, j);
    if (c === 0x22) return { value: out, end: j + 1 };
    if (c < 0x20) fail('Invalid control character at', j);
    // a backslash
    if (j + 1 >= n) fail('Unterminated string starting at', begin);
    const e = text.charCodeAt(j + 1);
    const simple = simpleEscape(e);
    if (simple !== null) {
      out += simple;
      j += 2;
    } else if (e === 0x75) {
      const hex = text.slice(j + 2, j + 6);
      if (!HEX4.test(hex)) fail('Invalid \\uXXXX escape', j + 1);
      out += String.fromCharCode(parseInt(hex, 16));
      j += 6;
    } else {
      fail('Invalid \\escape', j);
    }
    runStart = j;
  }
}

/**
 * Decodes one JSON value starting at `start` (after optional whitespace), as Python's
 * `json.JSONDecoder.raw_decode`: numbers with `.`/`e` become {@link PyFloat}, big ints `bigint`, `NaN` and
 * `±Infinity` are accepted, raw control characters inside strings are rejected (strict mode), duplicate keys:
 * last value wins at the first key's position. Linear in the text: a string literal is delimited with `indexOf` and
 * decoded by the native JSON.parse, whose ECMA-404 strings have exactly the escapes and the strictness of Python's
 * scanner (raw U+0000..U+001F refused; `\uXXXX` gives that UTF-16 unit, lone surrogates included), so the value
 * is the same; only a malformed literal is rescanned in JavaScript, for Python's error message and position.
 * @param text the JSON text
 * @param start UTF-16 offset to start at
 * @returns the value and the offset just past it
 * @throws PyJsonDecodeError on malformed input
 */
export function pyJsonRawDecode(text: string, start = 0): { value: PyJson; end: number } {
  const n = text.length;
  let i = start;
  const skipWs = (): void => {
    while (i < n && isWs(text.charCodeAt(i))) i++;
  };
  const fail = (msg: string, at = i): never => {
    throw new PyJsonDecodeError(msg, text, at);
  };
  const parseString = (): string => {
    // i at the opening quote
    const close = stringLiteralEnd(text, i);
    if (close >= 0) {
      let value: unknown;
      try {
        value = JSON.parse(text.slice(i, close + 1));
      } catch {
        value = undefined; // malformed: scanStringSlow throws Python's error
      }
      if (typeof value === 'string') {
        i = close + 1;
        return value;
      }
    }
    const r = scanStringSlow(text, i);
    i = r.end;
    return r.value;
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

/**
 * Python's `json.loads(text)`: one value, surrounding whitespace allowed, nothing else.
 * @param text the JSON text
 * @returns the decoded value (see {@link PyJson})
 * @throws PyJsonDecodeError on malformed input or extra data
 */
export function pyJsonLoads(text: string): PyJson {
  const { value, end } = pyJsonRawDecode(text, 0);
  let i = end;
  while (i < text.length && isWs(text.charCodeAt(i))) i++;
  if (i !== text.length) throw new PyJsonDecodeError('Extra data', text, i);
  return value;
}

/**
 * Turns a {@link PyJson} value into plain JS data (PyFloat → number, bigint → number), e.g. for JSON.stringify
 * or for code that only needs values, not Python's spelling of them.
 * @param v the value
 */
export function pyJsonToPlain(v: PyJson): unknown {
  if (v instanceof PyFloat) return v.value;
  if (typeof v === 'bigint') return Number(v);
  if (Array.isArray(v)) return v.map(pyJsonToPlain);
  if (v !== null && typeof v === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) out[k] = pyJsonToPlain(x);
    return out;
  }
  return v;
}
