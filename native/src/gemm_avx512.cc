// AVX-512 linear-layer kernels (see gemm_avx512.h). Every function that uses AVX-512 carries TSG_AVX512 (a target
// attribute), so the rest of the addon stays AVX2 and this file's code runs only after gemmAvx512() said yes.
//
// Lane layout: a zmm register is [out A: k-lanes 0..7 | out B: k-lanes 0..7]. The direct path pairs weight rows
// (n, n+1) — both rows' 8 weights of one k group decoded into one zmm — against x broadcast to both halves; the
// packed tile pairs panel rows (j, j+1), which the panel layout [k/8][kNR512][8] stores side by side. Either way each
// FMA lane computes exactly what the AVX2 kernels' lane does (x · w + acc, fused, over ascending k), and the end
// reduces each half with hsum8 (× 2^56 for x-scaled FP8), so the bits equal the AVX2 path's.
#include "gemm_avx512.h"

// GCC 12 flags the deliberately undefined pass-through operand of its own AVX-512 intrinsics (_mm512_undefined_*).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "gemm.h"

#define TSG_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl")))

namespace tsg {

bool gemmAvx512() {
  static const bool ok = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
                         !(std::getenv("TSGLANG_NO_AVX512") != nullptr && std::getenv("TSGLANG_NO_AVX512")[0] == '1');
  return ok;
}

namespace {

/** Rows of x per direct tile and weight-row pairs per direct tile (8 weight rows). */
constexpr int kDirectMR = 6;
constexpr int kDirectNP = 4;

inline void prefetchLine(const void* p) {
  _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T0);
}

/**
 * Bytes ahead of the tile that the direct path prefetches (the AVX2 path's rule for its 4-row tiles, for 8 rows: the
 * whole next tile for rows under 8 KB, 4 KB for longer rows, which the hardware prefetcher follows).
 */
int64_t prefetchAhead512(int64_t rowBytes) {
  return rowBytes >= 8192 ? int64_t(4096) : std::max<int64_t>(4096, 2 * kDirectNP * rowBytes);
}

/** The two halves of a zmm as ymm (lanes 0..7, lanes 8..15). */
TSG_AVX512 inline __m256 lowHalf(__m512 v) { return _mm512_castps512_ps256(v); }
TSG_AVX512 inline __m256 highHalf(__m512 v) { return _mm512_extractf32x8_ps(v, 1); }

/** 8 floats of x broadcast to both halves. */
TSG_AVX512 inline __m512 bcast8(const float* p) { return _mm512_broadcast_f32x8(_mm256_loadu_ps(p)); }

/** f32 weight rows: [r0[k..k+8) | r1[k..k+8)]. */
struct Pair32 {
  static constexpr int kBytes = 4;
  using T = float;
  TSG_AVX512 static __m512 pair(const float* r0, const float* r1) {
    return _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_loadu_ps(r0)), _mm256_loadu_ps(r1), 1);
  }
};

/** BF16 weight rows widened exactly (u32 = u16 << 16). */
struct PairBf16 {
  static constexpr int kBytes = 2;
  using T = uint16_t;
  TSG_AVX512 static __m512 pair(const uint16_t* r0, const uint16_t* r1) {
    const __m256i b = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r0))),
                                              _mm_loadu_si128(reinterpret_cast<const __m128i*>(r1)), 1);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(b), 16));
  }
};

/** F16 weight rows widened exactly (vcvtph2ps). */
struct PairF16 {
  static constexpr int kBytes = 2;
  using T = uint16_t;
  TSG_AVX512 static __m512 pair(const uint16_t* r0, const uint16_t* r1) {
    const __m256i b = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r0))),
                                              _mm_loadu_si128(reinterpret_cast<const __m128i*>(r1)), 1);
    return _mm512_cvtph_ps(b);
  }
};

