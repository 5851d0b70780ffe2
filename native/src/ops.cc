// Norms, softmax, activations, RoPE, top-k, embedding and the peak/bandwidth probes (see ops.h).
#include "ops.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

#include "huge_pages.h"

namespace tsg {

namespace {

/** Rows per task so each task does at least ~16K elements of work. */
int64_t rowsPerTask(int64_t width, int64_t rows, int threads) {
  const int64_t minRows = std::max<int64_t>(1, 16384 / std::max<int64_t>(width, 1));
  return std::max(minRows, (rows + 4 * threads - 1) / (4 * threads));
}

template <class F>
void forRows(ThreadPool& pool, int64_t rows, int64_t width, F&& f) {
  const int64_t per = rowsPerTask(width, rows, pool.threads());
  const int64_t tasks = (rows + per - 1) / per;
  if (tasks <= 1) {
    for (int64_t r = 0; r < rows; r++) f(r);
    return;
  }
  pool.parallelFor(tasks, [&](int64_t t, int) {
    const int64_t r1 = std::min(rows, (t + 1) * per);
    for (int64_t r = t * per; r < r1; r++) f(r);
  });
}

/** Σ x[i]² in f64, four lanes of i mod 4 then (l0+l1)+(l2+l3). */
double sumSquares(const float* x, int64_t n) {
  __m256d a = _mm256_setzero_pd();
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const __m256d v = _mm256_cvtps_pd(_mm_loadu_ps(x + i));
    a = _mm256_add_pd(a, _mm256_mul_pd(v, v));
  }
  alignas(32) double l[4];
  _mm256_store_pd(l, a);
  double s = (l[0] + l[1]) + (l[2] + l[3]);
  for (; i < n; i++) s += static_cast<double>(x[i]) * x[i];
  return s;
}

double sumF64(const float* x, int64_t n) {
  __m256d a = _mm256_setzero_pd();
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) a = _mm256_add_pd(a, _mm256_cvtps_pd(_mm_loadu_ps(x + i)));
  alignas(32) double l[4];
  _mm256_store_pd(l, a);
  double s = (l[0] + l[1]) + (l[2] + l[3]);
  for (; i < n; i++) s += x[i];
  return s;
}

/** `n` iterations of 12 independent 8-wide FMAs (register-only; the FMA peak probe). */
__attribute__((noinline)) void fmaLoop(int64_t n) {
  __asm__ volatile(
      "vxorps %%ymm0, %%ymm0, %%ymm0\n\t"
      "vmovaps %%ymm0, %%ymm1\n\tvmovaps %%ymm0, %%ymm2\n\tvmovaps %%ymm0, %%ymm3\n\t"
      "vmovaps %%ymm0, %%ymm4\n\tvmovaps %%ymm0, %%ymm5\n\tvmovaps %%ymm0, %%ymm6\n\t"
      "vmovaps %%ymm0, %%ymm7\n\tvmovaps %%ymm0, %%ymm8\n\tvmovaps %%ymm0, %%ymm9\n\t"
      "vmovaps %%ymm0, %%ymm10\n\tvmovaps %%ymm0, %%ymm11\n\t"
      "vpcmpeqd %%ymm12, %%ymm12, %%ymm12\n\tvpsrld $2, %%ymm12, %%ymm12\n\t"  // small positive constants
      "vmovaps %%ymm12, %%ymm13\n\t"
      "1:\n\t"
      "vfmadd231ps %%ymm12, %%ymm13, %%ymm0\n\tvfmadd231ps %%ymm12, %%ymm13, %%ymm1\n\t"
      "vfmadd231ps %%ymm12, %%ymm13, %%ymm2\n\tvfmadd231ps %%ymm12, %%ymm13, %%ymm3\n\t"
      "vfmadd231ps %%ymm12, %%ymm13, %%ymm4\n\tvfmadd231ps %%ymm12, %%ymm13, %%ymm5\n\t"
      "vfmadd231ps %%ymm12, %%ymm13, %%ymm6\n\tvfmadd231ps %%ymm12, %%ymm13, %%ymm7\n\t"
      "vfmadd231ps %%ymm12, %%ymm13, %%ymm8\n\tvfmadd231ps %%ymm12, %%ymm13, %%ymm9\n\t"
      "vfmadd231ps %%ymm12, %%ymm13, %%ymm10\n\tvfmadd231ps %%ymm12, %%ymm13, %%ymm11\n\t"
      "dec %0\n\t"
      "jnz 1b\n\t"
      "vzeroupper\n\t"
      : "+r"(n)
      :
      : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "cc");
}

}  // namespace

