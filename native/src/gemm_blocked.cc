// Blocked large-M GEMM (see gemm_blocked.h), GotoBLAS-style packing with the direct path's per-element arithmetic.
// - Weights: a chunk of rows (about kChunkFloats floats, L2-sized) is decoded once to f32 (decodeRow: the same values
//   as the direct path) and packed into panels of kNR rows, [k/8][kNR][8] floats: one sequential stream per panel.
// - Activations: packed into tiles of kMR rows, [k/8][kMR][8] floats (once per matmul call, on huge pages; per tile in
//   blockedMatmulRange), so a tile's k-block slice (kMR × kKC floats) is one contiguous L1-resident block.
// - Register tile kMR × kNR = 4 × 3: 12 eight-lane accumulators, 7 loads per 12 FMAs.
// - Block-FP8 in registers: the panels hold raw·2^64 (exact), and the tile folds each bk-wide scale block's
//   accumulators into a total with fma(blk, scale·2^56, total) (common.h); the chunk's scales are packed beside it.
// Both packings zero-pad k to a multiple of 8. Each y[m, n] is hsum8 of eight FMA lanes over ascending k (lane =
// k mod 8), the accumulators carried between k blocks unchanged, so every result is bit-identical to the direct
// path in gemm.cc whatever M, the blocking or the thread (batch invariance); FMAs on the zero padding add +0·+0
// exactly as the direct path's masked tail does.
#include "gemm_blocked.h"
#include "gemm.h"

#include <sys/mman.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <new>
#include <utility>

namespace tsg {

namespace {

/** A blocking parameter: env `name` (tuning experiments; results never depend on it) rounded to `multiple`, else dflt. */
int64_t blockingParam(const char* name, int64_t dflt, int64_t multiple) {
  const char* v = std::getenv(name);
  const int64_t n = v ? std::atoll(v) / multiple * multiple : 0;
  return n > 0 ? n : dflt;
}

constexpr int kMR = 4;  // activation rows per register tile
constexpr int kNR = 3;  // weight rows per register tile (kMR·kNR = 12 accumulators + kNR + 1 operand registers)

// k per block: the kMR × kKC x slice (16 KB) stays in L1. Measured on Zen 3, M=512 N=K=2048 f32: 1024 is 4-6 points of
// peak above 512 (half the tile calls and accumulator reloads), 2048 is below it (the slice crowds out the weight stream)
const int64_t kKC = blockingParam("TSG_GEMM_KC", 1024, 8);
const int64_t kChunkFloats = blockingParam("TSG_GEMM_CHUNK", 65536, 8);  // packed weight floats per chunk (in L2)

int64_t roundUp8(int64_t k) { return (k + 7) & ~int64_t(7); }

/**
 * A growable float buffer on transparent huge pages where the kernel grants them (MADV_HUGEPAGE; 4 KiB pages
 * otherwise). The packed x is re-read once per weight chunk, and on 4 KiB pages the TLB misses of that stream (nested
 * paging in a VM) cost about 10 points of peak (measured on Zen 3: M=512 N=K=2048 f32, 2 threads, 65 → 77 % of peak).
 */
class HugeFloats {
 public:
  HugeFloats() = default;
  HugeFloats(const HugeFloats&) = delete;
  HugeFloats& operator=(const HugeFloats&) = delete;
  ~HugeFloats() { std::free(p_); }
  /** At least n floats (contents unspecified when it grows); throws std::bad_alloc. */
  float* get(int64_t n) {
    if (n > cap_) {
      constexpr size_t kHuge = size_t(2) << 20;
      const size_t bytes = (static_cast<size_t>(n) * sizeof(float) + kHuge - 1) / kHuge * kHuge;
      std::free(p_);
      p_ = static_cast<float*>(std::aligned_alloc(kHuge, bytes));
      cap_ = p_ ? static_cast<int64_t>(bytes / sizeof(float)) : 0;
      if (!p_) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
      madvise(p_, bytes, MADV_HUGEPAGE);  // advisory
#endif
    }
    return p_;
  }

