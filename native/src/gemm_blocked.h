// Large-M (prefill) path of the linear layers: weight rows decoded a chunk at a time to f32 scratch, then a blocked
// register-tile GEMM over all activation rows. Same per-element arithmetic as the direct path in gemm.cc (see gemm.h).
#pragma once

#include <cstdint>

#include "common.h"

namespace tsg {

/**
 * y[m, n - n0] = x[m]·W[n] for m in [0, M), n in [n0, n1), single-threaded, bit-identical to the direct path.
 * @param x [M, ldx] f32; y [M, ldy] f32
 * @param scratch f32 buffer of at least blockedScratchFloats(K) elements
 */
void blockedMatmulRange(const float* x, int64_t M, int64_t ldx, const WeightView& w, int64_t n0, int64_t n1, float* y,
                        int64_t ldy, float* scratch);

/** Scratch floats blockedMatmulRange needs for inner dimension K. */
int64_t blockedScratchFloats(int64_t K);

/** Weight rows per parallel task of the blocked path (multiple of 4). */
int64_t blockedRowsPerTask(int64_t K);

}  // namespace tsg