void rmsNorm(ThreadPool& pool, const float* x, int64_t rows, int64_t width, int64_t xStride, const float* w, double eps, float* y) {
  forRows(pool, rows, width, [&](int64_t r) {
    const float* xr = x + r * xStride;
    float* yr = y + r * width;
    const double inv = 1.0 / std::sqrt(sumSquares(xr, width) / static_cast<double>(width) + eps);
    const __m256d vinv = _mm256_set1_pd(inv);
    int64_t i = 0;
    for (; i + 4 <= width; i += 4) {
      const __m256d xv = _mm256_cvtps_pd(_mm_loadu_ps(xr + i));
      const __m256d wv = _mm256_cvtps_pd(_mm_loadu_ps(w + i));
      _mm_storeu_ps(yr + i, _mm256_cvtpd_ps(_mm256_mul_pd(_mm256_mul_pd(xv, vinv), wv)));
    }
    for (; i < width; i++) yr[i] = static_cast<float>(static_cast<double>(xr[i]) * inv * static_cast<double>(w[i]));
  });
}

void layerNorm(ThreadPool& pool, const float* x, int64_t rows, int64_t width, const float* w, const float* b, double eps, float* y) {
  forRows(pool, rows, width, [&](int64_t r) {
    const float* xr = x + r * width;
    float* yr = y + r * width;
    const double mean = sumF64(xr, width) / static_cast<double>(width);
    double var = 0;
    for (int64_t i = 0; i < width; i++) var += (xr[i] - mean) * (xr[i] - mean);
    const double inv = 1.0 / std::sqrt(var / static_cast<double>(width) + eps);
    for (int64_t i = 0; i < width; i++) yr[i] = static_cast<float>((xr[i] - mean) * inv * w[i] + b[i]);
  });
}

void softmax(ThreadPool& pool, const float* x, int64_t rows, int64_t width, float* y) {
  forRows(pool, rows, width, [&](int64_t r) {
    const float* xr = x + r * width;
    float* yr = y + r * width;
    expMinusMax(xr, yr, width);
    const double inv = 1.0 / sumF64(yr, width);
    const __m256d vinv = _mm256_set1_pd(inv);
    int64_t i = 0;
    for (; i + 4 <= width; i += 4)
      _mm_storeu_ps(yr + i, _mm256_cvtpd_ps(_mm256_mul_pd(_mm256_cvtps_pd(_mm_loadu_ps(yr + i)), vinv)));
    for (; i < width; i++) yr[i] = static_cast<float>(yr[i] * inv);
  });
}

void addArrays(const float* a, const float* b, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
  for (; i < n; i++) y[i] = a[i] + b[i];
}

namespace {
inline __m256 sigmoid8(__m256 x) {
  const __m256 one = _mm256_set1_ps(1.0f);
  return _mm256_div_ps(one, _mm256_add_ps(one, exp8(_mm256_sub_ps(_mm256_setzero_ps(), x))));
}
/** Applies f8 to n elements; the tail goes through a zero-padded vector (same arithmetic as full vectors). */
template <class F>
void mapArray(int64_t n, F&& f8) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) f8(i, 8);
  if (i < n) f8(i, static_cast<int>(n - i));
}
inline __m256 load(const float* p, int cnt) {
  return cnt == 8 ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, tailMask(cnt));
}
inline void store(float* p, __m256 v, int cnt) {
  if (cnt == 8) _mm256_storeu_ps(p, v);
  else _mm256_maskstore_ps(p, tailMask(cnt), v);
}
}  // namespace

void sigmoidArray(const float* x, float* y, int64_t n) {
  mapArray(n, [&](int64_t i, int c) { store(y + i, sigmoid8(load(x + i, c)), c); });
}

void siluAndMulArray(const float* g, const float* u, float* y, int64_t n) {
  mapArray(n, [&](int64_t i, int c) {
    const __m256 gv = load(g + i, c);
    const __m256 s = _mm256_div_ps(gv, _mm256_add_ps(_mm256_set1_ps(1.0f), exp8(_mm256_sub_ps(_mm256_setzero_ps(), gv))));
    store(y + i, _mm256_mul_ps(s, load(u + i, c)), c);
  });
}

