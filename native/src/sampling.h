// Sampling helpers: the greedy argmax and the exp passes of the row sampler (src/sampling/sampler.ts), bit-identical to JavaScript's
// Math.exp (V8 computes it with fdlibm's __ieee754_exp; this is the same algorithm, operation for operation, four
// doubles at a time with AVX2, compiled without FMA contraction).
#pragma once
#include <cstdint>

namespace tsg {

/** fdlibm __ieee754_exp (scalar), the function V8's Math.exp is. */
double fdlibmExp(double x);

/**
 * E[i] = exp(double(s[i]) − shift) for i < n; returns the sum of E in index order (a sequential double sum, as a
 * JavaScript loop `sum += E[i]`).
 * @param s [n] f32 @param E [n] f64 out
 */
double expShiftSum(const float* s, int64_t n, double shift, double* E);

/**
 * P[i] = f32(exp(f32(double(s[i]) − lse))) for i < n; returns the sequential double sum of P in index order.
 * @param s [n] f32 @param P [n] f32 out
 */
double expProbs(const float* s, int64_t n, double lse, float* P);

/**
 * P[ids[j]] = f32(exp(f32(double(s[ids[j]]) − lse))) for j < n: expProbs at gathered indices (the same values, four
 * exps per instruction).
 * @param s [V] f32 @param ids [n] i32 @param P [V] f32 out (only the listed entries written)
 */
void expProbsAt(const float* s, const int32_t* ids, int64_t n, double lse, float* P);

/**
 * Index of the largest s[i] (the first one among equals), as the JavaScript loop `best = 0; for i ≥ 1: if (s[i] >
 * s[best]) best = i`: NaN entries are never chosen, except that s[0] = NaN yields 0; n ≤ 0 yields 0.
 * @param s [n] f32
 */
int64_t argmaxF32(const float* s, int64_t n);

/**
 * Writes the indices i < n with E[i] ≥ bound (NaN never) to ids in ascending order; returns their count.
 * @param E [n] f64 @param ids [n] i32 out
 */
int64_t selectAtLeast(const double* E, int64_t n, double bound, int32_t* ids);

/**
 * Temperature scaling in place, s[i] = f32(double(s[i]) · invT) (JavaScript `Math.fround(s[i] * invT)`), returning the
 * largest scaled value (NaN skipped; −Infinity when none).
 * @param s [n] f32 in/out
 */
double scaleMaxF32(float* s, int64_t n, double invT);

}  // namespace tsg