/** FP8 raw codes fp8·2^-120 (common.h fp8RawX8, the same bit operations on 16 lanes). */
struct PairFp8 {
  static constexpr int kBytes = 1;
  using T = uint8_t;
  TSG_AVX512 static __m512 pair(const uint8_t* r0, const uint8_t* r1) {
    const __m128i b = _mm_unpacklo_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(r0)),
                                         _mm_loadl_epi64(reinterpret_cast<const __m128i*>(r1)));
    __m512i v = _mm512_slli_epi32(_mm512_cvtepi8_epi32(b), 20);
    v = _mm512_and_si512(v, _mm512_set1_epi32(static_cast<int32_t>(0x87F00000u)));
    return _mm512_castsi512_ps(v);
  }
};

/** One group of 8 k of a direct tile: each pair of weight rows decoded once, each x row broadcast once. */
template <int MR, class P>
TSG_AVX512 inline __attribute__((always_inline)) void step512(const float* x, int64_t ldx, const typename P::T* const* rows,
                                                               int64_t k, __m512 (&acc)[MR][kDirectNP]) {
  __m512 wv[kDirectNP];
  for (int p = 0; p < kDirectNP; p++) wv[p] = P::pair(rows[2 * p] + k, rows[2 * p + 1] + k);
  for (int i = 0; i < MR; i++) {
    const __m512 xb = bcast8(x + i * ldx + k);
    for (int p = 0; p < kDirectNP; p++) acc[i][p] = _mm512_fmadd_ps(xb, wv[p], acc[i][p]);
  }
}

/**
 * One direct tile: y[i, j] for x rows i < MR and the 2·kDirectNP weight rows rows[j] (rows past the range repeat
 * the last one; only j < nrows are written), over K. Per group of 8 k: each pair of rows is decoded once, each x
 * row is broadcast once, MR × kDirectNP FMAs. The tail (K mod 8) runs on zero-padded copies (+0·+0 lanes, as the
 * AVX2 path's masked tail). `ahead` ≥ 0: prefetch that far past the tile's block as it goes (first x tile only).
 */
template <int MR, class P>
TSG_AVX512 void tile512(const float* x, int64_t ldx, const typename P::T* const* rows, int nrows, int64_t K, float* y,
                        int64_t ldy, bool scaleOut, int64_t ahead) {
  __m512 acc[MR][kDirectNP];
  for (int i = 0; i < MR; i++)
    for (int p = 0; p < kDirectNP; p++) acc[i][p] = _mm512_setzero_ps();
  const int64_t k8 = K & ~int64_t(7);
  constexpr int64_t kLine = 64 / P::kBytes;  // k per 64-byte line of one row
  int64_t k = 0;
  if (ahead >= 0) {
    const char* pf = reinterpret_cast<const char*>(rows[0]) + ahead;
    for (; k + kLine <= k8; k += kLine) {
      for (int j = 0; j < 2 * kDirectNP; j++) prefetchLine(pf + (k * P::kBytes) * 2 * kDirectNP + 64 * j);
      for (int64_t u = 0; u < kLine; u += 8) step512<MR, P>(x, ldx, rows, k + u, acc);
    }
  }
  for (; k < k8; k += 8) step512<MR, P>(x, ldx, rows, k, acc);
  const int rem = static_cast<int>(K - k8);
  if (rem) {
    alignas(64) typename P::T wt[2 * kDirectNP][8];
    std::memset(wt, 0, sizeof(wt));
    for (int j = 0; j < 2 * kDirectNP; j++)
      for (int r = 0; r < rem; r++) wt[j][r] = rows[j][k8 + r];
    const __m256i mask = tailMask(rem);
    __m512 wv[kDirectNP];
    for (int p = 0; p < kDirectNP; p++) wv[p] = P::pair(wt[2 * p], wt[2 * p + 1]);
    for (int i = 0; i < MR; i++) {
      const __m512 xb = _mm512_broadcast_f32x8(_mm256_maskload_ps(x + i * ldx + k8, mask));
      for (int p = 0; p < kDirectNP; p++) acc[i][p] = _mm512_fmadd_ps(xb, wv[p], acc[i][p]);
    }
  }
  for (int i = 0; i < MR; i++)
    for (int j = 0; j < nrows; j++) {
      float v = hsum8(j & 1 ? highHalf(acc[i][j >> 1]) : lowHalf(acc[i][j >> 1]));
      if (scaleOut) v *= kFp8Out;
      y[i * ldy + j] = v;
    }
}

