// Fused row sampler (see fused_sampling.h). Semantics: src/sampling/sampler.ts (sampleRow), itself checked against
// src/sampling/sampler_reference.ts (SGLang python/sglang/srt/layers/sampler.py: softmax(logits / T), top-k, top-p
// `cumsum − p > top_p` dropped, min-p `p < min_p · p_max` dropped, multinomial draw).
#include "fused_sampling.h"

// GCC 12 flags the deliberately undefined pass-through operand of its own AVX-512 intrinsics (_mm512_undefined_*).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

#include "sampling.h"

namespace tsg {

namespace {

constexpr double kLog2e = 1.4426950408889634;
constexpr double kLn2Hi = 6.93147180369123816490e-01;  // fdlibm's split of ln 2
constexpr double kLn2Lo = 1.90821492927058770002e-10;
constexpr double kExpFloor = -708.0;  // below: clamped (e^-708 ≈ 3e-308, nothing a sum ≥ 1 or an f32 can hold)
/**
 * Degree-9 polynomial for e^r on |r| ≤ ln2/2, fitted to the relative error at 4000 Chebyshev nodes (least squares,
 * numpy; max relative error 1.4e-14 in 80-bit arithmetic).
 */
constexpr double kC[10] = {1.0000000000000133, 0.9999999999998878, 0.4999999999945981, 0.1666666666788627, 0.04166666703170285,
                           0.008333332984828417, 0.0013888802930141515, 0.00019841616525162736, 2.4883967852239175e-05, 2.747469970165885e-06};
/** Elements per block of the unfiltered draw's prefix sums. */
constexpr int64_t kBlock = 256;

/** e^x for four lanes (x ≤ 709): 2^k · P(r), k = round(x / ln2), r = x − k ln2 (Cody–Waite, FMA), P of degree 9. */
inline __m256d exp4d(__m256d x) {
  x = _mm256_max_pd(_mm256_set1_pd(kExpFloor), x);  // NaN lanes stay NaN (max returns its second operand)
  const __m256d kf = _mm256_round_pd(_mm256_mul_pd(x, _mm256_set1_pd(kLog2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256d r = _mm256_fnmadd_pd(kf, _mm256_set1_pd(kLn2Hi), x);
  r = _mm256_fnmadd_pd(kf, _mm256_set1_pd(kLn2Lo), r);
  __m256d p = _mm256_set1_pd(kC[9]);
  for (int n = 8; n >= 0; n--) p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(kC[n]));
  const __m256i k64 = _mm256_cvtepi32_epi64(_mm256_cvtpd_epi32(kf));
  return _mm256_castsi256_pd(_mm256_add_epi64(_mm256_castpd_si256(p), _mm256_slli_epi64(k64, 52)));
}

inline double hsum(__m256d v) {
  alignas(32) double t[4];
  _mm256_store_pd(t, v);
  return (t[0] + t[1]) + (t[2] + t[3]);
}

/** Σ e^(s[i] − shift) over i < n (lane-parallel double sums; NaN in → NaN out), AVX2. */
double expSum256(const float* s, int64_t n, double shift) {
  const __m256d sh = _mm256_set1_pd(shift);
  __m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(s + i);
    a0 = _mm256_add_pd(a0, exp4d(_mm256_sub_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(v)), sh)));
    a1 = _mm256_add_pd(a1, exp4d(_mm256_sub_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)), sh)));
  }
  double sum = hsum(_mm256_add_pd(a0, a1));
  for (; i < n; i++) sum += fastExpScalar(static_cast<double>(s[i]) - shift);
  return sum;
}

#define TSG_AVX512 __attribute__((target("avx512f,avx512dq,avx512vl")))

