// Python's number and JSON formatting, for output that must match SGLang's scripts byte for byte:
// `format(x, '.2f')` (round-half-even on the exact binary value), `repr(float)`, `json.dumps` (", " / ": "
// separators, ASCII escapes, Infinity / NaN literals, int vs float), and `"{:<40} {:<10}"` rows.
// Python semantics: CPython `Objects/floatobject.c` (repr via the shortest round-trip digits, 'r' format) and
// `Lib/json/encoder.py`.

/**
 * `format(x, f'.{digits}f')`: fixed-point with correct rounding of the exact binary value (ties to even, which
 * JS `toFixed` rounds up instead).
 * @param x any double; NaN → `nan`, ±Infinity → `inf` / `-inf`
 * @param digits decimals, 0..20
 */
export function pyFixed(x: number, digits: number): string {
  if (Number.isNaN(x)) return 'nan';
  if (!Number.isFinite(x)) return x > 0 ? 'inf' : '-inf';
  const s = x.toFixed(digits);
  // Exact decimal expansion to many more places: a tie shows as '5' followed by zeros only.
  const exact = Math.abs(x) < 1e21 ? x.toFixed(Math.min(100, digits + 80)) : '';
  const tail = exact.slice(exact.length - 80);
  if (/^50*$/.test(tail)) {
    let truncated = exact.slice(0, exact.length - 80);
    if (truncated.endsWith('.')) truncated = truncated.slice(0, -1);
    const lastDigit = Number(truncated[truncated.length - 1]);
    // toFixed rounded away from zero; Python keeps the even neighbour.
    if (lastDigit % 2 === 0) return stripNegZero(truncated, x);
  }
  return stripNegZero(s, x);
}

function stripNegZero(s: string, x: number): string {
  // Python prints '-0.00' for -0.001 and for -0.0; JS toFixed prints '-0.00' for -0.001 but '0.00' for -0.
  if (Object.is(x, -0)) return '-' + s;
  return s;
}

/**
 * `repr(float)`: the shortest round-trip digits, fixed notation when 1e-4 ≤ |x| < 1e16 (with `.0` for integral
 * values), else scientific with a signed two-digit-minimum exponent (`1e-05`, `1e+16`); `inf`, `nan`.
 * @param x a double
 */
export function pyFloatRepr(x: number): string {
  if (Number.isNaN(x)) return 'nan';
  if (!Number.isFinite(x)) return x > 0 ? 'inf' : '-inf';
  if (x === 0) return Object.is(x, -0) ? '-0.0' : '0.0';
  const [mant, expStr] = x.toExponential().split('e');
  const exp = Number(expStr);
  const neg = mant.startsWith('-');
  const digits = mant.replace('-', '').replace('.', '');
  let body: string;
  if (exp >= -5 && exp < 16) {
    // Python's repr switches to exponent form when the decimal exponent is < -4 (x < 1e-4) or >= 16.
    if (exp < -4) {
      body = sci(digits, exp);
    } else if (exp < 0) {
      body = '0.' + '0'.repeat(-exp - 1) + digits;
    } else if (digits.length <= exp + 1) {
      body = digits + '0'.repeat(exp + 1 - digits.length) + '.0';
    } else {
      body = digits.slice(0, exp + 1) + '.' + digits.slice(exp + 1);
    }
  } else {
    body = sci(digits, exp);
  }
  return (neg ? '-' : '') + body;
}

function sci(digits: string, exp: number): string {
  const m = digits.length > 1 ? digits[0] + '.' + digits.slice(1) : digits;
  const sign = exp < 0 ? '-' : '+';
  const e = String(Math.abs(exp)).padStart(2, '0');
  return `${m}e${sign}${e}`;
}

/** A number that Python holds as a float (printed `1.0`, not `1`, by {@link pyJsonDumps}). */
export class PyFloat {
  constructor(readonly value: number) {}
}

/** Value accepted by {@link pyJsonDumps}: JSON data where floats may be wrapped in {@link PyFloat}. */
export type PyJson = null | boolean | number | string | PyFloat | PyJson[] | { [key: string]: PyJson | undefined };

/**
 * `json.dumps(value)` with Python's defaults: `", "` and `": "` separators, `ensure_ascii` (\uXXXX escapes,
 * surrogate pairs for astral characters), `Infinity` / `-Infinity` / `NaN` literals. A plain JS number prints as
 * an int when it is integral, else as a float repr; wrap values Python keeps as floats in {@link PyFloat}.
 * Object keys keep insertion order; `undefined` members are skipped.
 * @throws TypeError for values JSON cannot hold (functions, BigInt)
 */
export function pyJsonDumps(value: PyJson): string {
  if (value === null) return 'null';
  if (value === true) return 'true';
  if (value === false) return 'false';
  if (value instanceof PyFloat) return pyJsonFloat(value.value);
  if (typeof value === 'number') return Number.isInteger(value) ? String(value) : pyJsonFloat(value);
  if (typeof value === 'string') return pyJsonString(value);
  if (Array.isArray(value)) return '[' + value.map((v) => pyJsonDumps(v)).join(', ') + ']';
  if (typeof value === 'object') {
    const parts: string[] = [];
    for (const [k, v] of Object.entries(value)) {
      if (v === undefined) continue;
      parts.push(pyJsonString(k) + ': ' + pyJsonDumps(v));
    }
    return '{' + parts.join(', ') + '}';
  }
  throw new TypeError(`pyJsonDumps: unsupported value of type ${typeof value}`);
}

function pyJsonFloat(x: number): string {
  if (Number.isNaN(x)) return 'NaN';
  if (!Number.isFinite(x)) return x > 0 ? 'Infinity' : '-Infinity';
  return pyFloatRepr(x);
}

const JSON_ESCAPES: Record<string, string> = {
  '"': '\\"',
  '\\': '\\\\',
  '\n': '\\n',
  '\r': '\\r',
  '\t': '\\t',
  '\b': '\\b',
  '\f': '\\f',
};

/** A JSON string literal as `json.dumps` (ensure_ascii=True) writes it. */
export function pyJsonString(s: string): string {
  let out = '"';
  for (let i = 0; i < s.length; i++) {
    const ch = s[i];
    const code = s.charCodeAt(i);
    const esc = JSON_ESCAPES[ch];
    if (esc !== undefined) out += esc;
    else if (code < 0x20 || code > 0x7e) out += '\\u' + code.toString(16).padStart(4, '0');
    else out += ch;
  }
  return out + '"';
}

/**
 * One result row: Python `"{:<40} {:<10}".format(label, value)` — label padded to 40, a space, value padded
 * to 10 (trailing spaces kept; longer values are not cut).
 * @param label row label, e.g. `Backend:`
 * @param value already formatted value text
 */
export function pyRow(label: string, value: string): string {
  return label.padEnd(40) + ' ' + value.padEnd(10);
}

/**
 * Python `"{s:{c}^{n}}".format(...)`: `s` centred in `width` with fill `c`, the odd pad char on the right.
 */
export function pyCenter(s: string, width: number, fill: string): string {
  if (s.length >= width) return s;
  const total = width - s.length;
  const left = Math.floor(total / 2);
  return fill.repeat(left) + s + fill.repeat(total - left);
}

/** Python `repr(list_of_str)`: `['a', 'b']` (single quotes; strings here never contain quotes). */
export function pyStrListRepr(items: readonly string[]): string {
  return '[' + items.map((s) => `'${s.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`).join(', ') + ']';
}
