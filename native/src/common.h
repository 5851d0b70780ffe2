// Shared definitions of the tsglang native CPU backend: weight views, AVX2 helpers (horizontal sum, exp,
// stored-format decoders). Every kernel that reduces over k uses the same per-element arithmetic (see gemm.cc),
// so results never depend on which kernel, tile or thread computed them.
#pragma once

#include <cmath>
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace tsg {

/** Stored weight encodings (matches the TS `Weight.format`). */
enum class WFormat : int { F32 = 0, BF16 = 1, F16 = 2, FP8 = 3 };

/**
 * A 2-D weight [N, K] row-major in its stored encoding. FP8 (e4m3fn) weights carry block scales
 * `scale[floor(n/bn), floor(k/bk)]` (the checkpoint's weight_scale_inv), with `scaleEff = scale * 2^64`
 * precomputed for the x-scaled FP8 arithmetic (see kFp8ScaleEff and gemm.h).
 */
struct WeightView {
  WFormat fmt = WFormat::F32;
  const void* data = nullptr;
  int64_t n = 0;
  int64_t k = 0;
  const float* scale = nullptr;      // [sRows, sCols]
  const float* scaleEff = nullptr;   // scale * kFp8ScaleEff (2^64), or nullptr when that overflows
  int64_t sRows = 0, sCols = 0, bn = 1, bk = 1;
};

/**
 * A forward batch's requests over the paged KV cache (the ForwardBatch fields): request i owns rows
 * [extendStartLoc[i], +extendSeqLens[i]) of the batch, after extendPrefixLens[i] cached tokens; the KV location of
 * its sequence position s is reqToToken[reqPoolIndices[i]·reqToTokenStride + s] (reqToToken has reqToTokenLen ints).
 */
struct PagedBatch {
  int64_t numReqs = 0;
  const int32_t* extendStartLoc = nullptr;
  const int32_t* extendSeqLens = nullptr;
  const int32_t* extendPrefixLens = nullptr;
  const int32_t* reqPoolIndices = nullptr;
  const int32_t* reqToToken = nullptr;
  int64_t reqToTokenStride = 0, reqToTokenLen = 0;

  /**
   * Checks request i against a batch of numTokens rows and the reqToToken table.
   * @param tableRow set to the offset of the request's reqToToken row
   * @returns "" when valid, else "<op>: ..." naming the problem
   */
  std::string checkReq(int64_t i, int64_t numTokens, const char* op, int64_t* tableRow) const {
    const int64_t start = extendStartLoc[i], len = extendSeqLens[i], prefix = extendPrefixLens[i];
    if (start < 0 || len < 0 || prefix < 0 || start + len > numTokens) return std::string(op) + ": req rows beyond numTokens";
    *tableRow = static_cast<int64_t>(reqPoolIndices[i]) * reqToTokenStride;
    if (prefix + len > reqToTokenStride || *tableRow < 0 || *tableRow + prefix + len > reqToTokenLen)
      return std::string(op) + ": sequence beyond reqToToken";
    return "";
  }
};

/** Horizontal sum of 8 lanes in a fixed order: ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)). */
static inline float hsum8(__m256 v) {
  __m128 lo = _mm256_castps256_ps128(v);
  __m128 hi = _mm256_extractf128_ps(v, 1);
  lo = _mm_add_ps(lo, hi);
  __m128 sh = _mm_movehl_ps(lo, lo);
  lo = _mm_add_ps(lo, sh);
  sh = _mm_shuffle_ps(lo, lo, 1);
  lo = _mm_add_ss(lo, sh);
  return _mm_cvtss_f32(lo);
}

/**
 * hsum8 of four vectors at once: [hsum8(a), hsum8(b), hsum8(c), hsum8(d)], bit-identical to four hsum8 calls (the
 * same additions of the same operands: lane pairs (l, l+4), then (0, 2) and (1, 3), then the two halves).
 */
static inline __m128 hsum8x4(__m256 a, __m256 b, __m256 c, __m256 d) {
  const __m256 ab = _mm256_add_ps(_mm256_permute2f128_ps(a, b, 0x20), _mm256_permute2f128_ps(a, b, 0x31));
  const __m256 cd = _mm256_add_ps(_mm256_permute2f128_ps(c, d, 0x20), _mm256_permute2f128_ps(c, d, 0x31));
  // per 128-bit half: [a0+a2, a1+a3, c0+c2, c1+c3 | b0+b2, b1+b3, d0+d2, d1+d3]
  const __m256 t = _mm256_add_ps(_mm256_shuffle_ps(ab, cd, _MM_SHUFFLE(1, 0, 1, 0)), _mm256_shuffle_ps(ab, cd, _MM_SHUFFLE(3, 2, 3, 2)));
  // [a, c, a, c | b, d, b, d]
  const __m256 r = _mm256_add_ps(_mm256_shuffle_ps(t, t, _MM_SHUFFLE(2, 0, 2, 0)), _mm256_shuffle_ps(t, t, _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm_unpacklo_ps(_mm256_castps256_ps128(r), _mm256_extractf128_ps(r, 1));
}

/** Mask of the first `rem` (0..8) lanes, for maskload/maskstore. */
static inline __m256i tailMask(int rem) {
  alignas(32) static const int32_t m[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(m + 8 - rem));
}

/**
 * x-scaled FP8 arithmetic (every path that multiplies by FP8 weights in registers uses it; gemm.h): for weight rows
 * of scale row-block rb, the activation is scaled once per row block, x''[k] = x[k] · scale[rb, k/bk]·2^64 (rounded
 * once), the FMA lanes multiply x'' by raw = fp8 · 2^-120 (fp8RawX8; the product is exact), and the lane sum is
 * multiplied by kFp8Out = 2^56 at the end (exact). No multiply per weight and no fold per scale block; products
 * are never subnormal unless |x·scale·fp8| < 2^-70, and x'' never overflows for |x·scale| < 2^64.
 */
constexpr float kFp8ScaleEff = 18446744073709551616.0f;  // 2^64
constexpr float kFp8Out = 72057594037927936.0f;          // 2^56 = 2^120 / 2^64

/**
 * FP8 e4m3fn codes → f32 values times 2^-120, exactly (normal and subnormal codes): sign-extend each byte to 32
 * bits, shift left by 20 and keep bit 31 (sign) and bits 20..26 (exponent | mantissa). Times 2^56 (exact) and
 * then times scale·2^64 (rounded once) it gives the correctly rounded f32 product fp8·scale (decodeRow).
 * NaN codes (0x7f/0xff) decode to ±480 instead of NaN.
 */
static inline __m256 fp8RawX8(const uint8_t* p) {
  __m256i v = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  v = _mm256_slli_epi32(v, 20);
  v = _mm256_and_si256(v, _mm256_set1_epi32(static_cast<int32_t>(0x87F00000u)));
  return _mm256_castsi256_ps(v);
}

/** 8 BF16 values → f32 (exact). */
static inline __m256 bf16X8(const uint16_t* p) {
  __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}

/** 8 F16 values → f32 (exact, F16C). */
static inline __m256 f16X8(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

/** Scalar FP8 e4m3fn → f32 (exact; NaN codes → NaN, like the TS lookup table). */
static inline float fp8ToF32(uint8_t c) {
  const int s = c >> 7, e = (c >> 3) & 15, m = c & 7;
  float v;
  if (e == 15 && m == 7) return s ? -__builtin_nanf("") : __builtin_nanf("");
  if (e == 0) v = static_cast<float>(m) * (1.0f / 512.0f);
  else {
    uint32_t bits = (static_cast<uint32_t>(e - 7 + 127) << 23) | (static_cast<uint32_t>(m) << 20);
    std::memcpy(&v, &bits, 4);
  }
  return s ? -v : v;
}

static inline float bf16ToF32(uint16_t b) {
  uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

static inline float f16ToF32(uint16_t h) {
  return _cvtsh_ss(h);
}

/**
 * Decodes W[row, k0 .. k0+len) to f32 into out (the exact dequantized values: fp8·scale rounded once to f32,
 * bf16/f16 exact). Scalar-free for whole 8-chunks; used by the buffered GEMM path and by embedding.
 */
void decodeRow(const WeightView& w, int64_t row, int64_t k0, int64_t len, float* out);

/**
 * exp(x) for 8 lanes (Cephes-style range reduction + degree-5 polynomial, ≈1 ulp on [-87, 88]); x < -87.33 → 0,
 * x > 88.72 → +inf. Deterministic: every caller (softmax, attention, SiLU, sigmoid) uses this one function.
 */
static inline __m256 exp8(__m256 x) {
  const __m256 hiLimit = _mm256_set1_ps(88.3762626647949f);
  const __m256 loLimit = _mm256_set1_ps(-87.336544750553f);
  const __m256 underflow = _mm256_cmp_ps(x, loLimit, _CMP_LT_OQ);
  const __m256 overflow = _mm256_cmp_ps(x, hiLimit, _CMP_GT_OQ);
  const __m256 isNan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
  __m256 xc = _mm256_max_ps(_mm256_min_ps(x, hiLimit), loLimit);
  __m256 fx = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504088896341f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693359375f), xc);
  r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 y = _mm256_set1_ps(1.9875691500E-4f);
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.3981999507E-3f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(8.3334519073E-3f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(4.1665795894E-2f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.6666665459E-1f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(5.0000001201E-1f));
  y = _mm256_fmadd_ps(y, _mm256_mul_ps(r, r), r);
  y = _mm256_add_ps(y, _mm256_set1_ps(1.0f));
  // 2^fx in two steps so fx = 128 (x near the upper limit) does not overflow the exponent field
  __m256i n = _mm256_cvtps_epi32(fx);
  __m256i n1 = _mm256_srai_epi32(n, 1);
  __m256i n2 = _mm256_sub_epi32(n, n1);
  __m256 p1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, _mm256_set1_epi32(127)), 23));
  __m256 p2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, _mm256_set1_epi32(127)), 23));
  y = _mm256_mul_ps(_mm256_mul_ps(y, p1), p2);
  y = _mm256_andnot_ps(underflow, y);
  y = _mm256_blendv_ps(y, _mm256_set1_ps(__builtin_inff()), overflow);
  y = _mm256_blendv_ps(y, x, isNan);
  return y;
}

/** exp of `n` floats in place-safe fashion (in may equal out); the tail goes through exp8 on a padded copy. */
static inline void expArray(const float* in, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, exp8(_mm256_loadu_ps(in + i)));
  if (i < n) {
    alignas(32) float t[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int64_t j = i; j < n; j++) t[j - i] = in[j];
    _mm256_store_ps(t, exp8(_mm256_load_ps(t)));
    for (int64_t j = i; j < n; j++) out[j] = t[j - i];
  }
}

/**
 * y[i] = exp(x[i] − max(x)) for a row of `n` floats (x may equal y): the shared first half of every softmax.
 * @returns max(x) (−inf for n = 0)
 */
static inline float expMinusMax(const float* x, float* y, int64_t n) {
  float mx = -INFINITY;
  for (int64_t i = 0; i < n; i++) mx = x[i] > mx ? x[i] : mx;
  const __m256 vm = _mm256_set1_ps(mx);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm)));
  for (int64_t r = i; r < n; r++) y[r] = x[r] - mx;
  expArray(y + i, y + i, n - i);
  return mx;
}

}  // namespace tsg