void rope(ThreadPool& pool, float* x, int64_t numTokens, const int32_t* positions, int64_t numHeads, int64_t headDim,
          int64_t rowStride, int64_t offset, const float* invFreq, int64_t rotaryDim, bool interleaved, double mscale) {
  const int64_t half = rotaryDim / 2;
  forRows(pool, numTokens, numHeads * rotaryDim * 4, [&](int64_t t) {
    thread_local std::vector<double> cs, sn;
    if (static_cast<int64_t>(cs.size()) < half) {
      cs.resize(half);
      sn.resize(half);
    }
    const double pos = positions[t];
    for (int64_t i = 0; i < half; i++) {
      const float angle = static_cast<float>(pos * static_cast<double>(invFreq[i]));
      cs[i] = static_cast<double>(static_cast<float>(static_cast<float>(std::cos(static_cast<double>(angle))) * mscale));
      sn[i] = static_cast<double>(static_cast<float>(static_cast<float>(std::sin(static_cast<double>(angle))) * mscale));
    }
    for (int64_t h = 0; h < numHeads; h++) {
      float* b = x + t * rowStride + h * headDim + offset;
      if (!interleaved) {
        for (int64_t i = 0; i < half; i++) {
          const double a0 = b[i], b0 = b[i + half];
          b[i] = static_cast<float>(a0 * cs[i] - b0 * sn[i]);
          b[i + half] = static_cast<float>(b0 * cs[i] + a0 * sn[i]);
        }
      } else {
        for (int64_t i = 0; i < half; i++) {
          const double a0 = b[2 * i], b0 = b[2 * i + 1];
          b[2 * i] = static_cast<float>(a0 * cs[i] - b0 * sn[i]);
          b[2 * i + 1] = static_cast<float>(b0 * cs[i] + a0 * sn[i]);
        }
      }
    }
  });
}

void topk(ThreadPool& pool, const float* x, int64_t rows, int64_t width, int64_t k, int32_t* idx, float* val) {
  forRows(pool, rows, width * 4, [&](int64_t r) {
    const float* xr = x + r * width;
    thread_local std::vector<int32_t> order;
    order.resize(width);
    std::iota(order.begin(), order.end(), 0);
    auto key = [&](int32_t i) { return std::isnan(xr[i]) ? -INFINITY : xr[i]; };
    auto before = [&](int32_t a, int32_t b) {
      const float ka = key(a), kb = key(b);
      return ka > kb || (ka == kb && a < b);
    };
    if (k < width) {
      std::nth_element(order.begin(), order.begin() + k, order.end(), before);
    }
    std::sort(order.begin(), order.begin() + k, before);
    for (int64_t j = 0; j < k; j++) {
      idx[r * k + j] = order[j];
      val[r * k + j] = xr[order[j]];
    }
  });
}

bool embedding(ThreadPool& pool, const int32_t* ids, int64_t n, const WeightView& table, float* y) {
  for (int64_t t = 0; t < n; t++)
    if (ids[t] < 0 || ids[t] >= table.n) return false;
  forRows(pool, n, table.k, [&](int64_t t) { decodeRow(table, ids[t], 0, table.k, y + t * table.k); });
  return true;
}

double measureFmaPeak(ThreadPool& pool, double seconds) {
  const int threads = pool.threads();
  std::vector<double> flops(threads, 0.0);
  const auto t0 = std::chrono::steady_clock::now();
  pool.parallelFor(threads, [&](int64_t task, int) {
    const auto start = std::chrono::steady_clock::now();
    int64_t iters = 0;
    do {
      fmaLoop(4096);
      iters += 4096;
    } while (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < seconds);
    flops[task] = static_cast<double>(iters) * 12 * 8 * 2;
  });
  const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  double total = 0;
  for (double f : flops) total += f;
  return total / el / 1e9;
}

double measureReadBandwidth(ThreadPool& pool, int64_t bytes, int reps) {
  const int64_t n = bytes / 4 / 64 * 64;
  size_t mapped = 0;
  float* huge = static_cast<float*>(mapHugePages(static_cast<size_t>(n) * 4, &mapped));
  std::vector<float> fallback(huge ? 0 : n);
  float* buf = huge ? huge : fallback.data();
  const int threads = pool.threads();
  const int64_t per = (n / threads) / 64 * 64;
  pool.parallelFor(threads, [&](int64_t t, int) {
    const int64_t e = t == threads - 1 ? n : (t + 1) * per;
    for (int64_t i = t * per; i < e; i++) buf[i] = static_cast<float>(i & 7);
  });
  double best = 0;
  for (int r = 0; r < reps; r++) {
    std::vector<float> sums(threads);
    const auto t0 = std::chrono::steady_clock::now();
    pool.parallelFor(threads, [&](int64_t t, int) {
      const int64_t e = t == threads - 1 ? n : (t + 1) * per;
      __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
      for (int64_t i = t * per; i < e; i += 32) {
        a0 = _mm256_add_ps(a0, _mm256_loadu_ps(&buf[i]));
        a1 = _mm256_add_ps(a1, _mm256_loadu_ps(&buf[i + 8]));
        a2 = _mm256_add_ps(a2, _mm256_loadu_ps(&buf[i + 16]));
        a3 = _mm256_add_ps(a3, _mm256_loadu_ps(&buf[i + 24]));
      }
      sums[t] = hsum8(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    });
    const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    volatile float sink = sums[0];
    (void)sink;
    best = std::max(best, static_cast<double>(n) * 4 / el / 1e9);
  }
  if (huge) unmapHugePages(huge, mapped);
  return best;
}

}  // namespace tsg
