// Exp passes of the row sampler, bit-identical to V8's Math.exp (fdlibm e_exp.c). See sampling.h.
// Every operation below is one IEEE double operation of fdlibm's, in fdlibm's order (the build uses
// -ffp-contract=off, so nothing is fused); the AVX2 path computes fdlibm's branches for four lanes and blends.
#include "sampling.h"

#include <immintrin.h>

#include <cstring>

namespace tsg {

namespace {

constexpr double kOne = 1.0;
constexpr double kHuge = 1.0e+300;
constexpr double kTwom1000 = 9.33263618503218878990e-302;
constexpr double kOThreshold = 7.09782712893383973096e+02;
constexpr double kUThreshold = -7.45133219101941108420e+02;
constexpr double kLn2Hi = 6.93147180369123816490e-01;
constexpr double kLn2Lo = 1.90821492927058770002e-10;
constexpr double kInvLn2 = 1.44269504088896338700e+00;
constexpr double kP1 = 1.66666666666666019037e-01;
constexpr double kP2 = -2.77777777770155933842e-03;
constexpr double kP3 = 6.61375632143793436117e-05;
constexpr double kP4 = -1.65339022054652515390e-06;
constexpr double kP5 = 4.13813679705723846039e-08;

double fromBits(uint64_t b) {
  double d;
  std::memcpy(&d, &b, 8);
  return d;
}

/** Vector-path range: every lane in [-700, 700] (k within ±1010, results normal, no special cases). */
constexpr double kVecLo = -700.0;
constexpr double kVecHi = 700.0;

/** fdlibm exp of four lanes, all in [kVecLo, kVecHi]. */
inline __m256d exp4(__m256d x) {
  const __m256d signMask = _mm256_set1_pd(-0.0);
  const __m256d ax = _mm256_andnot_pd(signMask, x);
  const __m256d neg = _mm256_cmp_pd(x, _mm256_setzero_pd(), _CMP_LT_OQ);
  // |x| > 0.5 ln2 (hx > 0x3fd62e42), |x| < 1.5 ln2 (hx < 0x3FF0A2B2), |x| < 2^-28 (hx < 0x3e300000).
  const __m256d caseA = _mm256_cmp_pd(ax, _mm256_set1_pd(fromBits(0x3fd62e4300000000ULL)), _CMP_GE_OQ);
  const __m256d caseA1 = _mm256_and_pd(caseA, _mm256_cmp_pd(ax, _mm256_set1_pd(fromBits(0x3FF0A2B200000000ULL)), _CMP_LT_OQ));
  const __m256d caseB = _mm256_cmp_pd(ax, _mm256_set1_pd(fromBits(0x3e30000000000000ULL)), _CMP_LT_OQ);
  const __m256d ln2hi = _mm256_set1_pd(kLn2Hi), ln2lo = _mm256_set1_pd(kLn2Lo);
  // A2: k = (int)(invln2 * x + halF[xsb]); hi = x - k * ln2HI; lo = k * ln2LO.
  const __m256d half = _mm256_blendv_pd(_mm256_set1_pd(0.5), _mm256_set1_pd(-0.5), neg);
  const __m256d k2 = _mm256_round_pd(_mm256_add_pd(_mm256_mul_pd(_mm256_set1_pd(kInvLn2), x), half), _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m256d hi2 = _mm256_sub_pd(x, _mm256_mul_pd(k2, ln2hi));
  const __m256d lo2 = _mm256_mul_pd(k2, ln2lo);
  // A1: hi = x - ln2HI[xsb]; lo = ln2LO[xsb]; k = 1 - 2 xsb.
  const __m256d hi1 = _mm256_sub_pd(x, _mm256_blendv_pd(ln2hi, _mm256_xor_pd(ln2hi, signMask), neg));
  const __m256d lo1 = _mm256_blendv_pd(ln2lo, _mm256_xor_pd(ln2lo, signMask), neg);
  const __m256d k1 = _mm256_blendv_pd(_mm256_set1_pd(1.0), _mm256_set1_pd(-1.0), neg);
  const __m256d hi = _mm256_blendv_pd(hi2, hi1, caseA1);
  const __m256d lo = _mm256_blendv_pd(lo2, lo1, caseA1);
  const __m256d k = _mm256_blendv_pd(k2, k1, caseA1);
  const __m256d r = _mm256_blendv_pd(x, _mm256_sub_pd(hi, lo), caseA);
  const __m256d t = _mm256_mul_pd(r, r);
  __m256d poly = _mm256_add_pd(_mm256_set1_pd(kP4), _mm256_mul_pd(t, _mm256_set1_pd(kP5)));
  poly = _mm256_add_pd(_mm256_set1_pd(kP3), _mm256_mul_pd(t, poly));
  poly = _mm256_add_pd(_mm256_set1_pd(kP2), _mm256_mul_pd(t, poly));
  poly = _mm256_add_pd(_mm256_set1_pd(kP1), _mm256_mul_pd(t, poly));
  const __m256d c = _mm256_sub_pd(r, _mm256_mul_pd(t, poly));
  const __m256d one = _mm256_set1_pd(kOne), two = _mm256_set1_pd(2.0);
  // q = (x*c)/(2-c); fdlibm's (x*c)/(c-2) is exactly -q.
  const __m256d q = _mm256_div_pd(_mm256_mul_pd(r, c), _mm256_sub_pd(two, c));
  const __m256d yC = _mm256_sub_pd(one, _mm256_sub_pd(_mm256_xor_pd(q, signMask), r));
  __m256d yA = _mm256_sub_pd(one, _mm256_sub_pd(_mm256_sub_pd(lo, q), hi));
  // __HI(y) += k << 20 (k >= -1021 in this range).
  const __m256i k64 = _mm256_cvtepi32_epi64(_mm256_cvtpd_epi32(k));
  yA = _mm256_castsi256_pd(_mm256_add_epi64(_mm256_castpd_si256(yA), _mm256_slli_epi64(k64, 52)));
  __m256d y = _mm256_blendv_pd(yC, yA, caseA);
  return _mm256_blendv_pd(y, _mm256_add_pd(one, x), caseB);
}

/** True when all four lanes are inside the vector path's range (false for NaN). */
inline bool inVecRange(__m256d x) {
  const __m256d ok = _mm256_and_pd(_mm256_cmp_pd(x, _mm256_set1_pd(kVecLo), _CMP_GE_OQ), _mm256_cmp_pd(x, _mm256_set1_pd(kVecHi), _CMP_LE_OQ));
  return _mm256_movemask_pd(ok) == 0xf;
}

/** e[0..4) = Math.exp-identical exp of the four lanes of x: exp4 when all lanes are in its range, else fdlibmExp each. */
inline void exp4Exact(__m256d x, double* e) {
  if (inVecRange(x)) {
    _mm256_store_pd(e, exp4(x));
  } else {
    alignas(32) double xs[4];
    _mm256_store_pd(xs, x);
    for (int j = 0; j < 4; j++) e[j] = fdlibmExp(xs[j]);
  }
}

}  // namespace

double fdlibmExp(double x) {
  uint64_t bits;
  std::memcpy(&bits, &x, 8);
  uint32_t hx = static_cast<uint32_t>(bits >> 32);
  const int xsb = (hx >> 31) & 1;
  hx &= 0x7fffffff;
  double hi = 0, lo = 0;
  int k = 0;
  if (hx >= 0x40862E42) {
    if (hx >= 0x7ff00000) {
      if (((hx & 0xfffff) | static_cast<uint32_t>(bits)) != 0) return x + x;
      return xsb == 0 ? x : 0.0;
    }
    if (x > kOThreshold) return kHuge * kHuge;
    if (x < kUThreshold) return kTwom1000 * kTwom1000;
  }
  if (hx > 0x3fd62e42) {
    if (hx < 0x3FF0A2B2) {
      hi = x - (xsb ? -kLn2Hi : kLn2Hi);
      lo = xsb ? -kLn2Lo : kLn2Lo;
      k = 1 - xsb - xsb;
    } else {
      k = static_cast<int>(kInvLn2 * x + (xsb ? -0.5 : 0.5));
      const double t = k;
      hi = x - t * kLn2Hi;
      lo = t * kLn2Lo;
    }
    x = hi - lo;
  } else if (hx < 0x3e300000) {
    if (kHuge + x > kOne) return kOne + x;
  } else {
    k = 0;
  }
  const double t = x * x;
  const double c = x - t * (kP1 + t * (kP2 + t * (kP3 + t * (kP4 + t * kP5))));
  if (k == 0) return kOne - ((x * c) / (c - 2.0) - x);
  double y = kOne - ((lo - (x * c) / (2.0 - c)) - hi);
  uint64_t yb;
  std::memcpy(&yb, &y, 8);
  if (k >= -1021) {
    yb += static_cast<uint64_t>(static_cast<int64_t>(k)) << 52;
    std::memcpy(&y, &yb, 8);
    return y;
  }
  yb += static_cast<uint64_t>(static_cast<int64_t>(k + 1000)) << 52;
  std::memcpy(&y, &yb, 8);
  return y * kTwom1000;
}

double expShiftSum(const float* s, int64_t n, double shift, double* E) {
  double sum = 0;
  int64_t i = 0;
  const __m256d sh = _mm256_set1_pd(shift);
  alignas(32) double e[4];
  for (; i + 4 <= n; i += 4) {
    const __m256d x = _mm256_sub_pd(_mm256_cvtps_pd(_mm_loadu_ps(s + i)), sh);
    exp4Exact(x, e);
    for (int j = 0; j < 4; j++) {
      E[i + j] = e[j];
      sum += e[j];
    }
  }
  for (; i < n; i++) {
    const double v = fdlibmExp(static_cast<double>(s[i]) - shift);
    E[i] = v;
    sum += v;
  }
  return sum;
}

double expProbs(const float* s, int64_t n, double lse, float* P) {
  double total = 0;
  int64_t i = 0;
  const __m256d l = _mm256_set1_pd(lse);
  alignas(32) double e[4];
  for (; i + 4 <= n; i += 4) {
    // f32(s - lse), back to double: Math.fround of the JS subtraction.
    const __m256d x = _mm256_cvtps_pd(_mm256_cvtpd_ps(_mm256_sub_pd(_mm256_cvtps_pd(_mm_loadu_ps(s + i)), l)));
    exp4Exact(x, e);
    for (int j = 0; j < 4; j++) {
      const float p = static_cast<float>(e[j]);
      P[i + j] = p;
      total += static_cast<double>(p);
    }
  }
  for (; i < n; i++) {
    const float p = static_cast<float>(fdlibmExp(static_cast<double>(static_cast<float>(static_cast<double>(s[i]) - lse))));
    P[i] = p;
    total += static_cast<double>(p);
  }
  return total;
}

void expProbsAt(const float* s, const int32_t* ids, int64_t n, double lse, float* P) {
  int64_t j = 0;
  const __m256d l = _mm256_set1_pd(lse);
  alignas(32) double e[4];
  for (; j + 4 <= n; j += 4) {
    const __m128 sv = _mm_setr_ps(s[ids[j]], s[ids[j + 1]], s[ids[j + 2]], s[ids[j + 3]]);
    const __m256d x = _mm256_cvtps_pd(_mm256_cvtpd_ps(_mm256_sub_pd(_mm256_cvtps_pd(sv), l)));
    exp4Exact(x, e);
    for (int q = 0; q < 4; q++) P[ids[j + q]] = static_cast<float>(e[q]);
  }
  for (; j < n; j++) P[ids[j]] = static_cast<float>(fdlibmExp(static_cast<double>(static_cast<float>(static_cast<double>(s[ids[j]]) - lse))));
}

int64_t argmaxF32(const float* s, int64_t n) {
  if (n <= 0 || s[0] != s[0]) return 0;
  // Eight lanes track their own (max, first index); lanes start below every number so index 0 competes too.
  __m256 best = _mm256_set1_ps(-__builtin_inff());
  __m256i bestIdx = _mm256_set1_epi32(-1);
  __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i step = _mm256_set1_epi32(8);
  int64_t i = 0;
  if (n < (int64_t{1} << 31) - 8) {
    for (; i + 8 <= n; i += 8) {
      const __m256 v = _mm256_loadu_ps(s + i);
      const __m256 gt = _mm256_cmp_ps(v, best, _CMP_GT_OQ);  // false for NaN
      best = _mm256_blendv_ps(best, v, gt);
      bestIdx = _mm256_blendv_epi8(bestIdx, idx, _mm256_castps_si256(gt));
      idx = _mm256_add_epi32(idx, step);
    }
  }
  alignas(32) float bv[8];
  alignas(32) int32_t bi[8];
  _mm256_store_ps(bv, best);
  _mm256_store_si256(reinterpret_cast<__m256i*>(bi), bestIdx);
  float m = -__builtin_inff();
  int64_t at = -1;
  for (int j = 0; j < 8; j++) {
    if (bi[j] < 0) continue;
    if (at < 0 || bv[j] > m || (bv[j] == m && bi[j] < at)) {
      m = bv[j];
      at = bi[j];
    }
  }
  for (; i < n; i++) {
    if (s[i] > m) {
      m = s[i];
      at = i;
    }
  }
  return at < 0 ? 0 : at;
}

int64_t selectAtLeast(const double* E, int64_t n, double bound, int32_t* ids) {
  int64_t count = 0;
  int64_t i = 0;
  const __m256d b = _mm256_set1_pd(bound);
  for (; i + 4 <= n; i += 4) {
    int mask = _mm256_movemask_pd(_mm256_cmp_pd(_mm256_loadu_pd(E + i), b, _CMP_GE_OQ));
    while (mask != 0) {
      const int j = __builtin_ctz(mask);
      ids[count++] = static_cast<int32_t>(i + j);
      mask &= mask - 1;
    }
  }
  for (; i < n; i++)
    if (E[i] >= bound) ids[count++] = static_cast<int32_t>(i);
  return count;
}

double scaleMaxF32(float* s, int64_t n, double invT) {
  const __m256d k = _mm256_set1_pd(invT);
  __m128 best = _mm_set1_ps(-__builtin_inff());
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const __m128 v = _mm256_cvtpd_ps(_mm256_mul_pd(_mm256_cvtps_pd(_mm_loadu_ps(s + i)), k));
    _mm_storeu_ps(s + i, v);
    best = _mm_blendv_ps(best, v, _mm_cmp_ps(v, best, _CMP_GT_OQ));  // NaN never replaces
  }
  alignas(16) float b[4];
  _mm_store_ps(b, best);
  float m = -__builtin_inff();
  for (int j = 0; j < 4; j++)
    if (b[j] > m) m = b[j];
  for (; i < n; i++) {
    const float v = static_cast<float>(static_cast<double>(s[i]) * invT);
    s[i] = v;
    if (v > m) m = v;
  }
  return m;
}

}  // namespace tsg
