// Linear layers y = x · Wᵀ over weights in their stored encoding (f32, bf16, f16, block-FP8).
#pragma once

#include <cstdint>

#include "common.h"
#include "thread_pool.h"

namespace tsg {

/** How large-M products are computed. kOwn keeps batch invariance; kBlas uses OpenBLAS sgemm for M ≥ blasMinM. */
enum class GemmMode : int { kOwn = 0, kBlas = 1 };

struct GemmOptions {
  GemmMode mode = GemmMode::kOwn;
  int64_t blasMinM = 32;
};

/**
 * y[M, N] = x[M, K] · W[N, K]ᵀ. Every output element is computed with the same arithmetic whatever M, the tile or
 * the thread: eight f32 FMA lanes over k (lane = k mod 8, ascending k, K padded with zeros to a multiple of 8),
 * then hsum8. The lanes multiply x by the f32 weight (f32, bf16, f16: exact; FP8 whose scale·2^64 overflows:
 * fp8·scale rounded once), or, for FP8 (common.h), x'' = x·scale·2^64 (rounded once per x element and scale
 * row-block) by the raw code fp8·2^-120, the hsum8 then times 2^56. So a row's result does not depend on the
 * other rows (batch invariance). In kBlas mode, M ≥ blasMinM goes through cblas_sgemm instead (not batch invariant
 * across that threshold).
 * @param x [M, ldx] f32 (first K of each row used)
 * @param y [M, ldy] f32 (first N of each row written)
 */
void matmul(ThreadPool& pool, const float* x, int64_t M, int64_t ldx, const WeightView& w, float* y, int64_t ldy,
            const GemmOptions& opt);

/**
 * The single-threaded body of matmul restricted to W rows [n0, n1): y[m, n - n0] for n in [n0, n1).
 * @param scratch f32 buffer of at least gemmScratchFloats(K) elements (used by the buffered path)
 */
void matmulRange(const float* x, int64_t M, int64_t ldx, const WeightView& w, int64_t n0, int64_t n1, float* y,
                 int64_t ldy, float* scratch);

/** True when matmulRange computes M rows of w on the packed blocked path (else the direct path, which reads x as is). */
bool matmulRangeIsBlocked(int64_t M, const WeightView& w);

/** Floats of M rows × K packed by packActivations (tiles of 4 rows, K zero-padded to a multiple of 8). */
int64_t packedActivationFloats(int64_t M, int64_t K);

/**
 * Packs x [M, ldx] (first K of each row) into the blocked path's activation tiles, for callers that run several
 * matmulRangePacked over the same rows (e.g. an expert's gate and up chunks): tile t (rows 4t..4t+3; a last partial
 * tile's missing rows are never read) at xp + t·k8·4 as [k8/8][4][8] floats, k8 = K rounded up to 8, zeros past K.
 * @param xp f32 buffer of packedActivationFloats(M, K) elements
 */
void packActivations(const float* x, int64_t M, int64_t ldx, int64_t K, float* xp);

/**
 * matmulRange over activations packed by packActivations (x's M rows, W's K): y[m, n - n0] for n in [n0, n1), the
 * same bits as matmulRange of the unpacked rows. Only for matmulRangeIsBlocked(M, w).
 * @param scratch f32 buffer of at least gemmScratchFloats(K) elements
 */
void matmulRangePacked(const float* xp, int64_t M, const WeightView& w, int64_t n0, int64_t n1, float* y, int64_t ldy,
                       float* scratch);

/** Scratch floats matmulRange needs for inner dimension K. */
int64_t gemmScratchFloats(int64_t K);

/** Rows of W per task that matmul hands to one thread for M > 2 (a power of two, 8..128; gemm_blocked.cc). */
int64_t gemmRowsPerTask(int64_t K);

/** Smallest scale row-block (rows) that runs x-scaled: x is rescaled once per row block, at most 1/16 extra work. */
constexpr int64_t kFp8XScaledMinRows = 16;

/**
 * True when FP8 weight w runs x-scaled (common.h): its scale·2^64 are finite and its scale row-blocks have at least
 * kFp8XScaledMinRows rows (any k block). Other FP8 weights (e.g. per-row scales) take the dequantized-f32 path.
 */
inline bool fp8XScaled(const WeightView& w) {
  return w.fmt == WFormat::FP8 && w.scaleEff != nullptr && w.bn >= kFp8XScaledMinRows;
}

/**
 * x''[k] = x[k] · scaleEff[rowBlock, floor(k/bk)] for k in [0, K): the activation row scaled for the FP8 weight rows of
 * scale row-block `rowBlock` (common.h), the same rounding on every path.
 * @param x [K] f32; out [K] f32 (may not alias x)
 */
void fp8ScaleX(const float* x, const WeightView& w, int64_t rowBlock, float* out);

/** True if the addon was built against OpenBLAS. */
bool blasAvailable();

}  // namespace tsg
