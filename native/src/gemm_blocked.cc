// Blocked large-M GEMM (see gemm_blocked.h), GotoBLAS-style packing with the direct path's per-element arithmetic.
// - Weights: a chunk of rows (about kChunkFloats floats, L2-sized) is decoded once to f32 (decodeRow: the same values
//   as the direct path) and packed into panels of kNR rows, [k/8][kNR][8] floats: one sequential stream per panel.
// - Activations: packed into tiles of kMR rows, [k/8][kMR][8] floats (packActivations: once per matmul call, on huge
//   pages; by the caller for blockedMatmulRangePacked, e.g. once per expert; per tile in blockedMatmulRange), so a
//   tile's k-block slice (kMR × kKC floats) is one contiguous L1-resident block.
// - Register tile kMR × kNR = 4 × 3: 12 eight-lane accumulators, 7 loads per 12 FMAs.
//   With AVX-512 (gemm_avx512.h) the panels hold kNR512 = 8 rows and the tile is 4 × 8: 16 sixteen-lane
//   accumulators, each holding panel rows (j, j+1), 8 loads per 16 FMAs (panelRows() picks the layout at run time).
// - FP8 (x-scaled, common.h): the panels hold the raw codes fp8·2^-120, a chunk never spans two scale row-blocks, and
//   the x tiles are scaled for the chunk's row block (x'' = x·scale·2^64) by the first panel's tile as it runs
//   (tilePacked<MR, true>), which stores x'' in L1 for the other panels (no separate scaling pass); y = hsum8 · 2^56.
//   (Keeping x'' per row block across its chunks measured no faster: the fused scaling costs little.)
// - Chunks in blockedMatmul are whole panels (up to paddedChunkRows), so only a row block's last panel is partial;
//   blockedMatmulRange's are a power of two ≤ 128 rows (chunkRows), so they tile 128-row scale blocks exactly.
// - The last k block writes y four rows at a time (hsum8x4: the same sums as hsum8).
// Both packings zero-pad k to a multiple of 8. Each y[m, n] is hsum8 of eight FMA lanes over ascending k (lane =
// k mod 8), the accumulators carried between k blocks unchanged, so every result is bit-identical to the direct
// path in gemm.cc whatever M, the blocking or the thread (batch invariance); FMAs on the zero padding add +0·+0
// exactly as the direct path's masked tail does.
#include "gemm_blocked.h"
#include "gemm.h"
#include "gemm_avx512.h"
#include "huge_pages.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>
#include <vector>

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

/** Weight rows per packed panel: kNR for the AVX2 tiles, kNR512 for the AVX-512 ones (gemm_avx512.h). */
int panelRows() {
  static const int nr = gemmAvx512() ? kNR512 : kNR;
  return nr;
}

// k per block: the kMR × kKC x slice (16 KB) stays in L1. Measured on Zen 3, M=512 N=K=2048 f32: 1024 is 4-6 points of
// peak above 512 (half the tile calls and accumulator reloads), 2048 is below it (the slice crowds out the weight stream)
const int64_t kKC = blockingParam("TSG_GEMM_KC", 1024, 8);
const int64_t kChunkFloats = blockingParam("TSG_GEMM_CHUNK", 65536, 8);  // packed weight floats per chunk (in L2)

int64_t roundUp8(int64_t k) { return (k + 7) & ~int64_t(7); }

/**
 * A growable float buffer on transparent huge pages (mapHugePages; 4 KiB pages where THP is off). The packed x is
 * re-read once per weight chunk, and on 4 KiB pages the TLB misses of that stream (nested paging in a VM) cost about
 * 10 points of peak (measured on Zen 3: M=512 N=K=2048 f32, 2 threads, 65 → 77 % of peak).
 */
class HugeFloats {
 public:
  HugeFloats() = default;
  HugeFloats(const HugeFloats&) = delete;
  HugeFloats& operator=(const HugeFloats&) = delete;
  ~HugeFloats() {
    if (p_) unmapHugePages(p_, mapped_);
  }
  /** At least n floats (contents unspecified when it grows); throws std::bad_alloc. */
  float* get(int64_t n) {
    if (n > cap_) {
      if (p_) unmapHugePages(p_, mapped_);
      p_ = static_cast<float*>(mapHugePages(static_cast<size_t>(n) * sizeof(float), &mapped_));
      cap_ = p_ ? static_cast<int64_t>(mapped_ / sizeof(float)) : 0;
      if (!p_) throw std::bad_alloc();
    }
    return p_;
  }

