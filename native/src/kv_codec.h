// KV-cache row codecs of the native backend (reference: src/common/kv_dtype.ts, which also encodes the rows): the
// attention and indexer kernels read K/V rows in their stored dtype and dequantize eight elements at a time in
// registers. Layouts (one row, bytes): f32; bf16 × scale; e4m3fn / e5m2 × scale; fp8_block = fp8Dims e4m3fn (pad 4)
// | ceil(fp8Dims/128) f32 scales | bf16 tail (SGLang's DSA indexer keys and fp8_ds_mla latent rows).
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace tsg {

/** Codec ids (src/common/kv_dtype.ts KV_KIND_ID). */
enum KvKind : int32_t { KV_F32 = 0, KV_BF16 = 1, KV_FP8_E4M3 = 2, KV_FP8_E5M2 = 3, KV_FP8_BLOCK = 4 };

/** How the rows of one K or V buffer are stored. */
struct KvLayout {
  int32_t kind = KV_F32;
  int64_t rowBytes = 0;
  float scale = 1.0f;   // bf16 / fp8: value = code · scale
  int64_t fp8Dims = 0;  // fp8_block: elements [0, fp8Dims) are e4m3fn with a scale per 128
  int64_t scaleOff = 0; // fp8_block: byte offset of the scale words in a row
  int64_t tailOff = 0;  // fp8_block: byte offset of the bf16 elements [fp8Dims, width)
};

/** Eight bf16 → f32 (exact: bf16 is the top half of an f32). */
inline __m256 bf16x8(const uint8_t* p) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), 16));
}

/** Eight e4m3fn → f32 (exact): sign and the 7 magnitude bits moved into an f16, whose value is the code's · 2⁻⁸. */
inline __m256 e4m3x8(const uint8_t* p) {
  const __m128i b = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  const __m128i h = _mm_or_si128(_mm_slli_epi16(_mm_and_si128(b, _mm_set1_epi16(0x80)), 8), _mm_slli_epi16(_mm_and_si128(b, _mm_set1_epi16(0x7f)), 7));
  return _mm256_mul_ps(_mm256_cvtph_ps(h), _mm256_set1_ps(256.0f));
}

/** Eight e5m2 → f32 (exact: e5m2 is the top byte of an f16). */
inline __m256 e5m2x8(const uint8_t* p) {
  return _mm256_cvtph_ps(_mm_slli_epi16(_mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))), 8));
}

/**
 * Reads elements of a row in one codec. load8(row, e): elements e..e+7 (e a multiple of 8 in every caller that
 * crosses an fp8_block boundary); loadN: the first n (< 8) of them, the rest 0. `row` is the row's first byte.
 * Each element is code · scale rounded once to f32, exactly as decodeKvRow computes it.
 */
template <int KIND>
struct KvLoader {
  static inline __m256 load8(const uint8_t* row, int64_t e, const KvLayout& l) {
    if constexpr (KIND == KV_F32) {
      (void)l;
      return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + e);
    } else if constexpr (KIND == KV_BF16) {
      return _mm256_mul_ps(bf16x8(row + 2 * e), _mm256_set1_ps(l.scale));
    } else if constexpr (KIND == KV_FP8_E4M3) {
      return _mm256_mul_ps(e4m3x8(row + e), _mm256_set1_ps(l.scale));
    } else if constexpr (KIND == KV_FP8_E5M2) {
      return _mm256_mul_ps(e5m2x8(row + e), _mm256_set1_ps(l.scale));
    } else {
      if (e < l.fp8Dims) {
        float s;
        std::memcpy(&s, row + l.scaleOff + 4 * (e >> 7), 4);
        return _mm256_mul_ps(e4m3x8(row + e), _mm256_set1_ps(s));
      }
      return bf16x8(row + l.tailOff + 2 * (e - l.fp8Dims));
    }
  }
  static inline __m256 loadN(const uint8_t* row, int64_t e, int n, const KvLayout& l, __m256i mask) {
    if constexpr (KIND == KV_F32) {
      (void)n; (void)l;
      return _mm256_maskload_ps(reinterpret_cast<const float*>(row) + e, mask);
    } else {
      (void)mask;
      // a full 8-element decode would read past the row's last element: decode through a zero-padded copy
      alignas(32) uint8_t tmp[16] = {0};
      if constexpr (KIND == KV_FP8_BLOCK) {
        if (e >= l.fp8Dims) {
          std::memcpy(tmp, row + l.tailOff + 2 * (e - l.fp8Dims), 2 * n);
          return bf16x8(tmp);
        }
        float s;
        std::memcpy(&s, row + l.scaleOff + 4 * (e >> 7), 4);
        std::memcpy(tmp, row + e, n);
        return _mm256_mul_ps(e4m3x8(tmp), _mm256_set1_ps(s));
      } else {
        constexpr int64_t bytesPer = KIND == KV_BF16 ? 2 : 1;
        std::memcpy(tmp, row + bytesPer * e, bytesPer * n);
        return load8(tmp, 0, l);
      }
    }
  }
  /** Bytes of elements [e, e+n) to prefetch (their first byte and span). */
  static inline const uint8_t* addr(const uint8_t* row, int64_t e, const KvLayout& l) {
    if constexpr (KIND == KV_F32) return row + 4 * e;
    else if constexpr (KIND == KV_BF16) return row + 2 * e;
    else if constexpr (KIND == KV_FP8_BLOCK) return e < l.fp8Dims ? row + e : row + l.tailOff + 2 * (e - l.fp8Dims);
    else return row + e;
  }
  static inline int64_t spanBytes(int64_t n, const KvLayout& l) {
    if constexpr (KIND == KV_F32) return 4 * n;
    else if constexpr (KIND == KV_BF16) return 2 * n;
    else if constexpr (KIND == KV_FP8_BLOCK) return l.rowBytes;
    else return n;
  }
};

}  // namespace tsg