/**
 * y[m, n - n0] for m < M, n in [n0, n1): for each block of 8 weight rows (n outer, so the block stays in L1 for all
 * of x's tiles), balanced x tiles of up to kDirectMR rows (M = 8: 4 + 4; 32: 5 · 4 + 6 · 2).
 */
template <class P>
TSG_AVX512 void direct512(const float* x, int64_t M, int64_t ldx, const typename P::T* w, int64_t K, int64_t n0,
                          int64_t n1, float* y, int64_t ldy, bool scaleOut) {
  const int64_t rowBytes = K * P::kBytes;
  const int64_t ahead = prefetchAhead512(rowBytes);
  {
    const char* b = reinterpret_cast<const char*>(w + n0 * K);
    const int64_t bytes = std::min<int64_t>(ahead, (n1 - n0) * rowBytes);
    for (int64_t o = 0; o < bytes; o += 64) prefetchLine(b + o);
  }
  constexpr int kRows = 2 * kDirectNP;
  for (int64_t n = n0; n < n1; n += kRows) {
    const int nrows = static_cast<int>(std::min<int64_t>(kRows, n1 - n));
    const typename P::T* rows[kRows];
    for (int j = 0; j < kRows; j++) rows[j] = w + (n + std::min(j, nrows - 1)) * K;
    float* yo = y + (n - n0);
    const int64_t tiles = (M + kDirectMR - 1) / kDirectMR;
    for (int64_t t = 0, m = 0; t < tiles; t++) {
      const int mr = static_cast<int>((M - m) / (tiles - t));  // balanced tiles: M = 8 → 4 + 4, 32 → 5·4 + 6·2
      const int64_t pf = m == 0 ? ahead : -1;
      const float* xo = x + m * ldx;
      float* ym = yo + m * ldy;
      m += mr;
      switch (mr) {
        case 6: tile512<6, P>(xo, ldx, rows, nrows, K, ym, ldy, scaleOut, pf); break;
        case 5: tile512<5, P>(xo, ldx, rows, nrows, K, ym, ldy, scaleOut, pf); break;
        case 4: tile512<4, P>(xo, ldx, rows, nrows, K, ym, ldy, scaleOut, pf); break;
        case 3: tile512<3, P>(xo, ldx, rows, nrows, K, ym, ldy, scaleOut, pf); break;
        case 2: tile512<2, P>(xo, ldx, rows, nrows, K, ym, ldy, scaleOut, pf); break;
        default: tile512<1, P>(xo, ldx, rows, nrows, K, ym, ldy, scaleOut, pf); break;
      }
    }
  }
}

/** gemm_blocked.cc's packed x tile height (rows per tile of packActivations). */
constexpr int kPackedMR = 4;

/**
 * tilePacked (gemm_blocked.cc) with AVX-512 over a panel of kNR512 rows: acc [MR][kNR512][8] = [MR][NP][16] floats.
 * SCALE: x'' = x · sK as read (the ymm product, the same as fp8ScaleX), stored to xs in x's layout.
 */
