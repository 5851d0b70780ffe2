// How one KV-cache buffer row is stored (--kv-cache-dtype), shared by the pool (mem_cache/kv_pool.ts, which encodes
// rows as they are written) and the attention kernels (kernels/, which read rows in this form and dequantize in
// registers). Every row is a whole number of 4-byte words, so the storage is one Float32Array whatever the codec and
// the native addon reads its bytes.
//
// Codecs (byte layout of one row of `width` elements):
//   f32       width × f32
//   bf16      width × bf16                                    value = bf16 · scale
//   fp8_e4m3  width × e4m3fn   (pad to 4 bytes)               value = fp8 · scale   (scale, an f32: the checkpoint's k_scale /
//   fp8_e5m2  width × e5m2     (pad to 4 bytes)               value = fp8 · scale    v_scale, else 1.0, as SGLang)
//   fp8_block fp8Dims × e4m3fn (pad 4) | ceil(fp8Dims/128) × f32 scales | (width − fp8Dims) × bf16 (pad 4)
//             — SGLang's DSA layouts: the indexer keys (act_quant, block 128, fp8Dims = width) and the "fp8_ds_mla"
//             latent row (512 FP8 with 4 tile scales + the 64-dim rope key in bf16); value = fp8 · scale[e / 128].
//             Block scales are powers of two (ue8m0: 2^ceil(log2(amax / 448))), as DeepSeek-V3.2's scale_fmt.
// Encoding rounds to nearest even and saturates at the largest finite value (e4m3fn 448, e5m2 57344).
import { InternalError } from './errors.js';

/** A KV-cache element encoding (see the file header). */
export type KvCodec =
  | { readonly kind: 'f32' }
  | { readonly kind: 'bf16'; readonly scale: number }
  | { readonly kind: 'fp8_e4m3'; readonly scale: number }
  | { readonly kind: 'fp8_e5m2'; readonly scale: number }
  | { readonly kind: 'fp8_block'; readonly fp8Dims: number };

/** The f32 codec (the default KV storage on CPU, `--kv-cache-dtype auto`). */
export const F32_CODEC: KvCodec = { kind: 'f32' };

/** Elements per FP8 block scale of the fp8_block codec (SGLang's act_quant block_size / the FlashMLA tile). */
export const KV_FP8_BLOCK = 128;

/** Rows of one KV buffer: `raw` holds `locs` rows of `rowFloats` 4-byte words each, `width` elements per row. */
export interface KvStore {
  readonly codec: KvCodec;
  readonly raw: Float32Array;
  /** Row stride in 4-byte words (rowBytes / 4). */
  readonly rowFloats: number;
  /** Elements per row. */
  readonly width: number;
}

/** The numeric id of a codec kind in the native addon's KvLayout (native/src/ops.h KvKind). */
export const KV_KIND_ID: Readonly<Record<KvCodec['kind'], number>> = { f32: 0, bf16: 1, fp8_e4m3: 2, fp8_e5m2: 3, fp8_block: 4 };

const pad4 = (n: number): number => Math.ceil(n / 4) * 4;

/** Byte offsets of the fp8_block codec's scale words and bf16 tail within a row. */
export function fp8BlockOffsets(fp8Dims: number): { scaleOff: number; tailOff: number } {
  const scaleOff = pad4(fp8Dims);
  return { scaleOff, tailOff: scaleOff + 4 * Math.ceil(fp8Dims / KV_FP8_BLOCK) };
}

/**
 * Bytes of one row of `width` elements in a codec (a multiple of 4).
 * @throws InternalError for an fp8_block codec whose fp8Dims exceeds width or is not a multiple of 8
 */
export function kvRowBytes(codec: KvCodec, width: number): number {
  switch (codec.kind) {
    case 'f32': return 4 * width;
    case 'bf16': return pad4(2 * width);
    case 'fp8_e4m3':
    case 'fp8_e5m2': return pad4(width);
    case 'fp8_block': {
      if (codec.fp8Dims > width || codec.fp8Dims % 8 !== 0) throw new InternalError(`fp8_block: fp8Dims ${codec.fp8Dims} must be a multiple of 8 and ≤ width ${width}`);
      return fp8BlockOffsets(codec.fp8Dims).tailOff + pad4(2 * (width - codec.fp8Dims));
    }
  }
}

/** The codec's name for logs: f32, bf16, fp8_e4m3, fp8_e5m2, or fp8_e4m3 (block-scaled). */
export function kvCodecName(c: KvCodec): string {
  return c.kind === 'fp8_block' ? (c.fp8Dims > 0 ? 'fp8_e4m3 (128-block scales)' : 'bf16') : c.kind;
}

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

function decodeE4m3(code: number): number {
  const s = code & 0x80 ? -1 : 1;
  const e = (code >> 3) & 0xf;
  const m = code & 7;
  if (e === 15 && m === 7) return NaN;
  return s * (e === 0 ? m * 2 ** -9 : 2 ** (e - 7) * (1 + m / 8));
}