/** exp4d for eight lanes (AVX-512F; 2^k applied by vscalefpd). */
TSG_AVX512 inline __m512d exp8d(__m512d x) {
  x = _mm512_max_pd(_mm512_set1_pd(kExpFloor), x);
  const __m512d kf = _mm512_roundscale_pd(_mm512_mul_pd(x, _mm512_set1_pd(kLog2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512d r = _mm512_fnmadd_pd(kf, _mm512_set1_pd(kLn2Hi), x);
  r = _mm512_fnmadd_pd(kf, _mm512_set1_pd(kLn2Lo), r);
  __m512d p = _mm512_set1_pd(kC[9]);
  for (int n = 8; n >= 0; n--) p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(kC[n]));
  return _mm512_scalef_pd(p, kf);
}

/** expSum with AVX-512 (16 elements per iteration). */
TSG_AVX512 double expSum512(const float* s, int64_t n, double shift) {
  const __m512d sh = _mm512_set1_pd(shift);
  __m512d a0 = _mm512_setzero_pd(), a1 = _mm512_setzero_pd();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    a0 = _mm512_add_pd(a0, exp8d(_mm512_sub_pd(_mm512_cvtps_pd(_mm256_loadu_ps(s + i)), sh)));
    a1 = _mm512_add_pd(a1, exp8d(_mm512_sub_pd(_mm512_cvtps_pd(_mm256_loadu_ps(s + i + 8)), sh)));
  }
  double sum = _mm512_reduce_add_pd(_mm512_add_pd(a0, a1));
  for (; i < n; i++) sum += fastExpScalar(static_cast<double>(s[i]) - shift);
  return sum;
}

/** P[i] = f32(e^(f32(s[i] − lse))) for i in [lo, hi), returning their sum (AVX-512, 8 per step). */
TSG_AVX512 double probsBlock512(const float* s, int64_t lo, int64_t hi, double lse, float* P) {
  const __m512d l = _mm512_set1_pd(lse);
  __m512d acc = _mm512_setzero_pd();
  int64_t i = lo;
  for (; i + 8 <= hi; i += 8) {
    const __m512d x = _mm512_cvtps_pd(_mm512_cvtpd_ps(_mm512_sub_pd(_mm512_cvtps_pd(_mm256_loadu_ps(s + i)), l)));
    const __m256 p = _mm512_cvtpd_ps(exp8d(x));
    _mm256_storeu_ps(P + i, p);
    acc = _mm512_add_pd(acc, _mm512_cvtps_pd(p));
  }
  double bs = _mm512_reduce_add_pd(acc);
  for (; i < hi; i++) {
    P[i] = static_cast<float>(fastExpScalar(static_cast<double>(static_cast<float>(static_cast<double>(s[i]) - lse))));
    bs += P[i];
  }
  return bs;
}

/** sampling.h scaleMaxF32 (s = f32(double(s) · invT) in place, max with NaN skipped) with AVX-512: the same values. */
TSG_AVX512 double scaleMax512(float* s, int64_t n, double invT) {
  const __m512d k = _mm512_set1_pd(invT);
  __m256 best = _mm256_set1_ps(-__builtin_inff());
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm512_cvtpd_ps(_mm512_mul_pd(_mm512_cvtps_pd(_mm256_loadu_ps(s + i)), k));
    _mm256_storeu_ps(s + i, v);
    best = _mm256_blendv_ps(best, v, _mm256_cmp_ps(v, best, _CMP_GT_OQ));  // NaN never replaces
  }
  alignas(32) float b[8];
  _mm256_store_ps(b, best);
  float m = -__builtin_inff();
  for (int j = 0; j < 8; j++)
    if (b[j] > m) m = b[j];
  for (; i < n; i++) {
    const float v = static_cast<float>(static_cast<double>(s[i]) * invT);
    s[i] = v;
    if (v > m) m = v;
  }
  return m;
}

/** True when this CPU runs the AVX-512 kernels (checked once; TSGLANG_NO_AVX512=1 forces the AVX2 ones, for tests). */
bool haveAvx512() {
  static const bool ok = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
                         !(std::getenv("TSGLANG_NO_AVX512") != nullptr && std::getenv("TSGLANG_NO_AVX512")[0] == '1');
  return ok;
}

/** p = f32(e^(f32(s − lse))) of four lanes (the reference's probability of a scaled logit). */
inline __m128 probs4(__m128 s, __m256d lse) {
  const __m256d x = _mm256_cvtps_pd(_mm256_cvtpd_ps(_mm256_sub_pd(_mm256_cvtps_pd(s), lse)));
  return _mm256_cvtpd_ps(exp4d(x));
}

/** Σ e^(s[i] − shift) over i < n, AVX-512 where the CPU has it. */
double expSum(const float* s, int64_t n, double shift) {
  return haveAvx512() ? expSum512(s, n, shift) : expSum256(s, n, shift);
}

/** The reference's p of one scaled logit, with V8's Math.exp (fdlibm): exact for the few candidates. */
inline float probExact(float s, double lse) {
  return static_cast<float>(fdlibmExp(static_cast<double>(static_cast<float>(static_cast<double>(s) - lse))));
}