 private:
  float* p_ = nullptr;
  size_t mapped_ = 0;
  int64_t cap_ = 0;
};

/**
 * Weight rows per chunk for inner dimension K: at most about kChunkFloats floats, a power of two in 8..128, so chunks
 * tile the 128-row scale blocks of FP8 checkpoints exactly (a chunk never spans two of them, and none is cut short).
 */
int64_t chunkRows(int64_t K) {
  const int64_t fit = kChunkFloats / std::max<int64_t>(roundUp8(K), 8);
  int64_t rows = 8;
  while (rows < 128 && rows * 2 <= fit) rows *= 2;
  return rows;
}

/**
 * One MR × kNR tile: packed x ([steps][kMR][8] floats, rows ≥ MR unused) against a packed weight panel
 * ([steps][kNR][8]) over `steps` groups of 8 k; continues the accumulators in `acc` ([MR][kNR][8]) unless `first`;
 * writes y[i, j] = hsum8 · outScale for j < nr when `last` (outScale 2^56 for FP8, else 1: exact either way), else
 * stores the accumulators. SCALE (x-scaled FP8, the first panel of a chunk): each x vector is first multiplied by
 * sK ([steps][8]: scale·2^64 of its k, the same product as fp8ScaleX) and stored to xs (the layout of xp) for the
 * chunk's other panels.
 */
template <int MR, bool SCALE>
void tilePacked(const float* xp, const float* wp, int64_t steps, float* acc, bool first, bool last, float* y,
                int64_t ldy, int nr, float outScale, const float* sK, float* xs) {
  __m256 a[MR][kNR];
  for (int i = 0; i < MR; i++)
    for (int j = 0; j < kNR; j++) a[i][j] = first ? _mm256_setzero_ps() : _mm256_loadu_ps(acc + (i * kNR + j) * 8);
  for (int64_t s = 0; s < steps; s++) {
    __m256 wv[kNR];
    for (int j = 0; j < kNR; j++) wv[j] = _mm256_loadu_ps(wp + (s * kNR + j) * 8);
    for (int i = 0; i < MR; i++) {
      __m256 xv = _mm256_loadu_ps(xp + (s * kMR + i) * 8);
      if (SCALE) {
        const float* sp = sK + s * 8;
        asm("" : "+r"(sp));  // a memory operand per row: no 17th vector register held across the rows
        xv = _mm256_mul_ps(xv, _mm256_loadu_ps(sp));
        _mm256_storeu_ps(xs + (s * kMR + i) * 8, xv);
      }
      asm("" : "+x"(xv));  // one load per x row and step (not one per FMA)
      for (int j = 0; j < kNR; j++) a[i][j] = _mm256_fmadd_ps(xv, wv[j], a[i][j]);
    }
  }
  if (last && MR == kMR) {
    const __m128 out = _mm_set1_ps(outScale);
    for (int j = 0; j < nr; j++) {
      const __m128 v = _mm_mul_ps(hsum8x4(a[0][j], a[1][j], a[2][j], a[3 % MR][j]), out);
      _mm_store_ss(y + j, v);
      for (int i = 1; i < kMR; i++) {
        const int bits = _mm_extract_ps(v, i);
        std::memcpy(y + i * ldy + j, &bits, 4);
      }
    }
  } else if (last) {
    for (int i = 0; i < MR; i++)
      for (int j = 0; j < nr; j++) y[i * ldy + j] = hsum8(a[i][j]) * outScale;
  } else {
    for (int i = 0; i < MR; i++)
      for (int j = 0; j < kNR; j++) _mm256_storeu_ps(acc + (i * kNR + j) * 8, a[i][j]);
  }
}

using TileFn = void (*)(const float*, const float*, int64_t, float*, bool, bool, float*, int64_t, int, float,
                        const float*, float*);

template <bool SCALE, int... MRs>
constexpr std::array<TileFn, sizeof...(MRs)> makeTileTable(std::integer_sequence<int, MRs...>) {
  return {&tilePacked<MRs + 1, SCALE>...};
}
/** kTiles[mr - 1]: the tile for mr activation rows; kScalingTiles: the same, scaling x as it goes (SCALE). */
constexpr auto kTiles = makeTileTable<false>(std::make_integer_sequence<int, kMR>{});
constexpr auto kScalingTiles = makeTileTable<true>(std::make_integer_sequence<int, kMR>{});

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