 private:
  float* p_ = nullptr;
  int64_t cap_ = 0;
};

/** Weight rows per chunk for inner dimension K: about kChunkFloats floats, a multiple of 12, 12..192. */
int64_t chunkRows(int64_t K) {
  return std::max<int64_t>(12, std::min<int64_t>(192, kChunkFloats / std::max<int64_t>(roundUp8(K), 8) / 12 * 12));
}

/**
 * Block scales of one packed FP8 panel: s[b·kNR + j] = scale·2^56 of panel row j in scale block b (b over the
 * whole K), blocks of 2^bkShift groups of 8 k, totalSteps groups in all. s == nullptr: an unscaled panel.
 */
struct PanelScales {
  const float* s = nullptr;
  int bkShift = 0;
  int64_t totalSteps = 0;
};

/**
 * One MR × kNR tile: packed x ([steps][kMR][8] floats, rows ≥ MR unused) against a packed weight panel
 * ([steps][kNR][8]) over `steps` groups of 8 k starting at group step0; continues the accumulators in `acc`
 * ([MR][kNR][8], then for kScaled the block totals [MR][kNR][8]) unless `first`; writes y[i, j] = hsum8 for
 * j < nr when `last`, else stores the accumulators. kScaled: the steps run scale block by scale block, each
 * block's accumulators starting from zero (or from `acc` when the call starts inside a block) and folded into the
 * totals with fma(acc, scale, total) at the block's end (or at totalSteps); a call ending inside a block stores them.
 * Each run keeps its 12 accumulators in registers (one run per call unscaled, one per 2^bkShift steps scaled).
 */
template <int MR, bool kScaled>
void tilePacked(const float* xp, const float* wp, int64_t step0, int64_t steps, float* acc, bool first, bool last,
                float* y, int64_t ldy, int nr, const PanelScales& ps) {
  float* tot = acc + kMR * kNR * 8;
  if (kScaled && first)
    for (int i = 0; i < MR * kNR; i++) _mm256_storeu_ps(tot + i * 8, _mm256_setzero_ps());
  for (int64_t s = 0; s < steps;) {
    // this run: [s, e), to the call's end or (kScaled) the current scale block's end
    const int64_t g = step0 + s, blk = kScaled ? g >> ps.bkShift : 0;
    const int64_t e = kScaled ? std::min(steps, ((blk + 1) << ps.bkShift) - step0) : steps;
    const bool resume = s == 0 && !first && (!kScaled || g != (blk << ps.bkShift));
    __m256 a[MR][kNR];
    for (int i = 0; i < MR; i++)
      for (int j = 0; j < kNR; j++) a[i][j] = resume ? _mm256_loadu_ps(acc + (i * kNR + j) * 8) : _mm256_setzero_ps();
    for (; s < e; s++) {
      __m256 wv[kNR];
      for (int j = 0; j < kNR; j++) wv[j] = _mm256_loadu_ps(wp + (s * kNR + j) * 8);
      for (int i = 0; i < MR; i++) {
        __m256 xv = _mm256_loadu_ps(xp + (s * kMR + i) * 8);
        asm("" : "+x"(xv));  // one load per x row and step (not one per FMA)
        for (int j = 0; j < kNR; j++) a[i][j] = _mm256_fmadd_ps(xv, wv[j], a[i][j]);
      }
    }
    const int64_t ge = step0 + e;
    if (kScaled && (ge == ((blk + 1) << ps.bkShift) || ge == ps.totalSteps)) {
      const float* sc = ps.s + blk * kNR;
      for (int j = 0; j < kNR; j++) {
        const __m256 sj = _mm256_broadcast_ss(sc + j);
        for (int i = 0; i < MR; i++) {
          float* t = tot + (i * kNR + j) * 8;
          _mm256_storeu_ps(t, _mm256_fmadd_ps(a[i][j], sj, _mm256_loadu_ps(t)));
        }
      }
    } else if (kScaled || !last) {  // the call ends inside a scale block (kScaled) or before the last k block
      for (int i = 0; i < MR; i++)
        for (int j = 0; j < kNR; j++) _mm256_storeu_ps(acc + (i * kNR + j) * 8, a[i][j]);
    } else {
      for (int i = 0; i < MR; i++)
        for (int j = 0; j < nr; j++) y[i * ldy + j] = hsum8(a[i][j]);
    }
  }
  if (kScaled && last)
    for (int i = 0; i < MR; i++)
      for (int j = 0; j < nr; j++) y[i * ldy + j] = hsum8(_mm256_loadu_ps(tot + (i * kNR + j) * 8));
}

using TileFn = void (*)(const float*, const float*, int64_t, int64_t, float*, bool, bool, float*, int64_t, int,
                        const PanelScales&);

template <bool kScaled, int... MRs>
constexpr std::array<TileFn, sizeof...(MRs)> makeTileTable(std::integer_sequence<int, MRs...>) {
  return {&tilePacked<MRs + 1, kScaled>...};
}
/** kTiles[kScaled][mr - 1]: the tile for mr activation rows. */
constexpr std::array<std::array<TileFn, kMR>, 2> kTiles = {makeTileTable<false>(std::make_integer_sequence<int, kMR>{}),
                                                          makeTileTable<true>(std::make_integer_sequence<int, kMR>{})};

/** Packs x rows [0, mr) (leading dimension ldx, K values each) into xp: [k/8][kMR][8], zero-padded past K. */
void packX(const float* x, int64_t ldx, int mr, int64_t K, float* xp) {
  const int64_t full = K / 8;
  const int rem = static_cast<int>(K - full * 8);
  for (int i = 0; i < mr; i++) {
    const float* src = x + i * ldx;
    for (int64_t s = 0; s < full; s++) _mm256_storeu_ps(xp + (s * kMR + i) * 8, _mm256_loadu_ps(src + s * 8));
    if (rem) _mm256_storeu_ps(xp + (full * kMR + i) * 8, _mm256_maskload_ps(src + full * 8, tailMask(rem)));
  }
}

/** True when FP8 weight w is read in registers (block-scaled, common.h): power-of-two bk ≥ 8 and finite scale·2^56. */
bool fp8Scaled(const WeightView& w) {
  return w.fmt == WFormat::FP8 && w.scaleEff != nullptr && w.bk >= 8 && (w.bk & (w.bk - 1)) == 0;
}

/** Scale blocks over K for weight w (1 for unscaled formats). */
int64_t scaleBlocks(const WeightView& w) {
  return fp8Scaled(w) ? (w.k + w.bk - 1) / w.bk : 1;
}

/**
 * Decodes weight rows [c0, c1) and packs them into panels of kNR rows: panel p at wp + p·k8·kNR, element (row
 * c0 + p·kNR + j, k) at [k/8][j][k mod 8]; rows past c1 and k past K are zero. BF16 and F32 are packed straight
 * from the stored weights, block-FP8 in registers as raw·2^64 with its scales packed into `scales`
 * ([panel][scaleBlocks(w)][kNR], 0 past c1), other formats (F16, FP8 with other blocks) through decodeRow into
 * `row` (K floats of scratch): the same values as the direct path's.
 */
void packChunk(const WeightView& w, int64_t c0, int64_t c1, float* wp, float* row, float* scales) {
  const int64_t K = w.k, k8 = roundUp8(K), steps = k8 / 8, full = K / 8;
  const int rem = static_cast<int>(K - full * 8);
  const int64_t panels = (c1 - c0 + kNR - 1) / kNR;
  const bool scaled = fp8Scaled(w);
  const int64_t nBlocks = scaleBlocks(w);
  int bkShift = 0;
  while ((int64_t(1) << bkShift) < w.bk) bkShift++;
  const __m256 up = _mm256_set1_ps(kFp8Up);
  for (int64_t p = 0; p < panels; p++) {
    float* dst = wp + p * k8 * kNR;
    for (int j = 0; j < kNR; j++) {
      const int64_t n = c0 + p * kNR + j;
      float* d = dst + j * 8;
      if (scaled)
        for (int64_t b = 0; b < nBlocks; b++)
          scales[(p * nBlocks + b) * kNR + j] = n < c1 ? w.scaleEff[(n / w.bn) * w.sCols + b] : 0.0f;
      if (n >= c1) {
        for (int64_t s = 0; s < steps; s++) _mm256_storeu_ps(d + s * kNR * 8, _mm256_setzero_ps());
        continue;
      }
      if (scaled) {
        const uint8_t* src = static_cast<const uint8_t*>(w.data) + n * K;
        for (int64_t s = 0; s < full; s++) _mm256_storeu_ps(d + s * kNR * 8, _mm256_mul_ps(fp8RawX8(src + s * 8), up));
        if (rem) {
          alignas(16) uint8_t t[8] = {0, 0, 0, 0, 0, 0, 0, 0};
          for (int i = 0; i < rem; i++) t[i] = src[full * 8 + i];
          _mm256_storeu_ps(d + full * kNR * 8, _mm256_mul_ps(fp8RawX8(t), up));
        }
        continue;
      }
      int64_t s0 = 0;  // steps packed straight from the stored weights
      if (w.fmt == WFormat::BF16) {
        const uint16_t* src = static_cast<const uint16_t*>(w.data) + n * K;
        for (; s0 < full; s0++) _mm256_storeu_ps(d + s0 * kNR * 8, bf16X8(src + s0 * 8));
      } else if (w.fmt == WFormat::F32) {
        const float* src = static_cast<const float*>(w.data) + n * K;
        for (; s0 < full; s0++) _mm256_storeu_ps(d + s0 * kNR * 8, _mm256_loadu_ps(src + s0 * 8));
      }
      if (s0 == full && !rem) continue;
      // the rest (all of it for F16 and FP8 not in registers, else the k tail) through decodeRow
      const int64_t k0 = s0 * 8;
      decodeRow(w, n, k0, K - k0, row);
      for (int64_t s = s0; s < full; s++) _mm256_storeu_ps(d + s * kNR * 8, _mm256_loadu_ps(row + (s - s0) * 8));
      if (rem) _mm256_storeu_ps(d + full * kNR * 8, _mm256_maskload_ps(row + (full - s0) * 8, tailMask(rem)));
    }
  }
}

/** One thread's scratch carved into its parts (carveScratch; sizes in scratchFloats). */
struct Scratch {
  float *wp, *row, *xTile, *acc, *scales;
};

/** Floats of one thread's scratch for inner dimension K: packed chunk, one decoded row, one x tile, accumulators, scales. */
int64_t scratchFloats(int64_t K) {
  const int64_t k8 = roundUp8(K), nb = chunkRows(K);
  // scales: at most one block per 8 k (bk ≥ 8) per row
  return nb * k8 + k8 + kMR * k8 + 2 * nb * kMR * 8 + nb * (k8 / 8 + 1) + 16;
}

Scratch carveScratch(float* s, int64_t K) {
  const int64_t k8 = roundUp8(K), nb = chunkRows(K);
  Scratch r;
  r.wp = s;
  r.row = r.wp + nb * k8;
  r.xTile = r.row + k8;
  r.acc = r.xTile + kMR * k8;
  r.scales = r.acc + 2 * nb * kMR * 8;
  return r;
}

/**
 * y[m, c - c0] for the packed chunk (rows [c0, c1) of w, in sc.wp / sc.scales) and the packed x tiles [t0, t1)
 * (tile t = rows [t·kMR, min(M, t·kMR + kMR)) at xp + t·k8·kMR, or packed here into sc.xTile when xp is null and
 * x is given). Loop order: x tile → k block (its slice stays in L1) → weight panel (streams from L2).
 */
void chunkTimesTiles(const WeightView& w, int64_t c0, int64_t c1, const float* xp, const float* x, int64_t ldx,
                     const Scratch& sc, int64_t M, int64_t t0, int64_t t1, float* y, int64_t ldy) {
  const int64_t K = w.k, k8 = roundUp8(K);
  const int64_t numKBlocks = std::max<int64_t>(1, (k8 + kKC - 1) / kKC);
  const int64_t panels = (c1 - c0 + kNR - 1) / kNR;
  const bool scaled = fp8Scaled(w);
  const int64_t nBlocks = scaleBlocks(w);
  PanelScales ps;
  while (scaled && (int64_t(8) << ps.bkShift) < w.bk) ps.bkShift++;  // 2^bkShift groups of 8 k per scale block
  ps.totalSteps = k8 / 8;
  for (int64_t t = t0; t < t1; t++) {
    const int64_t m = t * kMR;
    const int mr = static_cast<int>(std::min<int64_t>(kMR, M - m));
    const TileFn fn = kTiles[scaled ? 1 : 0][mr - 1];
    const float* xt;
    if (xp) {
      xt = xp + t * k8 * kMR;
    } else {
      packX(x + m * ldx, ldx, mr, K, sc.xTile);
      xt = sc.xTile;
    }
    for (int64_t b = 0; b < numKBlocks; b++) {
      const int64_t kb = b * kKC;
      const int64_t ke = std::min(k8, kb + kKC);
      const bool first = b == 0, last = b == numKBlocks - 1;
      for (int64_t p = 0; p < panels; p++) {
        const int nr = static_cast<int>(std::min<int64_t>(kNR, c1 - c0 - p * kNR));
        ps.s = sc.scales + p * nBlocks * kNR;
        fn(xt + kb * kMR, sc.wp + p * k8 * kNR + kb * kNR, kb / 8, (ke - kb) / 8, sc.acc + p * 2 * kMR * kNR * 8,
           first, last, y + m * ldy + p * kNR, ldy, nr, ps);
      }
    }
  }
}

}  // namespace

// gemm.h: the blocked path's chunk size and scratch are what every matmulRange caller must provide
int64_t gemmRowsPerTask(int64_t K) {
  return chunkRows(K);
}

int64_t gemmScratchFloats(int64_t K) {
  return scratchFloats(K);
}

void blockedMatmulRange(const float* x, int64_t M, int64_t ldx, const WeightView& w, int64_t n0, int64_t n1, float* y,
                        int64_t ldy, float* scratch) {
  const int64_t nb = chunkRows(w.k);
  const Scratch sc = carveScratch(scratch, w.k);
  const int64_t tiles = (M + kMR - 1) / kMR;
  for (int64_t c0 = n0; c0 < n1; c0 += nb) {
    const int64_t c1 = std::min(n1, c0 + nb);
    packChunk(w, c0, c1, sc.wp, sc.row, sc.scales);
    chunkTimesTiles(w, c0, c1, nullptr, x, ldx, sc, M, 0, tiles, y + (c0 - n0), ldy);
  }
}

void blockedMatmul(ThreadPool& pool, const float* x, int64_t M, int64_t ldx, const WeightView& w, float* y,
                   int64_t ldy) {
  const int64_t N = w.n, K = w.k, k8 = roundUp8(K);
  if (M <= 0 || N <= 0) return;
  const int threads = pool.threads();
  const int64_t tiles = (M + kMR - 1) / kMR;
  // x packed once for all weight chunks, and one scratch per thread (the calling thread's buffers: workers see
  // their own thread_locals; matmul is not re-entrant on one pool)
  static thread_local HugeFloats xPacked, scratch;
  const int64_t scratchStride = (scratchFloats(K) + 15) & ~int64_t(15);  // 64-byte aligned per thread
  float* xp = xPacked.get(tiles * k8 * kMR);
  float* scr = scratch.get(threads * scratchStride);
  // tasks: weight chunks of at most chunkRows(K) rows, as many as a multiple of the thread count (equal shares);
  // split the tiles too only when there are too few chunks to keep the threads busy
  int64_t nTasks = (N + chunkRows(K) - 1) / chunkRows(K);
  nTasks = (nTasks + threads - 1) / threads * threads;
  const int64_t nb = ((N + nTasks - 1) / nTasks + kNR - 1) / kNR * kNR;
  nTasks = (N + nb - 1) / nb;
  int64_t mChunks = 1;
  if (nTasks < 2 * threads && tiles >= 2) mChunks = std::min<int64_t>((2 * threads + nTasks - 1) / nTasks, tiles);
  const int64_t tilesPerChunk = (tiles + mChunks - 1) / mChunks;
  mChunks = (tiles + tilesPerChunk - 1) / tilesPerChunk;
  auto packTiles = [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; t++) {
      const int64_t m = t * kMR;
      packX(x + m * ldx, ldx, static_cast<int>(std::min<int64_t>(kMR, M - m)), K, xp + t * k8 * kMR);
    }
  };
  auto task = [&](int64_t t, int ti) {
    const int64_t nt = t / mChunks, mt = t % mChunks;
    const int64_t c0 = nt * nb, c1 = std::min(N, c0 + nb);
    const int64_t t0 = mt * tilesPerChunk, t1 = std::min(tiles, t0 + tilesPerChunk);
    const Scratch sc = carveScratch(scr + ti * scratchStride, K);
    packChunk(w, c0, c1, sc.wp, sc.row, sc.scales);
    chunkTimesTiles(w, c0, c1, xp, nullptr, 0, sc, M, t0, t1, y + c0, ldy);
  };
  if (threads == 1 || static_cast<double>(M) * N * K < 65536.0) {
    packTiles(0, tiles);
    for (int64_t t = 0; t < nTasks * mChunks; t++) task(t, 0);
    return;
  }
  const int64_t packTasks = std::min<int64_t>(tiles, 4 * threads);
  pool.parallelFor(packTasks, [&](int64_t t, int) { packTiles(t * tiles / packTasks, (t + 1) * tiles / packTasks); });
  pool.parallelFor(nTasks * mChunks, task);
}

}  // namespace tsg