function decodeE5m2(code: number): number {
  const s = code & 0x80 ? -1 : 1;
  const e = (code >> 2) & 0x1f;
  const m = code & 3;
  if (e === 31) return m === 0 ? s * Infinity : NaN;
  return s * (e === 0 ? m * 2 ** -16 : 2 ** (e - 15) * (1 + m / 4));
}

/** Value of every e4m3fn / e5m2 byte. */
export const E4M3_LUT = Float32Array.from({ length: 256 }, (_, c) => decodeE4m3(c));
export const E5M2_LUT = Float32Array.from({ length: 256 }, (_, c) => decodeE5m2(c));

/**
 * Rounds an f32 to a small float of `mBits` mantissa bits and exponent bias `bias` (round to nearest even, saturating
 * at `maxCode`), returning the code byte.
 */
function encodeSmall(x: number, mBits: number, bias: number, maxCode: number): number {
  f32[0] = x;
  const bits = u32[0];
  const sign = (bits >>> 24) & 0x80;
  const absBits = bits & 0x7fffffff;
  if (absBits > 0x7f800000) return sign | 0x7f; // NaN
  const exp = (absBits >>> 23) - 127;
  const minExp = 1 - bias; // smallest normal exponent
  let code: number;
  if (exp < minExp) {
    // subnormal range of the small format: multiples of 2^(minExp - mBits), round half even
    f32[0] = Math.abs(x);
    const q = f32[0] / 2 ** (minExp - mBits);
    let n = Math.floor(q);
    const r = q - n;
    if (r > 0.5 || (r === 0.5 && (n & 1) === 1)) n++;
    code = n; // n = 2^mBits is the smallest normal, which is also its code
  } else {
    const shift = 23 - mBits;
    let mant = (absBits & 0x7fffff) >>> shift;
    const rem = absBits & ((1 << shift) - 1);
    const half = 1 << (shift - 1);
    let e = exp;
    if (rem > half || (rem === half && (mant & 1) === 1)) mant++;
    if (mant === 1 << mBits) { mant = 0; e++; }
    code = (e + bias) * (1 << mBits) + mant;
  }
  return sign | Math.min(code, maxCode);
}

/** f32 → e4m3fn byte (RNE, saturating at ±448). */
export function encodeE4m3(x: number): number {
  return encodeSmall(x, 3, 7, 0x7e);
}

/** f32 → e5m2 byte (RNE, saturating at ±57344). */
export function encodeE5m2(x: number): number {
  return encodeSmall(x, 2, 15, 0x7b);
}

/** f32 → bf16 bits (RNE; NaN stays NaN). */
export function encodeBf16(x: number): number {
  f32[0] = x;
  const b = u32[0];
  if ((b & 0x7fffffff) > 0x7f800000) return (b >>> 16) | 0x40;
  return ((b + 0x7fff + ((b >>> 16) & 1)) >>> 16) & 0xffff;
}

/** bf16 bits → value. */
export function decodeBf16(h: number): number {
  u32[0] = (h & 0xffff) << 16;
  return f32[0];
}

/** The ue8m0 (power-of-two) block scale of a block whose largest magnitude is `amax`: 2^ceil(log2(amax / 448)), 1 for 0. */
export function fp8BlockScale(amax: number): number {
  if (!(amax > 0) || !Number.isFinite(amax)) return 1;
  return 2 ** Math.ceil(Math.log2(amax / 448));
}

/**
 * Encodes one row: `src[srcOff .. srcOff + width)` into row `loc` of the store.
 * @throws InternalError when the row lies outside the store
 */
export function encodeKvRow(store: KvStore, loc: number, src: Float32Array, srcOff: number): void {
  const { codec, width } = store;
  const wordOff = loc * store.rowFloats;
  if (wordOff + store.rowFloats > store.raw.length) throw new InternalError(`KV row ${loc} outside the buffer (${store.raw.length / store.rowFloats} rows)`);
  const raw = store.raw;
  if (codec.kind === 'f32') {
    raw.set(src.subarray(srcOff, srcOff + width), wordOff);
    return;
  }
  const bytes = new Uint8Array(raw.buffer, raw.byteOffset + wordOff * 4, store.rowFloats * 4);
  if (codec.kind === 'bf16') {
    const h = new Uint16Array(bytes.buffer, bytes.byteOffset, width);
    const sc = Math.fround(codec.scale);
    for (let e = 0; e < width; e++) h[e] = encodeBf16(src[srcOff + e] / sc);
    return;
  }
  if (codec.kind === 'fp8_e4m3' || codec.kind === 'fp8_e5m2') {
    const enc = codec.kind === 'fp8_e4m3' ? encodeE4m3 : encodeE5m2;
    const sc = Math.fround(codec.scale);
    for (let e = 0; e < width; e++) bytes[e] = enc(src[srcOff + e] / sc);
    return;
  }
  const { scaleOff, tailOff } = fp8BlockOffsets(codec.fp8Dims);
  const scales = new Float32Array(bytes.buffer, bytes.byteOffset + scaleOff, Math.ceil(codec.fp8Dims / KV_FP8_BLOCK));
  for (let b = 0; b < scales.length; b++) {
    const e0 = b * KV_FP8_BLOCK;
    const e1 = Math.min(codec.fp8Dims, e0 + KV_FP8_BLOCK);
    let amax = 0;
    for (let e = e0; e < e1; e++) amax = Math.max(amax, Math.abs(src[srcOff + e]));
    const s = fp8BlockScale(amax);
    scales[b] = s;
    for (let e = e0; e < e1; e++) bytes[e] = encodeE4m3(src[srcOff + e] / s);
  }
  const tail = new Uint16Array(bytes.buffer, bytes.byteOffset + tailOff, width - codec.fp8Dims);
  for (let e = codec.fp8Dims; e < width; e++) tail[e - codec.fp8Dims] = encodeBf16(src[srcOff + e]);
}