/** sK[k] = scale·2^64 of W's scale row-block rb at k (k < K), 0 in the padding [K, k8): x'' = x · sK. */
void expandScales(const WeightView& w, int64_t rb, float* sK) {
  const int64_t K = w.k, k8 = roundUp8(K);
  const float* srow = w.scaleEff + rb * w.sCols;
  for (int64_t k = 0; k < k8; k++) sK[k] = k < K ? srow[k / w.bk] : 0.0f;
}

/**
 * Decodes weight rows [c0, c1) and packs them into panels of kNR rows: panel p at wp + p·k8·kNR, element (row
 * c0 + p·kNR + j, k) at [k/8][j][k mod 8]; rows past c1 and k past K are zero. BF16, F32 and x-scaled FP8 (raw
 * codes, common.h) are packed straight from the stored weights, other formats (F16, FP8 whose scale·2^64
 * overflows) through decodeRow into `row` (K floats of scratch): the same values as the direct path's.
 */
void packChunk(const WeightView& w, int64_t c0, int64_t c1, float* wp, float* row) {
  const int64_t K = w.k, k8 = roundUp8(K), steps = k8 / 8, full = K / 8;
  const int rem = static_cast<int>(K - full * 8);
  const int NR = panelRows();
  const int64_t panels = (c1 - c0 + NR - 1) / NR;
  const bool raw = fp8XScaled(w);
  for (int64_t p = 0; p < panels; p++) {
    float* dst = wp + p * k8 * NR;
    for (int j = 0; j < NR; j++) {
      const int64_t n = c0 + p * NR + j;
      float* d = dst + j * 8;
      if (n >= c1) {
        for (int64_t s = 0; s < steps; s++) _mm256_storeu_ps(d + s * NR * 8, _mm256_setzero_ps());
        continue;
      }
      if (raw) {
        const uint8_t* src = static_cast<const uint8_t*>(w.data) + n * K;
        for (int64_t s = 0; s < full; s++) _mm256_storeu_ps(d + s * NR * 8, fp8RawX8(src + s * 8));
        if (rem) {
          alignas(16) uint8_t t[8] = {0, 0, 0, 0, 0, 0, 0, 0};
          for (int i = 0; i < rem; i++) t[i] = src[full * 8 + i];
          _mm256_storeu_ps(d + full * NR * 8, fp8RawX8(t));
        }
        continue;
      }
      int64_t s0 = 0;  // steps packed straight from the stored weights
      if (w.fmt == WFormat::BF16) {
        const uint16_t* src = static_cast<const uint16_t*>(w.data) + n * K;
        for (; s0 < full; s0++) _mm256_storeu_ps(d + s0 * NR * 8, bf16X8(src + s0 * 8));
      } else if (w.fmt == WFormat::F32) {
        const float* src = static_cast<const float*>(w.data) + n * K;
        for (; s0 < full; s0++) _mm256_storeu_ps(d + s0 * NR * 8, _mm256_loadu_ps(src + s0 * 8));
      }
      if (s0 == full && !rem) continue;
      // the rest (all of it for F16 and FP8 without finite scale·2^64, else the k tail) through decodeRow
      const int64_t k0 = s0 * 8;
      decodeRow(w, n, k0, K - k0, row);
      for (int64_t s = s0; s < full; s++) _mm256_storeu_ps(d + s * NR * 8, _mm256_loadu_ps(row + (s - s0) * 8));
      if (rem) _mm256_storeu_ps(d + full * NR * 8, _mm256_maskload_ps(row + (full - s0) * 8, tailMask(rem)));
    }
  }
}

/** Weight rows [c0, ...) that one chunk may hold: at most nb, and (x-scaled FP8) within c0's scale row-block. */
int64_t chunkEnd(const WeightView& w, int64_t c0, int64_t nb, int64_t n1) {
  int64_t c1 = std::min(n1, c0 + nb);
  if (fp8XScaled(w)) c1 = std::min(c1, (c0 / w.bn + 1) * w.bn);
  return c1;
}

/** One thread's scratch carved into its parts (carveScratch; sizes in scratchFloats). */
struct Scratch {
  float *wp, *row, *xTile, *acc, *xSlice, *sK;
};

/** chunkRows(K) rounded up to whole panels (a chunk's packed panels and accumulators). */
int64_t paddedChunkRows(int64_t K) {
  return (chunkRows(K) + panelRows() - 1) / panelRows() * panelRows();
}

