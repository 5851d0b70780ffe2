// Linear-layer kernels (see gemm.h). Two paths share one per-element arithmetic:
// - direct: weight rows are decoded in registers inside the k loop (mat-vec and small M: reads 1 byte per FP8
//   weight, 2 per BF16), tiles of MR ≤ 2 activation rows × 4 weight rows;
// - buffered (gemm_blocked.cc): a chunk of weight rows is decoded once to f32 scratch (the same values), then a
//   register tile runs over all M rows (prefill).
// Both compute each y[m, n] as hsum8 of eight FMA lanes over ascending k (FP8: x scaled per scale row-block times
// the raw codes, the sum times 2^56, see common.h), so results are bit-identical.
#include "gemm.h"
#include "gemm_avx512.h"
#include "gemm_blocked.h"

#include <algorithm>
#include <cstdlib>
#include <vector>

#ifdef TSG_HAVE_OPENBLAS
#include <cblas.h>
#endif

namespace tsg {

namespace {

constexpr int64_t kDirectMaxM = 2;

/**
 * Largest M on the direct path: 2 with the AVX2 tiles (2 rows × 4 weight rows), kDirect512MaxM with the AVX-512 ones
 * (tiles of up to 6 x rows × 8 weight rows: small M is cheaper decoding weights in registers than packing them); env
 * TSG_DIRECT_MAXM overrides it for tuning experiments (results never depend on it: both paths give the same bits).
 */
int64_t directMaxM() {
  static const int64_t m = [] {
    const char* v = std::getenv("TSG_DIRECT_MAXM");
    const int64_t n = v ? std::atoll(v) : 0;
    return n > 0 ? n : gemmAvx512() ? kDirect512MaxM : kDirectMaxM;
  }();
  return m;
}

/** Mat-vec tasks per thread (env TSG_MV_TASKS for tuning experiments; results never depend on it). */
const int64_t kMatVecTasksPerThread = [] {
  const char* v = std::getenv("TSG_MV_TASKS");
  const int64_t n = v ? std::atoll(v) : 0;
  return n > 0 ? n : int64_t(4);
}();

/**
 * Software prefetch distance (bytes) of the direct path. A tile reads 4 rows of one contiguous block of weight rows
 * (rows are only 0.5–4 KB long, so the hardware prefetcher sees 4 short streams and never ramps up); while it
 * consumes its block it prefetches the bytes `ahead` further on, proportionally to its progress. Measured on Zen 3
 * (cold mat-vec, 1 thread): rows under 8 KB want the whole next tile (4 rows, at least 4 KB) ahead; rows of 8 KB and
 * more span two pages each, the hardware prefetcher follows them, and 4 KB ahead is best (bf16 K=4096: 9.2 GB/s vs
 * 6-8 with 8-32 KB). Env TSG_MV_PREFETCH (bytes) overrides it for tuning experiments (results never depend on it).
 */
int64_t prefetchAhead(int64_t rowBytes) {
  static const int64_t env = [] {
    const char* v = std::getenv("TSG_MV_PREFETCH");
    return v ? std::atoll(v) : int64_t(-1);
  }();
  if (env >= 0) return env;
  return rowBytes >= 8192 ? int64_t(4096) : std::max<int64_t>(4096, 4 * rowBytes);
}

inline void prefetchLine(const void* p) {
  _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T0);
}

/** f32 rows (weights or decoded scratch). */
struct DecF32 {
  static constexpr int kBytes = 4;
  const float* w;
  int64_t ld;
  using Row = const float*;
  Row row(int64_t n) const { return w + n * ld; }
  const char* base(Row r) const { return reinterpret_cast<const char*>(r); }
  __m256 load8(Row r, int64_t k) const { return _mm256_loadu_ps(r + k); }
  __m256 tail(Row r, int64_t k, int rem) const { return _mm256_maskload_ps(r + k, tailMask(rem)); }
};

/** 16-bit rows (BF16 or F16) widened to f32 by `Cvt` (8 values per call, exact). */
template <__m256 (*Cvt)(const uint16_t*)>
struct Dec16 {
  static constexpr int kBytes = 2;
  const uint16_t* w;
  int64_t ld;
  using Row = const uint16_t*;
  Row row(int64_t n) const { return w + n * ld; }
  const char* base(Row r) const { return reinterpret_cast<const char*>(r); }
  __m256 load8(Row r, int64_t k) const { return Cvt(r + k); }
  __m256 tail(Row r, int64_t k, int rem) const {
    alignas(16) uint16_t t[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int i = 0; i < rem; i++) t[i] = r[k + i];
    return Cvt(t);
  }
};
using DecBf16 = Dec16<bf16X8>;
using DecF16 = Dec16<f16X8>;

/** FP8 rows read in registers as raw codes fp8·2^-120 (fp8RawX8; x-scaled arithmetic, common.h). */
struct DecFp8Raw {
  static constexpr int kBytes = 1;
  const uint8_t* w;
  int64_t ld;
  using Row = const uint8_t*;
  Row row(int64_t n) const { return w + n * ld; }
  const char* base(Row r) const { return reinterpret_cast<const char*>(r); }
  __m256 load8(Row r, int64_t k) const { return fp8RawX8(r + k); }
  __m256 tail(Row r, int64_t k, int rem) const {
    alignas(16) uint8_t t[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int i = 0; i < rem; i++) t[i] = r[k + i];
    return fp8RawX8(t);
  }
};

/** acc[i][j] += x[i][k..k+8) · w[j][k..k+8) for one group of 8 k (the per-element arithmetic of every path). */
template <int MR, int NR, class Dec>
inline void step8(const float* x, int64_t ldx, const Dec& dec, const typename Dec::Row* rows, int64_t k,
                  __m256 (&acc)[MR][NR]) {
  __m256 xv[MR];
  for (int i = 0; i < MR; i++) xv[i] = _mm256_loadu_ps(x + i * ldx + k);
  for (int j = 0; j < NR; j++) {
    const __m256 wv = dec.load8(rows[j], k);
    for (int i = 0; i < MR; i++) acc[i][j] = _mm256_fmadd_ps(xv[i], wv, acc[i][j]);
  }
}

/**
 * The register tile: y[MR, NR] for activation rows x[0..MR) and weight rows n0..n0+NR. The NR rows are one
 * contiguous block; for every 64 bytes each row advances, NR lines `ahead` bytes past the matching point
 * of the block are prefetched.
 */
template <int MR, int NR, class Dec>
inline void tile(const float* x, int64_t ldx, const Dec& dec, int64_t n0, int64_t K, float* y, int64_t ldy,
                 int64_t ahead) {
  __m256 acc[MR][NR];
  for (int i = 0; i < MR; i++)
    for (int j = 0; j < NR; j++) acc[i][j] = _mm256_setzero_ps();
  typename Dec::Row rows[NR];
  for (int j = 0; j < NR; j++) rows[j] = dec.row(n0 + j);
  const char* pf = dec.base(rows[0]) + ahead;
  constexpr int64_t kLine = 64 / Dec::kBytes;  // k per 64-byte line of one row
  const int64_t k8 = K & ~int64_t(7);
  int64_t k = 0;
  for (; k + kLine <= k8; k += kLine) {
    for (int j = 0; j < NR; j++) prefetchLine(pf + (k * Dec::kBytes) * NR + 64 * j);
    for (int64_t u = 0; u < kLine; u += 8) step8<MR, NR>(x, ldx, dec, rows, k + u, acc);
  }
  for (; k < k8; k += 8) step8<MR, NR>(x, ldx, dec, rows, k, acc);
  const int rem = static_cast<int>(K - k8);
  if (rem) {
    const __m256i mask = tailMask(rem);
    __m256 xv[MR];
    for (int i = 0; i < MR; i++) xv[i] = _mm256_maskload_ps(x + i * ldx + k8, mask);
    for (int j = 0; j < NR; j++) {
      const __m256 wv = dec.tail(rows[j], k8, rem);
      for (int i = 0; i < MR; i++) acc[i][j] = _mm256_fmadd_ps(xv[i], wv, acc[i][j]);
    }
  }
  for (int i = 0; i < MR; i++)
    for (int j = 0; j < NR; j++) y[i * ldy + j] = hsum8(acc[i][j]);
}

template <int MR, class Dec>
inline void tileRow(const float* x, int64_t ldx, const Dec& dec, int64_t n0, int nr, int64_t K, float* y, int64_t ldy,
                    int64_t ahead) {
  switch (nr) {
    case 4: tile<MR, 4>(x, ldx, dec, n0, K, y, ldy, ahead); break;
    case 3: tile<MR, 3>(x, ldx, dec, n0, K, y, ldy, ahead); break;
    case 2: tile<MR, 2>(x, ldx, dec, n0, K, y, ldy, ahead); break;
    default: tile<MR, 1>(x, ldx, dec, n0, K, y, ldy, ahead); break;
  }
}

/**
 * y[m, n - n0] for m in [0, M), n in [n0, n1), tiles of up to MAXMR rows × 4 weight rows. The first
 * `ahead` bytes of the range are prefetched up front (the tiles prefetch the rest as they go).
 */
template <int MAXMR, class Dec>
void blockKernel(const float* x, int64_t M, int64_t ldx, const Dec& dec, int64_t n0, int64_t n1, int64_t K, float* y,
                 int64_t ldy) {
  const int64_t ahead = prefetchAhead(dec.ld * Dec::kBytes);
  {
    const char* b = dec.base(dec.row(n0));
    const int64_t bytes = std::min<int64_t>(ahead, (n1 - n0) * dec.ld * Dec::kBytes);
    for (int64_t o = 0; o < bytes; o += 64) prefetchLine(b + o);
  }
  for (int64_t m = 0; m < M; m += MAXMR) {
    const int mr = static_cast<int>(std::min<int64_t>(MAXMR, M - m));
    for (int64_t n = n0; n < n1; n += 4) {
      const int nr = static_cast<int>(std::min<int64_t>(4, n1 - n));
      float* yo = y + m * ldy + (n - n0);
      const float* xo = x + m * ldx;
      if constexpr (MAXMR >= 3) {
        if (mr == 3) {
          tileRow<3>(xo, ldx, dec, n, nr, K, yo, ldy, ahead);
          continue;
        }
      }
      if (mr == 2) tileRow<2>(xo, ldx, dec, n, nr, K, yo, ldy, ahead);
      else tileRow<1>(xo, ldx, dec, n, nr, K, yo, ldy, ahead);
    }
  }
}

}  // namespace

