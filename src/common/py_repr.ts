// Python's repr() of the values SGLang puts into error messages with `{x!r}` (strings, lists of strings and ints),
// so that tsglang's messages read the same.

/** Characters Python's str.isprintable() rejects (besides them, only the space of the Zs category is printable). */
const NON_PRINTABLE = /[\p{Cc}\p{Cf}\p{Cs}\p{Co}\p{Cn}\p{Zl}\p{Zp}\p{Zs}]/u;

function hex(code: number, width: number): string {
  return code.toString(16).padStart(width, '0');
}

/**
 * repr(s) of a Python str: single quotes unless `s` contains a single quote and no double quote; backslash, the
 * quote, \t \n \r escaped; other non-printable code points as \xhh, \uhhhh or \Uhhhhhhhh; everything else as is.
 */
export function pyStrRepr(s: string): string {
  const quote = s.includes("'") && !s.includes('"') ? '"' : "'";
  let out = quote;
  for (const ch of s) {
    const code = ch.codePointAt(0)!;
    if (ch === quote || ch === '\\') out += `\\${ch}`;
    else if (ch === '\t') out += '\\t';
    else if (ch === '\n') out += '\\n';
    else if (ch === '\r') out += '\\r';
    else if (ch !== ' ' && NON_PRINTABLE.test(ch)) out += code < 0x100 ? `\\x${hex(code, 2)}` : code < 0x10000 ? `\\u${hex(code, 4)}` : `\\U${hex(code, 8)}`;
    else out += ch;
  }
  return out + quote;
}

/** repr(x) of a Python int given as a JS integer (exact digits, no exponent form). */
export function pyIntRepr(x: number): string {
  return Number.isSafeInteger(x) ? String(x) : Number.isInteger(x) ? BigInt(x).toString() : String(x);
}

/** repr(list) of a list of str or int: `['a', 'b']`, `[1, 2]`. */
export function pyListRepr(items: readonly (string | number)[]): string {
  return `[${items.map((x) => (typeof x === 'string' ? pyStrRepr(x) : pyIntRepr(x))).join(', ')}]`;
}