/**
 * Floats of one thread's scratch for inner dimension K: packed chunk, one decoded row, one x tile, accumulators, one
 * scaled x slice and the expanded scales (FP8).
 */
int64_t scratchFloats(int64_t K) {
  const int64_t k8 = roundUp8(K), nb = paddedChunkRows(K);
  return nb * k8 + k8 + kMR * k8 + nb * kMR * 8 + kMR * std::min(k8, kKC) + k8 + 16;
}

Scratch carveScratch(float* s, int64_t K) {
  const int64_t k8 = roundUp8(K), nb = paddedChunkRows(K);
  Scratch r;
  r.wp = s;
  r.row = r.wp + nb * k8;
  r.xTile = r.row + k8;
  r.acc = r.xTile + kMR * k8;
  r.xSlice = r.acc + nb * kMR * 8;
  r.sK = r.xSlice + kMR * std::min(k8, kKC);
  return r;
}

/**
 * y[m, c - c0] for the packed chunk (rows [c0, c1) of w, in sc.wp) and the packed x tiles [t0, t1) (tile t = rows
 * [t·kMR, min(M, t·kMR + kMR)) at xp + t·k8·kMR, or packed here into sc.xTile when xp is null and x is given).
 * x-scaled FP8: sc.sK holds the chunk's row-block scales (expandScales, done by the caller), and the first panel
 * scales each k-block slice of a tile as it runs, into sc.xSlice for the other panels. Loop order: x tile → k block
 * (its slice stays in L1) → weight panel (streams from L2).
 */