/** The largest f32 ≤ b (a float bound whose `s ≥` test keeps every s ≥ b). */
float floatAtMost(double b) {
  float f = static_cast<float>(b);
  if (static_cast<double>(f) > b) f = std::nextafter(f, -std::numeric_limits<float>::infinity());
  return f;
}

/** Per-thread scratch of one row. */
struct Scratch {
  std::vector<float> P;        // [V] probabilities (unfiltered: all; filtered: gathered ids)
  std::vector<double> blocks;  // [V / kBlock] block sums of P
  std::vector<int32_t> ids;    // [V] gathered ids
  std::vector<int32_t> fresh;  // [V] ids gathered in this round (their P still to compute)
  std::vector<uint64_t> keys;  // candidate sort keys
  std::vector<uint64_t> tmp;   // radix sort buffer
  uint32_t count[3][2048];     // radix digit counts
  void ensure(int64_t V) {
    if (static_cast<int64_t>(P.size()) < V) {
      P.resize(V);
      ids.resize(V);
      fresh.resize(V);
      blocks.resize(V / kBlock + 1);
    }
  }
};

/** sampler.ts drawUnfiltered: the multinomial draw over every id at u, p = f32(e^(f32(s − lse))). */
int32_t drawUnfiltered(const float* s, int64_t V, double lse, double u, Scratch& sc) {
  float* P = sc.P.data();
  double* blocks = sc.blocks.data();
  const __m256d l = _mm256_set1_pd(lse);
  const int64_t nb = (V + kBlock - 1) / kBlock;
  const bool avx512 = haveAvx512();
  double total = 0;
  for (int64_t b = 0; b < nb; b++) {
    const int64_t lo = b * kBlock, hi = std::min(V, lo + kBlock);
    if (avx512) {
      blocks[b] = probsBlock512(s, lo, hi, lse, P);
      total += blocks[b];
      continue;
    }
    __m256d acc = _mm256_setzero_pd();
    int64_t i = lo;
    for (; i + 4 <= hi; i += 4) {
      const __m128 p = probs4(_mm_loadu_ps(s + i), l);
      _mm_storeu_ps(P + i, p);
      acc = _mm256_add_pd(acc, _mm256_cvtps_pd(p));
    }
    double bs = hsum(acc);
    for (; i < hi; i++) {
      P[i] = static_cast<float>(fastExpScalar(static_cast<double>(static_cast<float>(static_cast<double>(s[i]) - lse))));
      bs += P[i];
    }
    blocks[b] = bs;
    total += bs;
  }
  const double target = u * total;
  double acc = 0;
  for (int64_t b = 0; b < nb; b++) {
    if (!(acc + blocks[b] > target)) {
      acc += blocks[b];
      continue;
    }
    const int64_t lo = b * kBlock, hi = std::min(V, lo + kBlock);
    for (int64_t i = lo; i < hi; i++) {
      acc += P[i];
      if (acc > target) return static_cast<int32_t>(i);
    }
  }
  for (int64_t i = V - 1; i >= 0; i--)
    if (P[i] > 0) return static_cast<int32_t>(i);
  return 0;
}

/** Ids i < n with s[i] ≥ bound into ids (ascending); returns the count. */
int64_t gatherAtLeast(const float* s, int64_t n, float bound, int32_t* ids) {
  int64_t c = 0, i = 0;
  const __m256 b = _mm256_set1_ps(bound);
  for (; i + 8 <= n; i += 8) {
    int mask = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(s + i), b, _CMP_GE_OQ));
    while (mask != 0) {
      ids[c++] = static_cast<int32_t>(i + __builtin_ctz(mask));
      mask &= mask - 1;
    }
  }
  for (; i < n; i++)
    if (s[i] >= bound) ids[c++] = static_cast<int32_t>(i);
  return c;
}

/** Candidates from which sortCandidates radix-sorts (fewer: std::sort, cheaper there). */
constexpr size_t kRadixMin = 256;

/**
 * Sorts candidate keys (p bits << 32 | ~id, gathered in ascending id) by (p desc, id asc), i.e. descending key. At
 * least kRadixMin keys: a stable LSD radix sort on the p bits alone (digits of 11, 11 and 10 bits of ~p, one counting
 * pass for all three, a digit that every key shares is skipped): stable on input in ascending id it gives ties in
 * ascending id, the same order as sorting the whole keys descending. O(n) where std::sort took 5-6 ms on the
 * 129K-candidate rows of a flat top-p tail.
 */
