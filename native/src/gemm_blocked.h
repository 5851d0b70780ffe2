// Large-M (prefill) path of the linear layers: weight rows decoded a chunk at a time to f32 and packed into panels,
// activations packed into row tiles, then a blocked register-tile GEMM. Same per-element arithmetic as the direct
// path in gemm.cc (see gemm.h), so results are bit-identical to it (batch invariance).
#pragma once

#include <cstdint>

#include "common.h"
#include "thread_pool.h"

namespace tsg {

/**
 * y[M, N] = x[M, K] · W[N, K]ᵀ on the pool, bit-identical to the direct path row by row. x is packed once per call
 * (a per-calling-thread buffer of about M·K floats on huge pages); the tasks are weight chunks of whole panels, about
 * gemmRowsPerTask(K) rows, as many as a multiple of the thread count (split by rows of x too when there are few).
 * @param x [M, ldx] f32 (first K of each row used)
 * @param y [M, ldy] f32 (first N of each row written)
 */
void blockedMatmul(ThreadPool& pool, const float* x, int64_t M, int64_t ldx, const WeightView& w, float* y,
                   int64_t ldy);

/**
 * y[m, n - n0] = x[m]·W[n] for m in [0, M), n in [n0, n1), single-threaded, bit-identical to the direct path
 * (x packed tile by tile here).
 * @param x [M, ldx] f32; y [M, ldy] f32
 * @param scratch f32 buffer of at least gemmScratchFloats(K) elements (gemm.h)
 */
void blockedMatmulRange(const float* x, int64_t M, int64_t ldx, const WeightView& w, int64_t n0, int64_t n1, float* y,
                        int64_t ldy, float* scratch);

/**
 * blockedMatmulRange over x already packed into tiles (packActivations, gemm.h): the same bits, without packing x
 * per weight chunk.
 * @param xp packed [ceil(M/4) tiles][k8/8][4][8] f32; y [M, ldy] f32; scratch as blockedMatmulRange
 */
void blockedMatmulRangePacked(const float* xp, int64_t M, const WeightView& w, int64_t n0, int64_t n1, float* y,
                              int64_t ldy, float* scratch);

}  // namespace tsg
