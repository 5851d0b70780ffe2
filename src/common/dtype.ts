// Storage dtypes and their conversions to f32. The only place that knows bit layouts (bf16, f16, fp8 e4m3fn).

/** Storage dtypes tsglang reads from checkpoints (names as in safetensors headers, lower-cased). */
export type DType = 'f32' | 'f16' | 'bf16' | 'f8_e4m3' | 'f64' | 'i8' | 'u8' | 'i16' | 'i32' | 'i64' | 'bool';

/** Bytes per element of each dtype. */
export const DTYPE_BYTES: Readonly<Record<DType, number>> = {
  f32: 4, f16: 2, bf16: 2, f8_e4m3: 1, f64: 8, i8: 1, u8: 1, i16: 2, i32: 4, i64: 8, bool: 1,
};

/** Map from a safetensors header dtype string ("F32", "BF16", "F8_E4M3", ...) to our DType; undefined if unknown. */
export function dtypeFromSafetensors(name: string): DType | undefined {
  switch (name) {
    case 'F32': return 'f32';
    case 'F16': return 'f16';
    case 'BF16': return 'bf16';
    case 'F8_E4M3': return 'f8_e4m3';
    case 'F64': return 'f64';
    case 'I8': return 'i8';
    case 'U8': return 'u8';
    case 'I16': return 'i16';
    case 'I32': return 'i32';
    case 'I64': return 'i64';
    case 'BOOL': return 'bool';
    default: return undefined;
  }
}

/** Inverse of dtypeFromSafetensors: our DType → the safetensors header string. */
export function dtypeToSafetensors(dtype: DType): string {
  return dtype === 'f8_e4m3' ? 'F8_E4M3' : dtype.toUpperCase();
}

/**
 * 256-entry table: FP8 e4m3fn code → f32 value (OCP FP8 spec: bias 7, no infinities, 0x7f/0xff = NaN,
 * max finite 448, subnormals m·2^-9).
 */
export const FP8_E4M3_TO_F32: Float32Array = (() => {
  const table = new Float32Array(256);
  for (let code = 0; code < 256; code++) {
    const sign = code & 0x80 ? -1 : 1;
    const exp = (code >> 3) & 0x0f;
    const mant = code & 0x07;
    let v: number;
    if (exp === 0x0f && mant === 0x07) v = NaN;
    else if (exp === 0) v = (mant / 8) * 2 ** -6;
    else v = (1 + mant / 8) * 2 ** (exp - 7);
    table[code] = sign * v;
  }
  return table;
})();

/**
 * f32 → FP8 e4m3fn code with round-to-nearest-even and saturation to ±448 (as torch's float8_e4m3fn cast
 * with saturation; NaN → 0x7f).
 */
export function f32ToFp8E4m3(x: number): number {
  if (Number.isNaN(x)) return 0x7f;
  const sign = x < 0 || Object.is(x, -0) ? 0x80 : 0;
  const a = Math.abs(x);
  if (a >= 448) return sign | 0x7e;
  // Find the nearest representable value by scanning the 127 non-negative finite codes (exact and simple).
  let best = 0;
  let bestErr = Infinity;
  for (let code = 0; code <= 0x7e; code++) {
    const err = Math.abs(FP8_E4M3_TO_F32[code] - a);
    if (err < bestErr || (err === bestErr && (code & 1) === 0 && (best & 1) === 1)) {
      best = code;
      bestErr = err;
    }
  }
  return sign | best;
}

const f32Scratch = new Float32Array(1);
const u32Scratch = new Uint32Array(f32Scratch.buffer);

/** bf16 bits (u16) → f32 value. */
export function bf16ToF32(bits: number): number {
  u32Scratch[0] = bits << 16;
  return f32Scratch[0];
}

/** f32 → bf16 bits with round-to-nearest-even (NaN stays NaN). */
export function f32ToBf16(x: number): number {
  f32Scratch[0] = x;
  const u = u32Scratch[0];
  if ((u & 0x7fffffff) > 0x7f800000) return 0x7fc0;
  return ((u + 0x7fff + ((u >>> 16) & 1)) >>> 16) & 0xffff;
}

/** f16 bits (u16) → f32 value (IEEE 754 binary16, subnormals included). */
export function f16ToF32(bits: number): number {
  const sign = bits & 0x8000 ? -1 : 1;
  const exp = (bits >> 10) & 0x1f;
  const mant = bits & 0x3ff;
  if (exp === 0) return sign * mant * 2 ** -24;
  if (exp === 0x1f) return mant ? NaN : sign * Infinity;
  return sign * (1 + mant / 1024) * 2 ** (exp - 15);
}

/**
 * Decodes `numel` little-endian elements of `dtype` from `bytes` into f32 (FP8 without its block scale).
 * @param bytes raw little-endian storage, at least numel * DTYPE_BYTES[dtype] bytes
 * @returns [numel] f32
 * @throws RangeError for i64 values outside ±2^53 is not checked (values are converted with Number())
 */
export function toF32(bytes: Uint8Array, dtype: DType, numel: number, out = new Float32Array(numel)): Float32Array {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  switch (dtype) {
    case 'f32':
      for (let i = 0; i < numel; i++) out[i] = view.getFloat32(i * 4, true);
      break;
    case 'f64':
      for (let i = 0; i < numel; i++) out[i] = view.getFloat64(i * 8, true);
      break;
    case 'bf16': {
      const o32 = new Uint32Array(out.buffer, out.byteOffset, numel);
      for (let i = 0; i < numel; i++) o32[i] = view.getUint16(i * 2, true) << 16;
      break;
    }
    case 'f16':
      for (let i = 0; i < numel; i++) out[i] = f16ToF32(view.getUint16(i * 2, true));
      break;
    case 'f8_e4m3':
      for (let i = 0; i < numel; i++) out[i] = FP8_E4M3_TO_F32[bytes[i]];
      break;
    case 'i8':
      for (let i = 0; i < numel; i++) out[i] = view.getInt8(i);
      break;
    case 'u8':
    case 'bool':
      for (let i = 0; i < numel; i++) out[i] = bytes[i];
      break;
    case 'i16':
      for (let i = 0; i < numel; i++) out[i] = view.getInt16(i * 2, true);
      break;
    case 'i32':
      for (let i = 0; i < numel; i++) out[i] = view.getInt32(i * 4, true);
      break;
    case 'i64':
      for (let i = 0; i < numel; i++) out[i] = Number(view.getBigInt64(i * 8, true));
      break;
  }
  return out;
}
