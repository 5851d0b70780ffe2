// Blocked large-M GEMM (see gemm_blocked.h): chunks of kNB weight rows decoded once to f32 scratch, then 3×4
// register tiles over (kMC activation rows) × (kKC of k), accumulators carried between k blocks so blocking over k
// changes no bit of the result (each y[m, n] is hsum8 of eight FMA lanes over ascending k, as in gemm.cc).
#include "gemm_blocked.h"

#include <algorithm>
#include <cstdlib>

namespace tsg {

namespace {

/** A blocking parameter: env `name` (tuning experiments; results never depend on it) rounded to `multiple`, else dflt. */
int64_t blockingParam(const char* name, int64_t dflt, int64_t multiple) {
  const char* v = std::getenv(name);
  const int64_t n = v ? std::atoll(v) / multiple * multiple : 0;
  return n > 0 ? n : dflt;
}

const int64_t kNB = blockingParam("TSG_GEMM_NB", 32, 4);   // weight rows per chunk (decoded once into scratch)
const int64_t kKC = blockingParam("TSG_GEMM_KC", 2048, 8);  // k per block (measured on Zen 2: blocks under ~1024 cost more in lane round trips than they save)
const int64_t kMC = blockingParam("TSG_GEMM_MC", 48, 3);   // activation rows per block

/**
 * The 3×4 (or smaller) f32 tile over k in [0, klen) plus an optional zero-padded tail, continuing the eight-lane
 * accumulators kept in `acc` (layout [MR][accStride/8][8]) between k blocks: the same per-lane FMA sequence as
 * `tile`, so blocking over k changes no bit of the result.
 */
template <int MR, int NR>
inline void tileAcc(const float* x, int64_t ldx, const float* w, int64_t ldw, int64_t klen, int rem, float* acc,
                    int64_t accStride, bool first, bool last, float* y, int64_t ldy) {
  __m256 a[MR][NR];
  for (int i = 0; i < MR; i++)
    for (int j = 0; j < NR; j++) a[i][j] = first ? _mm256_setzero_ps() : _mm256_loadu_ps(acc + i * accStride + j * 8);
  for (int64_t k = 0; k < klen; k += 8) {
    __m256 xv[MR];
    for (int i = 0; i < MR; i++) xv[i] = _mm256_loadu_ps(x + i * ldx + k);
    for (int j = 0; j < NR; j++) {
      const __m256 wv = _mm256_loadu_ps(w + j * ldw + k);
      for (int i = 0; i < MR; i++) a[i][j] = _mm256_fmadd_ps(xv[i], wv, a[i][j]);
    }
  }
  if (rem) {
    const __m256i mask = tailMask(rem);
    __m256 xv[MR];
    for (int i = 0; i < MR; i++) xv[i] = _mm256_maskload_ps(x + i * ldx + klen, mask);
    for (int j = 0; j < NR; j++) {
      const __m256 wv = _mm256_maskload_ps(w + j * ldw + klen, mask);
      for (int i = 0; i < MR; i++) a[i][j] = _mm256_fmadd_ps(xv[i], wv, a[i][j]);
    }
  }
  if (last) {
    for (int i = 0; i < MR; i++)
      for (int j = 0; j < NR; j++) y[i * ldy + j] = hsum8(a[i][j]);
  } else {
    for (int i = 0; i < MR; i++)
      for (int j = 0; j < NR; j++) _mm256_storeu_ps(acc + i * accStride + j * 8, a[i][j]);
  }
}

template <int MR>
inline void tileAccRow(int nr, const float* x, int64_t ldx, const float* w, int64_t ldw, int64_t klen, int rem, float* acc,
                       int64_t accStride, bool first, bool last, float* y, int64_t ldy) {
  switch (nr) {
    case 4: tileAcc<MR, 4>(x, ldx, w, ldw, klen, rem, acc, accStride, first, last, y, ldy); break;
    case 3: tileAcc<MR, 3>(x, ldx, w, ldw, klen, rem, acc, accStride, first, last, y, ldy); break;
    case 2: tileAcc<MR, 2>(x, ldx, w, ldw, klen, rem, acc, accStride, first, last, y, ldy); break;
    default: tileAcc<MR, 1>(x, ldx, w, ldw, klen, rem, acc, accStride, first, last, y, ldy); break;
  }
}

/**
 * y[m, j] = x[m]·w[j] for m < M, j < nRows (f32 weight rows with leading dimension ldw), blocked over
 * (kMC rows of x) × (kKC of k); `acc` holds kMC × kNB × 8 floats.
 */
void blockedGemm(const float* x, int64_t M, int64_t ldx, const float* w, int64_t ldw, int64_t nRows, int64_t K, float* y,
                 int64_t ldy, float* acc) {
  const int64_t k8 = K & ~int64_t(7);
  const int rem = static_cast<int>(K - k8);
  const int64_t numKBlocks = std::max<int64_t>(1, (k8 + kKC - 1) / kKC);
  const int64_t accStride = kNB * 8;
  for (int64_t m0 = 0; m0 < M; m0 += kMC) {
    const int64_t m1 = std::min(M, m0 + kMC);
    for (int64_t b = 0; b < numKBlocks; b++) {
      const int64_t kb = b * kKC;
      const int64_t klen = std::max<int64_t>(0, std::min(kKC, k8 - kb));
      const bool first = b == 0, last = b == numKBlocks - 1;
      const int tail = last ? rem : 0;
      for (int64_t m = m0; m < m1; m += 3) {
        const int mr = static_cast<int>(std::min<int64_t>(3, m1 - m));
        for (int64_t n = 0; n < nRows; n += 4) {
          const int nr = static_cast<int>(std::min<int64_t>(4, nRows - n));
          const float* xo = x + m * ldx + kb;
          const float* wo = w + n * ldw + kb;
          float* ao = acc + (m - m0) * accStride + n * 8;
          float* yo = y + m * ldy + n;
          if (mr == 3) tileAccRow<3>(nr, xo, ldx, wo, ldw, klen, tail, ao, accStride, first, last, yo, ldy);
          else if (mr == 2) tileAccRow<2>(nr, xo, ldx, wo, ldw, klen, tail, ao, accStride, first, last, yo, ldy);
          else tileAccRow<1>(nr, xo, ldx, wo, ldw, klen, tail, ao, accStride, first, last, yo, ldy);
        }
      }
    }
  }
}

}  // namespace

int64_t blockedRowsPerTask(int64_t K) {
  (void)K;
  return kNB;
}

int64_t blockedScratchFloats(int64_t K) {
  return kNB * K + kMC * kNB * 8 + 16;
}

void blockedMatmulRange(const float* x, int64_t M, int64_t ldx, const WeightView& w, int64_t n0, int64_t n1, float* y,
                        int64_t ldy, float* scratch) {
  const int64_t K = w.k;
  // f32 weight rows are used in place, other formats decoded a chunk at a time to f32 scratch (the same values)
  float* acc = scratch + kNB * K;
  for (int64_t c0 = n0; c0 < n1; c0 += kNB) {
    const int64_t c1 = std::min(n1, c0 + kNB);
    const float* wrows;
    if (w.fmt == WFormat::F32) {
      wrows = static_cast<const float*>(w.data) + c0 * K;
    } else {
      for (int64_t n = c0; n < c1; n++) decodeRow(w, n, 0, K, scratch + (n - c0) * K);
      wrows = scratch;
    }
    blockedGemm(x, M, ldx, wrows, K, c1 - c0, K, y + (c0 - n0), ldy, acc);
  }
}

}  // namespace tsg