void decodeRow(const WeightView& w, int64_t row, int64_t k0, int64_t len, float* out) {
  switch (w.fmt) {
    case WFormat::F32: {
      std::memcpy(out, static_cast<const float*>(w.data) + row * w.k + k0, len * sizeof(float));
      return;
    }
    case WFormat::BF16: {
      const uint16_t* p = static_cast<const uint16_t*>(w.data) + row * w.k + k0;
      int64_t i = 0;
      for (; i + 8 <= len; i += 8) _mm256_storeu_ps(out + i, bf16X8(p + i));
      for (; i < len; i++) out[i] = bf16ToF32(p[i]);
      return;
    }
    case WFormat::F16: {
      const uint16_t* p = static_cast<const uint16_t*>(w.data) + row * w.k + k0;
      int64_t i = 0;
      for (; i + 8 <= len; i += 8) _mm256_storeu_ps(out + i, f16X8(p + i));
      for (; i < len; i++) out[i] = f16ToF32(p[i]);
      return;
    }
    case WFormat::FP8: {
      const uint8_t* p = static_cast<const uint8_t*>(w.data) + row * w.k;
      const float* srow = w.scale + (row / w.bn) * w.sCols;
      int64_t k = k0;
      const int64_t end = k0 + len;
      if (w.scaleEff != nullptr && w.bk % 8 == 0 && k0 % w.bk == 0) {
        const float* erow = w.scaleEff + (row / w.bn) * w.sCols;
        const __m256 out56 = _mm256_set1_ps(kFp8Out);
        for (; k + 8 <= end; k += 8)
          _mm256_storeu_ps(out + (k - k0), _mm256_mul_ps(_mm256_mul_ps(fp8RawX8(p + k), out56), _mm256_broadcast_ss(erow + k / w.bk)));
      }
      for (; k < end; k++) out[k - k0] = fp8ToF32(p[k]) * srow[k / w.bk];
      return;
    }
  }
}