/**
 * Decodes elements [elemOff, elemOff + n) of row `loc` into dst[0..n) (f32 values exactly as the native kernels
 * dequantize them: code value × scale, rounded once to f32).
 */
export function decodeKvRow(store: KvStore, loc: number, elemOff: number, n: number, dst: Float32Array): void {
  const { codec, raw } = store;
  const wordOff = loc * store.rowFloats;
  if (codec.kind === 'f32') {
    for (let e = 0; e < n; e++) dst[e] = raw[wordOff + elemOff + e];
    return;
  }
  const bytes = new Uint8Array(raw.buffer, raw.byteOffset + wordOff * 4, store.rowFloats * 4);
  if (codec.kind === 'bf16') {
    const h = new Uint16Array(bytes.buffer, bytes.byteOffset, store.width);
    const sc = Math.fround(codec.scale);
    for (let e = 0; e < n; e++) dst[e] = decodeBf16(h[elemOff + e]) * sc;
    return;
  }
  if (codec.kind === 'fp8_e4m3' || codec.kind === 'fp8_e5m2') {
    const lut = codec.kind === 'fp8_e4m3' ? E4M3_LUT : E5M2_LUT;
    const sc = Math.fround(codec.scale);
    for (let e = 0; e < n; e++) dst[e] = lut[bytes[elemOff + e]] * sc;
    return;
  }
  const { scaleOff, tailOff } = fp8BlockOffsets(codec.fp8Dims);
  const scales = new Float32Array(bytes.buffer, bytes.byteOffset + scaleOff, Math.ceil(codec.fp8Dims / KV_FP8_BLOCK));
  const tail = new Uint16Array(bytes.buffer, bytes.byteOffset + tailOff, store.width - codec.fp8Dims);
  for (let i = 0; i < n; i++) {
    const e = elemOff + i;
    dst[i] = e < codec.fp8Dims ? E4M3_LUT[bytes[e]] * scales[Math.floor(e / KV_FP8_BLOCK)] : decodeBf16(tail[e - codec.fp8Dims]);
  }
}

/** A store over a plain f32 row-major buffer ([rows, width]): how f32 KV buffers and kernel tests pass keys. */
export function f32KvStore(buf: Float32Array, width: number): KvStore {
  return { codec: F32_CODEC, raw: buf, rowFloats: width, width };
}

/** The KV cache dtypes tsglang builds (--kv-cache-dtype after aliases; 'auto' = the f32 the CPU engine computes in). */
export type KvCacheDtype = 'auto' | 'bf16' | 'fp8_e4m3' | 'fp8_e5m2';

/**
 * --kv-cache-dtype → the built dtype ('bfloat16' is SGLang's alias of 'bf16').
 * @returns null for a choice tsglang does not build (fp4_e2m1)
 */
export function parseKvCacheDtype(s: string): KvCacheDtype | null {
  if (s === 'auto' || s === 'bf16' || s === 'fp8_e4m3' || s === 'fp8_e5m2') return s;
  if (s === 'bfloat16') return 'bf16';
  return null;
}

/**
 * The codec of a K or V (or MLA latent) buffer under a KV dtype, with a per-tensor scale (the checkpoint's k_scale /
 * v_scale; SGLang's default 1.0): auto → f32, bf16 → bf16, fp8_* → that FP8 format.
 */
export function scalarKvCodec(dtype: KvCacheDtype, scale = 1): KvCodec {
  switch (dtype) {
    case 'auto': return F32_CODEC;
    case 'bf16': return { kind: 'bf16', scale };
    case 'fp8_e4m3': return { kind: 'fp8_e4m3', scale };
    case 'fp8_e5m2': return { kind: 'fp8_e5m2', scale };
  }
}