void sortCandidates(std::vector<uint64_t>& keys, std::vector<uint64_t>& tmp, uint32_t (&count)[3][2048]) {
  const size_t n = keys.size();
  if (n < kRadixMin) {
    std::sort(keys.begin(), keys.end(), [](uint64_t a, uint64_t b) { return a > b; });
    return;
  }
  constexpr int kShift[3] = {0, 11, 22};
  constexpr uint32_t kMask[3] = {0x7FF, 0x7FF, 0x3FF};
  std::memset(count, 0, sizeof(count));
  for (size_t i = 0; i < n; i++) {
    const uint32_t d = ~static_cast<uint32_t>(keys[i] >> 32);
    count[0][d & 0x7FF]++;
    count[1][(d >> 11) & 0x7FF]++;
    count[2][(d >> 22) & 0x3FF]++;
  }
  tmp.resize(n);
  uint64_t* src = keys.data();
  uint64_t* dst = tmp.data();
  for (int pass = 0; pass < 3; pass++) {
    uint32_t* c = count[pass];
    const uint32_t first = (~static_cast<uint32_t>(src[0] >> 32) >> kShift[pass]) & kMask[pass];
    if (c[first] == n) continue;  // every key has this digit
    uint32_t pos = 0;
    for (uint32_t b = 0; b <= kMask[pass]; b++) {
      const uint32_t k = c[b];
      c[b] = pos;
      pos += k;
    }
    for (size_t i = 0; i < n; i++) {
      const uint64_t key = src[i];
      dst[c[(~static_cast<uint32_t>(key >> 32) >> kShift[pass]) & kMask[pass]]++] = key;
    }
    std::swap(src, dst);
  }
  if (src != keys.data()) std::memcpy(keys.data(), src, n * sizeof(uint64_t));
}

/** sampler.ts drawSortedCandidates over candidates sorted by (p desc, id asc). */
int32_t drawSorted(const std::vector<uint64_t>& keys, const float* P, double topK, double topP, double minThresh, double u) {
  const int64_t n = static_cast<int64_t>(keys.size());
  auto id = [&](int64_t r) { return static_cast<int32_t>(0xFFFFFFFFu - static_cast<uint32_t>(keys[r])); };
  double cum = 0, total = 0;
  int64_t kept = 0;  // ranks [0, kept) are candidates for the draw (those with p < minThresh excluded below)
  for (int64_t r = 0; r < n; r++) {
    const double pr = P[id(r)];
    const double before = cum;
    cum += pr;
    if (static_cast<double>(r) >= topK || before > topP) break;
    kept = r + 1;
    if (pr >= minThresh) total += pr;
  }
  const double target = u * total;
  double acc = 0;
  for (int64_t r = 0; r < kept; r++) {
    const double pr = P[id(r)];
    if (pr < minThresh || pr == 0) continue;
    acc += pr;
    if (acc > target) return id(r);
  }
  for (int64_t r = kept - 1; r >= 0; r--)
    if (P[id(r)] >= minThresh && P[id(r)] > 0) return id(r);
  return n > 0 ? id(0) : 0;
}

/**
 * sampler.ts drawCandidates: the candidate set {p ≥ t} for t = pMax/100, /16, … (the reference's stopping rules),
 * gathered through a bound on s (every id with p ≥ t has s ≥ lse + ln t − 1e-4), then sorted and drawn.
 */
