// Request-body bytes → JSON text, decoded as SGLang's server decodes them: Starlette's `Request.json()` hands the raw
// bytes to Python's `json.loads`, which guesses UTF-8, -16 or -32 from a BOM or the NUL pattern of the first four
// bytes and decodes strictly, except that encoded surrogates pass (errors='surrogatepass'). Pure: bytes in, text
// out; knows nothing of routes or HTTP.
import { isUtf8 } from 'node:buffer';

/** The encodings CPython's `json.detect_encoding` can return (Lib/json/__init__.py). */
export type JsonBodyEncoding = 'utf-8' | 'utf-8-sig' | 'utf-16' | 'utf-16-le' | 'utf-16-be' | 'utf-32' | 'utf-32-le' | 'utf-32-be';

/**
 * CPython's `json.detect_encoding(b)`: a UTF-32, UTF-16 or UTF-8 BOM names the encoding; otherwise NUL bytes among
 * the first four (two for a two-byte body) say UTF-16/32 and their byte order; anything else is UTF-8.
 * @param b the body bytes
 */
export function detectJsonEncoding(b: Uint8Array): JsonBodyEncoding {
  const n = b.length;
  if (n >= 4 && ((b[0] === 0 && b[1] === 0 && b[2] === 0xfe && b[3] === 0xff) || (b[0] === 0xff && b[1] === 0xfe && b[2] === 0 && b[3] === 0))) return 'utf-32';
  if (n >= 2 && ((b[0] === 0xfe && b[1] === 0xff) || (b[0] === 0xff && b[1] === 0xfe))) return 'utf-16';
  if (n >= 3 && b[0] === 0xef && b[1] === 0xbb && b[2] === 0xbf) return 'utf-8-sig';
  if (n >= 4) {
    if (b[0] === 0) return b[1] !== 0 ? 'utf-16-be' : 'utf-32-be';
    if (b[1] === 0) return b[2] !== 0 || b[3] !== 0 ? 'utf-16-le' : 'utf-32-le';
  } else if (n === 2) {
    if (b[0] === 0) return 'utf-16-be';
    if (b[1] === 0) return 'utf-16-le';
  }
  return 'utf-8';
}

/**
 * The text of a JSON request body, as CPython's `json.loads(body)` decodes it before parsing:
 * `body.decode(detect_encoding(body), 'surrogatepass')`. A BOM is dropped (UTF-16/32 BOMs, and one UTF-8 BOM);
 * surrogate code points encoded in UTF-8 (ED A0..BF xx) or UTF-32, and unpaired UTF-16 surrogates, become lone
 * UTF-16 code units. A plain UTF-8 body costs one SIMD validation pass (`buffer.isUtf8`) on top of the decode.
 * @param body the raw body bytes
 * @returns the text, or null where Python raises UnicodeDecodeError (invalid or truncated UTF-8, an odd number of
 *   UTF-16 bytes, UTF-32 not in whole code units or above U+10FFFF); FastAPI then answers 400
 *   `{"detail": "There was an error parsing the body"}`
 */
export function decodeJsonBody(body: Buffer): string | null {
  switch (detectJsonEncoding(body)) {
    case 'utf-8':
      return decodeUtf8(body);
    case 'utf-8-sig':
      return decodeUtf8(body.subarray(3));
    case 'utf-16':
      return decodeUtf16(body.subarray(2), body[0] === 0xfe);
    case 'utf-16-le':
      return decodeUtf16(body, false);
    case 'utf-16-be':
      return decodeUtf16(body, true);
    case 'utf-32':
      return decodeUtf32(body.subarray(4), body[0] === 0);
    case 'utf-32-le':
      return decodeUtf32(body, false);
    case 'utf-32-be':
      return decodeUtf32(body, true);
  }
}

/** Strict UTF-8 with surrogatepass: the common case is valid UTF-8 (one SIMD check); else the slow scan below. */
function decodeUtf8(b: Buffer): string | null {
  if (isUtf8(b)) return b.toString('utf8');
  return decodeUtf8SurrogatePass(b);
}

/**
 * UTF-8 that `isUtf8` refused: valid only if every error is a 3-byte encoded surrogate (ED A0..BF 80..BF), which
 * Python's surrogatepass handler turns into that code point. Byte ranges per the Unicode Standard, Table 3-7.
 */
function decodeUtf8SurrogatePass(b: Buffer): string | null {
  const parts: string[] = [];
  let segStart = 0;
  let i = 0;
  const n = b.length;
  const cont = (k: number) => k < n && (b[k] & 0xc0) === 0x80;
  while (i < n) {
    const c = b[i];
    if (c < 0x80) { i++; continue; }
    if (c >= 0xc2 && c <= 0xdf) {
      if (!cont(i + 1)) return null;
      i += 2;
    } else if (c >= 0xe0 && c <= 0xef) {
      const c1 = b[i + 1];
      if (!cont(i + 1) || !cont(i + 2) || (c === 0xe0 && c1 < 0xa0)) return null;
      if (c === 0xed && c1 >= 0xa0) {
        // an encoded surrogate: valid under surrogatepass
        parts.push(b.toString('utf8', segStart, i), String.fromCharCode(((c & 0x0f) << 12) | ((c1 & 0x3f) << 6) | (b[i + 2] & 0x3f)));
        segStart = i + 3;
      }
      i += 3;
    } else if (c >= 0xf0 && c <= 0xf4) {
      const c1 = b[i + 1];
      if (!cont(i + 1) || !cont(i + 2) || !cont(i + 3) || (c === 0xf0 && c1 < 0x90) || (c === 0xf4 && c1 > 0x8f)) return null;
      i += 4;
    } else {
      return null; // 0x80..0xc1 or 0xf5..0xff cannot start a character
    }
  }
  parts.push(b.toString('utf8', segStart, n));
  return parts.join('');
}

/** UTF-16 code units as they are (surrogatepass keeps unpaired surrogates); an odd byte count is truncated data. */
function decodeUtf16(b: Buffer, bigEndian: boolean): string | null {
  if (b.length % 2 !== 0) return null;
  if (!bigEndian) return b.toString('utf16le');
  const swapped = Buffer.from(b);
  swapped.swap16();
  return swapped.toString('utf16le');
}

/** UTF-32 code points ≤ U+10FFFF (surrogate code points pass as lone units); not whole units → truncated data. */
function decodeUtf32(b: Buffer, bigEndian: boolean): string | null {
  if (b.length % 4 !== 0) return null;
  const parts: string[] = [];
  const CHUNK = 4096;
  let units: number[] = [];
  for (let i = 0; i < b.length; i += 4) {
    const cp = bigEndian ? b.readUInt32BE(i) : b.readUInt32LE(i);
    if (cp > 0x10ffff) return null;
    if (cp > 0xffff) units.push(0xd800 + ((cp - 0x10000) >> 10), 0xdc00 + ((cp - 0x10000) & 0x3ff));
    else units.push(cp);
    if (units.length >= CHUNK) {
      parts.push(String.fromCharCode(...units));
      units = [];
    }
  }
  parts.push(String.fromCharCode(...units));
  return parts.join('');
}