template <int MR, bool SCALE>
TSG_AVX512 void tilePacked512(const float* xp, const float* wp, int64_t steps, float* acc, bool first, bool last,
                              float* y, int64_t ldy, int nr, float outScale, const float* sK, float* xs) {
  constexpr int NP = kNR512 / 2;
  __m512 a[MR][NP];
  for (int i = 0; i < MR; i++)
    for (int p = 0; p < NP; p++) a[i][p] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(acc + (i * NP + p) * 16);
  for (int64_t s = 0; s < steps; s++) {
    __m512 wv[NP];
    for (int p = 0; p < NP; p++) wv[p] = _mm512_loadu_ps(wp + (s * kNR512 + 2 * p) * 8);
    for (int i = 0; i < MR; i++) {
      __m512 xb;
      if (SCALE) {
        const __m256 xv = _mm256_mul_ps(_mm256_loadu_ps(xp + (s * kPackedMR + i) * 8), _mm256_loadu_ps(sK + s * 8));
        _mm256_storeu_ps(xs + (s * kPackedMR + i) * 8, xv);
        xb = _mm512_broadcast_f32x8(xv);
      } else {
        xb = bcast8(xp + (s * kPackedMR + i) * 8);
      }
      for (int p = 0; p < NP; p++) a[i][p] = _mm512_fmadd_ps(xb, wv[p], a[i][p]);
    }
  }
  if (!last) {
    for (int i = 0; i < MR; i++)
      for (int p = 0; p < NP; p++) _mm512_storeu_ps(acc + (i * NP + p) * 16, a[i][p]);
    return;
  }
  if (MR == kPackedMR) {
    const __m128 out = _mm_set1_ps(outScale);
    for (int j = 0; j < nr; j++) {
      const int p = j >> 1;
      __m256 h[4];
      for (int i = 0; i < 4; i++) h[i] = j & 1 ? highHalf(a[i % MR][p]) : lowHalf(a[i % MR][p]);
      const __m128 v = _mm_mul_ps(hsum8x4(h[0], h[1], h[2], h[3]), out);
      _mm_store_ss(y + j, v);
      for (int i = 1; i < kPackedMR; i++) {
        const int bits = _mm_extract_ps(v, i);
        std::memcpy(y + i * ldy + j, &bits, 4);
      }
    }
    return;
  }
  for (int i = 0; i < MR; i++)
    for (int j = 0; j < nr; j++) y[i * ldy + j] = hsum8(j & 1 ? highHalf(a[i][j >> 1]) : lowHalf(a[i][j >> 1])) * outScale;
}

}  // namespace

void directRange512(const float* x, int64_t M, int64_t ldx, const WeightView& w, int64_t n0, int64_t n1, float* y,
                    int64_t ldy, float* scratch) {
  const int64_t K = w.k;
  if (n1 <= n0 || M <= 0) return;
  switch (w.fmt) {
    case WFormat::F32:
      direct512<Pair32>(x, M, ldx, static_cast<const float*>(w.data), K, n0, n1, y, ldy, false);
      return;
    case WFormat::BF16:
      direct512<PairBf16>(x, M, ldx, static_cast<const uint16_t*>(w.data), K, n0, n1, y, ldy, false);
      return;
    case WFormat::F16:
      direct512<PairF16>(x, M, ldx, static_cast<const uint16_t*>(w.data), K, n0, n1, y, ldy, false);
      return;
    case WFormat::FP8: {
      // per scale row-block: x'' rows (M·K floats: the caller's scratch when it is large enough, else this thread's
      // own buffer), raw codes in registers, outputs times 2^56
      static thread_local std::vector<float> own;
      float* xs = scratch;
      if (M * K > gemmScratchFloats(K)) {
        if (static_cast<int64_t>(own.size()) < M * K) own.resize(M * K);
        xs = own.data();
      }
      for (int64_t a = n0; a < n1;) {
        const int64_t rb = a / w.bn, b = std::min(n1, (rb + 1) * w.bn);
        for (int64_t m = 0; m < M; m++) fp8ScaleX(x + m * ldx, w, rb, xs + m * K);
        direct512<PairFp8>(xs, M, K, static_cast<const uint8_t*>(w.data), K, a, b, y + (a - n0), ldy, true);
        a = b;
      }
      return;
    }
  }
}

PackedTileFn packedTile512(int mr, bool scale) {
  static const PackedTileFn plain[4] = {&tilePacked512<1, false>, &tilePacked512<2, false>, &tilePacked512<3, false>,
                                        &tilePacked512<4, false>};
  static const PackedTileFn scaling[4] = {&tilePacked512<1, true>, &tilePacked512<2, true>, &tilePacked512<3, true>,
                                          &tilePacked512<4, true>};
  return (scale ? scaling : plain)[mr - 1];
}

}  // namespace tsg