int32_t drawFiltered(const float* s, int64_t V, double mx, double lse, const FusedRowParams& p, Scratch& sc) {
  float* P = sc.P.data();
  int32_t* ids = sc.ids.data();
  int32_t* fresh = sc.fresh.data();
  const float pMax = probExact(static_cast<float>(mx), lse);
  const double minThresh = static_cast<double>(pMax) * p.minP;
  const double kLimit = std::min(p.topK, static_cast<double>(V));
  int64_t nIds = 0;
  float gathered = std::numeric_limits<float>::infinity();  // ids with s ≥ gathered have P set
  double t = static_cast<double>(pMax) * 0.01;
  for (;;) {
    const float bound = floatAtMost(lse + std::log(t) - 1e-4);
    if (bound < gathered) {
      nIds = gatherAtLeast(s, V, bound, ids);
      int64_t nNew = 0;
      for (int64_t j = 0; j < nIds; j++)
        if (!(s[ids[j]] >= gathered)) fresh[nNew++] = ids[j];
      expProbsAt(s, fresh, nNew, lse, P);  // probExact of each new candidate, four at a time
      gathered = bound;
    }
    int64_t count = 0;
    double mass = 0;
    for (int64_t j = 0; j < nIds; j++) {
      const float pr = P[ids[j]];
      if (pr >= t) {
        count++;
        mass += pr;
      }
    }
    if (static_cast<double>(count) >= kLimit || mass > p.topP || t < 1e-38) break;
    if (p.minP > 0 && t <= minThresh) break;
    t /= 16;
  }
  const double floor = std::max(t, minThresh);
  auto& keys = sc.keys;
  keys.clear();
  for (int64_t j = 0; j < nIds; j++) {
    const float pr = P[ids[j]];
    if (pr >= floor) {
      uint32_t bits;
      std::memcpy(&bits, &pr, 4);
      keys.push_back((static_cast<uint64_t>(bits) << 32) | (0xFFFFFFFFu - static_cast<uint32_t>(ids[j])));
    }
  }
  sortCandidates(keys, sc.tmp, sc.count);
  return drawSorted(keys, P, p.topK, p.topP, minThresh, p.u);
}

/** Writes f32(s − lse) over the row (the reference's log-softmax row, for top logprobs). */
void writeLogprobs(float* s, int64_t V, double lse) {
  const __m256d l = _mm256_set1_pd(lse);
  int64_t i = 0;
  for (; i + 4 <= V; i += 4) _mm_storeu_ps(s + i, _mm256_cvtpd_ps(_mm256_sub_pd(_mm256_cvtps_pd(_mm_loadu_ps(s + i)), l)));
  for (; i < V; i++) s[i] = static_cast<float>(static_cast<double>(s[i]) - lse);
}

void sampleOne(float* s, int64_t V, const FusedRowParams& p, int32_t* tok, double* lp, int32_t* status, Scratch& sc) {
  *status = kFusedOk;
  *lp = std::numeric_limits<double>::quiet_NaN();
  if (p.invT == 0) {
    const int64_t best = argmaxF32(s, V);
    *tok = static_cast<int32_t>(best);
    if (p.wantLp == 0 && p.topN <= 0) return;
    const double m = s[best];
    const double sum = expSum(s, V, m);
    if (!std::isfinite(m) || !std::isfinite(sum)) {
      *status = kFusedFallback;
      return;
    }
    const double lse = m + std::log(sum);
    *lp = static_cast<float>(m - lse);
    if (p.topN > 0) writeLogprobs(s, V, lse);
    return;
  }
  const double mx = haveAvx512() ? scaleMax512(s, V, p.invT) : scaleMaxF32(s, V, p.invT);
  const double sum = std::isfinite(mx) ? expSum(s, V, mx) : std::numeric_limits<double>::quiet_NaN();
  if (!std::isfinite(sum) || !(sum >= 1)) {
    *status = kFusedFallback;
    *tok = 0;
    return;
  }
  const double lse = mx + std::log(sum);
  sc.ensure(V);
  const bool unfiltered = p.topK >= static_cast<double>(V) && p.topP >= 1 && p.minP <= 0;
  const int32_t t = unfiltered ? drawUnfiltered(s, V, lse, p.u, sc) : drawFiltered(s, V, mx, lse, p, sc);
  *tok = t;
  *lp = static_cast<float>(static_cast<double>(s[t]) - lse);
  if (p.topN > 0) writeLogprobs(s, V, lse);
}

}  // namespace

double fastExpScalar(double x) {
  alignas(32) double out[4];
  _mm256_store_pd(out, exp4d(_mm256_set1_pd(x)));
  return out[0];
}

void fusedSampleRows(ThreadPool& pool, float* logits, int64_t V, const int32_t* rows, int64_t m, const FusedRowParams* params,
                     int32_t* tokOut, double* lpOut, int32_t* statusOut) {
  pool.parallelFor(m, [&](int64_t j, int) {
    thread_local Scratch sc;
    sampleOne(logits + static_cast<int64_t>(rows[j]) * V, V, params[j], tokOut + j, lpOut + j, statusOut + j, sc);
  });
}

}  // namespace tsg