void fp8ScaleX(const float* x, const WeightView& w, int64_t rowBlock, float* out) {
  const int64_t K = w.k, bk = w.bk;
  const float* srow = w.scaleEff + rowBlock * w.sCols;
  for (int64_t kb = 0, b = 0; kb < K; kb += bk, b++) {
    const int64_t ke = std::min(K, kb + bk);
    const __m256 sv = _mm256_broadcast_ss(srow + b);
    int64_t k = kb;
    for (; k + 8 <= ke; k += 8) _mm256_storeu_ps(out + k, _mm256_mul_ps(_mm256_loadu_ps(x + k), sv));
    for (; k < ke; k++) out[k] = x[k] * srow[b];
  }
}

bool matmulRangeIsBlocked(int64_t M, const WeightView& w) {
  return !(M <= directMaxM() && (w.fmt != WFormat::FP8 || fp8XScaled(w)));
}

void matmulRangePacked(const float* xp, int64_t M, const WeightView& w, int64_t n0, int64_t n1, float* y, int64_t ldy,
                       float* scratch) {
  if (n1 <= n0 || M <= 0) return;
  blockedMatmulRangePacked(xp, M, w, n0, n1, y, ldy, scratch);
}

void matmulRange(const float* x, int64_t M, int64_t ldx, const WeightView& w, int64_t n0, int64_t n1, float* y,
                 int64_t ldy, float* scratch) {
  const int64_t K = w.k;
  if (n1 <= n0 || M <= 0) return;
  if (matmulRangeIsBlocked(M, w)) {
    blockedMatmulRange(x, M, ldx, w, n0, n1, y, ldy, scratch);
    return;
  }
  if (gemmAvx512()) {
    directRange512(x, M, ldx, w, n0, n1, y, ldy, scratch);
    return;
  }
  switch (w.fmt) {
    case WFormat::F32:
      blockKernel<2>(x, M, ldx, DecF32{static_cast<const float*>(w.data), K}, n0, n1, K, y, ldy);
      return;
    case WFormat::BF16:
      blockKernel<2>(x, M, ldx, DecBf16{static_cast<const uint16_t*>(w.data), K}, n0, n1, K, y, ldy);
      return;
    case WFormat::F16:
      blockKernel<2>(x, M, ldx, DecF16{static_cast<const uint16_t*>(w.data), K}, n0, n1, K, y, ldy);
      return;
    case WFormat::FP8: {
      // per scale row-block: x'' rows into scratch (M·K floats), raw codes in registers, outputs times 2^56
      const DecFp8Raw dec{static_cast<const uint8_t*>(w.data), K};
      for (int64_t a = n0; a < n1;) {
        const int64_t rb = a / w.bn, b = std::min(n1, (rb + 1) * w.bn);
        for (int64_t m = 0; m < M; m++) fp8ScaleX(x + m * ldx, w, rb, scratch + m * K);
        float* ya = y + (a - n0);
        blockKernel<2>(scratch, M, K, dec, a, b, K, ya, ldy);
        for (int64_t m = 0; m < M; m++)
          for (int64_t n = 0; n < b - a; n++) ya[m * ldy + n] *= kFp8Out;
        a = b;
      }
      return;
    }
  }
}