void chunkTimesTiles(const WeightView& w, int64_t c0, int64_t c1, const float* xp, const float* x, int64_t ldx,
                     const Scratch& sc, int64_t M, int64_t t0, int64_t t1, float* y, int64_t ldy) {
  const int64_t K = w.k, k8 = roundUp8(K);
  const int64_t numKBlocks = std::max<int64_t>(1, (k8 + kKC - 1) / kKC);
  const int NR = panelRows();
  const int64_t panels = (c1 - c0 + NR - 1) / NR;
  const bool fp8 = fp8XScaled(w);
  const float outScale = fp8 ? kFp8Out : 1.0f;
  const bool wide = gemmAvx512();
  for (int64_t t = t0; t < t1; t++) {
    const int64_t m = t * kMR;
    const int mr = static_cast<int>(std::min<int64_t>(kMR, M - m));
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
      const float* slice = xt + kb * kMR;
      int64_t p = 0;
      if (fp8) {
        (wide ? packedTile512(mr, true) : kScalingTiles[mr - 1])(slice, sc.wp + kb * NR, (ke - kb) / 8, sc.acc, first, last,
            y + m * ldy, ldy, static_cast<int>(std::min<int64_t>(NR, c1 - c0)), outScale, sc.sK + kb, sc.xSlice);
        slice = sc.xSlice;
        p = 1;
      }
      const TileFn tileFn = wide ? packedTile512(mr, false) : kTiles[mr - 1];
      for (; p < panels; p++) {
        const int nr = static_cast<int>(std::min<int64_t>(NR, c1 - c0 - p * NR));
        tileFn(slice, sc.wp + p * k8 * NR + kb * NR, (ke - kb) / 8, sc.acc + p * kMR * NR * 8, first, last,
               y + m * ldy + p * NR, ldy, nr, outScale, nullptr, nullptr);
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

int64_t packedActivationFloats(int64_t M, int64_t K) {
  return (M + kMR - 1) / kMR * kMR * roundUp8(K);
}

void packActivations(const float* x, int64_t M, int64_t ldx, int64_t K, float* xp) {
  const int64_t k8 = roundUp8(K);
  for (int64_t m = 0; m < M; m += kMR) {
    const int mr = static_cast<int>(std::min<int64_t>(kMR, M - m));
    packX(x + m * ldx, ldx, mr, K, xp + m * k8);
  }
}

namespace {

/** The chunk loop of blockedMatmulRange(Packed): x packed (xp) or packed per tile from x. */
void rangeOverChunks(const float* xp, const float* x, int64_t ldx, int64_t M, const WeightView& w, int64_t n0,
                     int64_t n1, float* y, int64_t ldy, float* scratch) {
  const int64_t nb = chunkRows(w.k);
  const Scratch sc = carveScratch(scratch, w.k);
  const int64_t tiles = (M + kMR - 1) / kMR;
  for (int64_t c0 = n0; c0 < n1;) {
    const int64_t c1 = chunkEnd(w, c0, nb, n1);
    packChunk(w, c0, c1, sc.wp, sc.row);
    if (fp8XScaled(w)) expandScales(w, c0 / w.bn, sc.sK);
    chunkTimesTiles(w, c0, c1, xp, x, ldx, sc, M, 0, tiles, y + (c0 - n0), ldy);
    c0 = c1;
  }
}

}  // namespace

void blockedMatmulRange(const float* x, int64_t M, int64_t ldx, const WeightView& w, int64_t n0, int64_t n1, float* y,
                        int64_t ldy, float* scratch) {
  rangeOverChunks(nullptr, x, ldx, M, w, n0, n1, y, ldy, scratch);
}

void blockedMatmulRangePacked(const float* xp, int64_t M, const WeightView& w, int64_t n0, int64_t n1, float* y,
                              int64_t ldy, float* scratch) {
  rangeOverChunks(xp, nullptr, 0, M, w, n0, n1, y, ldy, scratch);
}

void blockedMatmul(ThreadPool& pool, const float* x, int64_t M, int64_t ldx, const WeightView& w, float* y,
                   int64_t ldy) {
  const int64_t N = w.n, K = w.k, k8 = roundUp8(K);
  if (M <= 0 || N <= 0) return;
  const int threads = pool.threads();
  const int64_t tiles = (M + kMR - 1) / kMR;
  const bool fp8 = fp8XScaled(w);
  // x packed once for all weight chunks, and one scratch per thread (the calling thread's buffers: workers see
  // their own thread_locals; matmul is not re-entrant on one pool)
  static thread_local HugeFloats xPacked, scratch;
  const int64_t scratchStride = (scratchFloats(K) + 15) & ~int64_t(15);  // 64-byte aligned per thread
  float* xp = xPacked.get(tiles * k8 * kMR);
  float* scr = scratch.get(threads * scratchStride);
  // tasks: weight chunks of whole panels, at most paddedChunkRows(K) rows, within one scale row-block for x-scaled
  // FP8 (its x tiles are scaled per row block); without row blocks as many chunks as a multiple of the thread count
  // (equal shares). Chunk c = rows [bounds[c], bounds[c + 1]). Split the tiles too only when there are too few chunks.
  static thread_local std::vector<int64_t> bounds;
  bounds.assign(1, 0);
  const int64_t segment = fp8 ? w.bn : N;
  for (int64_t s0 = 0; s0 < N; s0 += segment) {
    const int64_t len = std::min(segment, N - s0);
    int64_t n = (len + chunkRows(K) - 1) / chunkRows(K);
    if (!fp8) n = (n + threads - 1) / threads * threads;
    const int64_t size = std::min(paddedChunkRows(K), ((len + n - 1) / n + panelRows() - 1) / panelRows() * panelRows());
    for (int64_t c = s0 + size; c < s0 + len; c += size) bounds.push_back(c);
    bounds.push_back(s0 + len);
  }
  const int64_t nTasks = static_cast<int64_t>(bounds.size()) - 1;
  const int64_t* bnd = bounds.data();  // the calling thread's (a worker naming `bounds` would see its own)
  int64_t mChunks = 1;
  if (nTasks < 2 * threads && tiles >= 2) mChunks = std::min<int64_t>((2 * threads + nTasks - 1) / nTasks, tiles);
  const int64_t tilesPerChunk = (tiles + mChunks - 1) / mChunks;
  mChunks = (tiles + tilesPerChunk - 1) / tilesPerChunk;
  auto packTiles = [&](int64_t t0, int64_t t1) {
    const int64_t m0 = t0 * kMR, m1 = std::min(M, t1 * kMR);
    if (m1 > m0) packActivations(x + m0 * ldx, m1 - m0, ldx, K, xp + t0 * k8 * kMR);
  };
  auto task = [&](int64_t t, int ti) {
    const int64_t nt = t / mChunks, mt = t % mChunks;
    const int64_t c0 = bnd[nt], c1 = bnd[nt + 1];
    const int64_t t0 = mt * tilesPerChunk, t1 = std::min(tiles, t0 + tilesPerChunk);
    const Scratch sc = carveScratch(scr + ti * scratchStride, K);
    packChunk(w, c0, c1, sc.wp, sc.row);
    if (fp8) expandScales(w, c0 / w.bn, sc.sK);
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
