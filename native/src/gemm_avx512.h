// AVX-512 variants of the linear-layer kernels (gemm.cc's direct path, gemm_blocked.cc's packed tile), chosen at run
// time on CPUs with AVX-512 F/BW/DQ/VL. They keep the per-element arithmetic of gemm.h bit for bit: a 16-lane
// register holds the eight k-lanes of TWO outputs (weight rows n and n+1, or panel rows j and j+1) side by side, so
// every output is still eight f32 FMA lanes over ascending k (lane = k mod 8) and one hsum8 of its own half. Only
// the instruction count changes (one FMA does two outputs' work), never a result.
#pragma once

#include <cstdint>

#include "common.h"

namespace tsg {

/**
 * True when the AVX-512 kernels run: the CPU has AVX-512 F, BW, DQ and VL, and TSGLANG_NO_AVX512 is not "1" (tests
 * set it to run the AVX2 kernels and compare bits). Checked once per process.
 */
bool gemmAvx512();

/** Largest M that matmulRange computes on the AVX-512 direct path (weights decoded in registers per 4-row tile). */
constexpr int64_t kDirect512MaxM = 48;

/** Weight rows per packed panel of the AVX-512 blocked path (gemm_blocked.cc; the AVX2 path packs 3). */
constexpr int kNR512 = 8;

/**
 * The direct path of matmulRange with AVX-512 (gemm.h contract): y[m, n - n0] for m < M, n in [n0, n1), weights
 * decoded in registers, tiles of up to 6 rows of x × 8 weight rows. w: F32, BF16, F16 or x-scaled FP8 (fp8XScaled).
 * @param scratch gemmScratchFloats(K) floats (FP8: x'' per scale row-block when M·K fit, else a buffer of this thread)
 */
void directRange512(const float* x, int64_t M, int64_t ldx, const WeightView& w, int64_t n0, int64_t n1, float* y,
                    int64_t ldy, float* scratch);

/**
 * The packed register tile of gemm_blocked.cc with AVX-512: MR (1..4) rows of packed x ([steps][4][8]) × a panel of
 * kNR512 weight rows ([steps][kNR512][8]), accumulators [MR][kNR512][8] in `acc` between k blocks; same contract as
 * gemm_blocked.cc's tilePacked (SCALE: x scaled by sK as it is read, stored to xs for the chunk's other panels).
 */
using PackedTileFn = void (*)(const float* xp, const float* wp, int64_t steps, float* acc, bool first, bool last,
                              float* y, int64_t ldy, int nr, float outScale, const float* sK, float* xs);

/** tilePacked512 for mr = 1..4 rows (index mr − 1), plain and scaling (SCALE) variants. */
PackedTileFn packedTile512(int mr, bool scale);

}  // namespace tsg