bool blasAvailable() {
#ifdef TSG_HAVE_OPENBLAS
  return true;
#else
  return false;
#endif
}

void matmul(ThreadPool& pool, const float* x, int64_t M, int64_t ldx, const WeightView& w, float* y, int64_t ldy,
            const GemmOptions& opt) {
  const int64_t N = w.n, K = w.k;
  if (M <= 0 || N <= 0) return;
  const int64_t rowsPerTask = gemmRowsPerTask(K);
  const int threads = pool.threads();
  // tasks: nChunks × mChunks; split M only when there are too few weight chunks to keep the threads busy
  int64_t nChunk = rowsPerTask;
  if (M <= directMaxM()) {
    // mat-vec: each thread streams a few long contiguous runs of rows (its prefetch runs ahead inside its own run);
    // several runs per thread keep the split dynamic when a core is shared with other work
    const int64_t runs = kMatVecTasksPerThread * threads;
    nChunk = std::max<int64_t>(4, ((N + runs - 1) / runs + 3) & ~int64_t(3));
  }
  const int64_t nTasks = (N + nChunk - 1) / nChunk;
  int64_t mChunks = 1;
  if (nTasks < 2 * threads && M >= 6) mChunks = std::min<int64_t>((2 * threads + nTasks - 1) / nTasks, M / 3);
  const int64_t mChunk = ((M + mChunks - 1) / mChunks + 2) / 3 * 3;
  mChunks = (M + mChunk - 1) / mChunk;

#ifdef TSG_HAVE_OPENBLAS
  const bool useBlas = opt.mode == GemmMode::kBlas && M >= opt.blasMinM;
#else
  const bool useBlas = false;
  (void)opt;
#endif
  if (!useBlas && M > directMaxM()) {
    blockedMatmul(pool, x, M, ldx, w, y, ldy);  // large M: packed blocked GEMM (gemm_blocked.cc), same arithmetic
    return;
  }
  // single-threaded fast exit for tiny products (avoid waking the pool)
  const double macs = static_cast<double>(M) * N * K;
  std::vector<std::vector<float>>* scratchPerThread = nullptr;
  static thread_local std::vector<std::vector<float>> scratch;
  if (static_cast<int>(scratch.size()) < threads) scratch.resize(threads);
  scratchPerThread = &scratch;
  const int64_t need = useBlas ? 256 * K + 8 : gemmScratchFloats(K);
  for (auto& s : scratch)
    if (static_cast<int64_t>(s.size()) < need) s.resize(need);

  if (useBlas) {
#ifdef TSG_HAVE_OPENBLAS
    const int64_t bChunk = 256;
    const int64_t bTasks = (N + bChunk - 1) / bChunk;
    pool.parallelFor(bTasks, [&](int64_t t, int ti) {
      const int64_t n0 = t * bChunk, n1 = std::min(N, n0 + bChunk);
      float* buf = (*scratchPerThread)[ti].data();
      for (int64_t n = n0; n < n1; n++) decodeRow(w, n, 0, K, buf + (n - n0) * K);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(M), static_cast<int>(n1 - n0),
                  static_cast<int>(K), 1.0f, x, static_cast<int>(ldx), buf, static_cast<int>(K), 0.0f, y + n0,
                  static_cast<int>(ldy));
    });
#endif
    return;
  }
  if (threads == 1 || macs < 32768) {
    matmulRange(x, M, ldx, w, 0, N, y, ldy, scratch[0].data());
    return;
  }
  pool.parallelFor(nTasks * mChunks, [&](int64_t t, int ti) {
    const int64_t nt = t / mChunks, mt = t % mChunks;
    const int64_t n0 = nt * nChunk, n1 = std::min(N, n0 + nChunk);
    const int64_t m0 = mt * mChunk, m1 = std::min(M, m0 + mChunk);
    matmulRange(x + m0 * ldx, m1 - m0, ldx, w, n0, n1, y + m0 * ldy + n0, ldy, (*scratchPerThread)[ti].data());
  });
}

}  // namespace tsg
