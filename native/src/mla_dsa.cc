// MLA per-head products and the DSA indexer top-k (see mla_dsa.h).
#include "mla_dsa.h"

#include <algorithm>
#include <vector>

namespace tsg {

namespace {

/**
 * The eight hsum8 of a[0..8) in one transposed reduction with hsum8's own order per lane — lane j =
 * ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)) of a[j] — so it gives exactly hsum8(a[j]) for every j.
 */
inline __m256 hsum8Each(const __m256* a) {
  __m256 p[4];
  for (int i = 0; i < 4; i++)
    p[i] = _mm256_add_ps(_mm256_permute2f128_ps(a[2 * i], a[2 * i + 1], 0x20), _mm256_permute2f128_ps(a[2 * i], a[2 * i + 1], 0x31));
  // p[i] = [a_2i lo+hi | a_2i+1 lo+hi]; per half [x0 x1 x2 x3] → (x0+x2), (x1+x3)
  const __m256 s0 = _mm256_add_ps(_mm256_shuffle_ps(p[0], p[1], 0x44), _mm256_shuffle_ps(p[0], p[1], 0xEE));
  const __m256 s1 = _mm256_add_ps(_mm256_shuffle_ps(p[2], p[3], 0x44), _mm256_shuffle_ps(p[2], p[3], 0xEE));
  const __m256 h = _mm256_hadd_ps(s0, s1);  // [c0 c2 c4 c6 | c1 c3 c5 c7]
  return _mm256_permutevar8x32_ps(h, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/**
 * y[n − n0] = x · W[n] for eight weight rows n0..n0+7 with K a multiple of 8, f32 or x-scaled FP8 (x then already
 * scaled for the rows' one scale row-block, common.h): eight FMA lanes over ascending k per row (as matmul's tile),
 * then hsum8 (× 2^56 for FP8) — the same bits as matmulRange.
 */
inline void rows8(const float* x, const WeightView& w, int64_t n0, float* y) {
  const int64_t K = w.k;
  __m256 acc[8];
  for (int j = 0; j < 8; j++) acc[j] = _mm256_setzero_ps();
  if (w.fmt == WFormat::F32) {
    const float* base = static_cast<const float*>(w.data) + n0 * K;
    for (int64_t k = 0; k < K; k += 8) {
      const __m256 xv = _mm256_loadu_ps(x + k);
      for (int j = 0; j < 8; j++) acc[j] = _mm256_fmadd_ps(xv, _mm256_loadu_ps(base + j * K + k), acc[j]);
    }
    _mm256_storeu_ps(y, hsum8Each(acc));
    return;
  }
  const uint8_t* base = static_cast<const uint8_t*>(w.data) + n0 * K;
  for (int64_t k = 0; k < K; k += 8) {
    const __m256 xv = _mm256_loadu_ps(x + k);
    for (int j = 0; j < 8; j++) acc[j] = _mm256_fmadd_ps(xv, fp8RawX8(base + j * K + k), acc[j]);
  }
  _mm256_storeu_ps(y, _mm256_mul_ps(hsum8Each(acc), _mm256_set1_ps(kFp8Out)));
}

}  // namespace

void groupedMatmul(ThreadPool& pool, const float* x, int64_t M, int64_t groups, const WeightView& w, const GroupedLayout& l, float* y) {
  if (M <= 0 || groups <= 0) return;
  const int64_t N = w.n / groups;
  // few rows (decode): eight weight rows per step with one transposed reduction (f32 and x-scaled FP8 weights,
  // K a multiple of 8); otherwise, and for the rows left over, matmulRange. Both give matmul's bits.
  const bool fp8 = fp8XScaled(w);
  const bool rows8Path = M <= 4 && w.k % 8 == 0 && (w.fmt == WFormat::F32 || fp8);
  // tasks: groups × row chunks; each task is matmulRange over the group's weight rows (same per-element arithmetic)
  const int64_t mChunk = rows8Path ? M : std::max<int64_t>(48, M / std::max<int64_t>(1, (2 * pool.threads() + groups - 1) / groups));
  const int64_t mChunks = (M + mChunk - 1) / mChunk;
  const int threads = pool.threads();
  static thread_local std::vector<std::vector<float>> scratch;
  if (static_cast<int>(scratch.size()) < threads) scratch.resize(threads);
  const int64_t need = gemmScratchFloats(w.k) + w.k;  // matmulRange's scratch, then one scaled x row (FP8)
  for (auto& s : scratch)
    if (static_cast<int64_t>(s.size()) < need) s.resize(need);
  auto* sp = &scratch;
  auto task = [&, sp](int64_t t, int ti) {
    const int64_t g = t / mChunks, m0 = (t % mChunks) * mChunk, m1 = std::min(M, m0 + mChunk);
    float* scr = (*sp)[ti].data();
    if (rows8Path) {
      float* xs = scr + gemmScratchFloats(w.k);  // x scaled for row block xsBlock (FP8)
      for (int64_t m = m0; m < m1; m++) {
        const float* xr = x + m * l.xRowStride + g * l.xGroupStride;
        float* yr = y + m * l.outRowStride + g * l.outGroupStride;
        int64_t xsBlock = -1;
        int64_t n = 0;
        for (; n + 8 <= N; n += 8) {
          const int64_t r0 = g * N + n;
          if (fp8 && r0 / w.bn != (r0 + 7) / w.bn) {  // the eight rows span two scale row-blocks
            matmulRange(xr, 1, l.xRowStride, w, r0, r0 + 8, yr + n, l.outRowStride, scr);
            continue;
          }
          if (fp8 && r0 / w.bn != xsBlock) {
            xsBlock = r0 / w.bn;
            fp8ScaleX(xr, w, xsBlock, xs);
          }
          rows8(fp8 ? xs : xr, w, r0, yr + n);
        }
        if (n < N) matmulRange(xr, 1, l.xRowStride, w, g * N + n, (g + 1) * N, yr + n, l.outRowStride, scr);
      }
      return;
    }
    matmulRange(x + m0 * l.xRowStride + g * l.xGroupStride, m1 - m0, l.xRowStride, w, g * N, (g + 1) * N,
                y + m0 * l.outRowStride + g * l.outGroupStride, l.outRowStride, scr);
  };
  if (threads == 1) {
    for (int64_t t = 0; t < groups * mChunks; t++) task(t, 0);
    return;
  }
  pool.parallelFor(groups * mChunks, task);
}

namespace {

/** Lane j = ((a_j0+a_j1)+(a_j2+a_j3)) + ((a_j4+a_j5)+(a_j6+a_j7)): the eight horizontal sums at once. */
inline __m256 hsum8x8(const __m256* a) {
  const __m256 t0 = _mm256_hadd_ps(a[0], a[1]), t1 = _mm256_hadd_ps(a[2], a[3]);
  const __m256 t2 = _mm256_hadd_ps(a[4], a[5]), t3 = _mm256_hadd_ps(a[6], a[7]);
  const __m256 u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3);
  return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

/**
 * Index scores of keys [s0, s1) of one row: sc[s - s0] = Σ_h w[h]·ReLU(q[h]·k_s), eight keys per pass (a partial last
 * pass reads a zero row for the missing keys; each lane's arithmetic depends only on its own q and k).
 */
template <int KIND>
void indexScores8(const float* q, const float* w, const IndexerArgs& a, const int32_t* locs, int64_t s0, int64_t s1,
                  const uint8_t* zeroRow, float* sc) {
  using L = KvLoader<KIND>;
  const KvLayout& kl = a.kLayout;
  const int64_t D = a.headDim, H = a.numHeads;
  const int64_t d8 = D & ~int64_t(7);
  const int drem = static_cast<int>(D - d8);
  const __m256i dmask = tailMask(drem);
  alignas(32) float tmp[8];
  for (int64_t s = s0; s < s1; s += 8) {
    const int nk = static_cast<int>(std::min<int64_t>(8, s1 - s));
    const uint8_t* kr[8];
    for (int j = 0; j < 8; j++) kr[j] = j < nk ? a.k + static_cast<int64_t>(locs[s + j]) * kl.rowBytes : zeroRow;
    if (s + 8 < s1) {
      for (int j = 0; j < std::min<int64_t>(8, s1 - s - 8); j++) _mm_prefetch(reinterpret_cast<const char*>(a.k + static_cast<int64_t>(locs[s + 8 + j]) * kl.rowBytes), _MM_HINT_T0);
    }
    __m256 score = _mm256_setzero_ps();
    for (int64_t h = 0; h < H; h++) {
      const float* qh = q + h * D;
      __m256 acc[8];
      for (int j = 0; j < 8; j++) acc[j] = _mm256_setzero_ps();
      for (int64_t e = 0; e < d8; e += 8) {
        const __m256 qv = _mm256_loadu_ps(qh + e);
        for (int j = 0; j < 8; j++) acc[j] = _mm256_fmadd_ps(qv, L::load8(kr[j], e, kl), acc[j]);
      }
      if (drem) {
        const __m256 qv = _mm256_maskload_ps(qh + d8, dmask);
        for (int j = 0; j < 8; j++) acc[j] = _mm256_fmadd_ps(qv, L::loadN(kr[j], d8, drem, kl, dmask), acc[j]);
      }
      const __m256 relu = _mm256_max_ps(hsum8x8(acc), _mm256_setzero_ps());
      score = _mm256_fmadd_ps(_mm256_broadcast_ss(w + h), relu, score);
    }
    if (nk == 8) {
      _mm256_storeu_ps(sc + (s - s0), score);
    } else {
      _mm256_store_ps(tmp, score);
      for (int j = 0; j < nk; j++) sc[s - s0 + j] = tmp[j];
    }
  }
}

/** The topK largest of sc[0..n) (ties → lower position), ascending positions into out. NaN ranks lowest. */
void selectTopK(const float* sc, int64_t n, int64_t topK, std::vector<float>& tmp, int32_t* out) {
  tmp.assign(sc, sc + n);
  for (auto& v : tmp)
    if (v != v) v = -__builtin_inff();
  std::nth_element(tmp.begin(), tmp.begin() + (topK - 1), tmp.end(), [](float x, float y) { return x > y; });
  const float thr = tmp[topK - 1];
  int64_t above = 0;
  for (int64_t s = 0; s < n; s++)
    if (sc[s] > thr) above++;
  int64_t ties = topK - above, m = 0;
  for (int64_t s = 0; s < n && m < topK; s++) {
    const float v = sc[s] != sc[s] ? -__builtin_inff() : sc[s];
    if (v > thr || (v == thr && ties-- > 0)) out[m++] = static_cast<int32_t>(s);
  }
}

}  // namespace

std::string indexerTopK(ThreadPool& pool, const float* q, const float* weights, int64_t numTokens, const IndexerArgs& a, int32_t* out) {
  const int64_t K = a.topK;
  std::fill(out, out + numTokens * K, -1);
  struct Row {
    int64_t t, tableRow, numKeys;
  };
  std::vector<Row> rows;  // rows that need scores (more than topK causal keys)
  for (int64_t i = 0; i < a.batch.numReqs; i++) {
    int64_t tableRow = 0;
    if (std::string err = a.batch.checkReq(i, numTokens, "indexerTopK", &tableRow); !err.empty()) return err;
    const int64_t start = a.batch.extendStartLoc[i], len = a.batch.extendSeqLens[i], prefix = a.batch.extendPrefixLens[i];
    for (int64_t j = 0; j < len; j++) {
      const int64_t t = start + j, numKeys = prefix + j + 1;
      if (numKeys <= K) {
        for (int64_t s = 0; s < numKeys; s++) out[t * K + s] = static_cast<int32_t>(s);
      } else {
        for (int64_t s = 0; s < numKeys; s++) {
          const int32_t loc = a.batch.reqToToken[tableRow + s];
          if (loc < 0 || loc >= a.kLocs) return "indexerTopK: a KV loc from reqToToken lies outside the index keys";
        }
        rows.push_back(Row{t, tableRow, numKeys});
      }
    }
  }
  if (rows.empty()) return "";
  if (a.qLen < numTokens * a.numHeads * a.headDim || a.wLen < numTokens * a.numHeads) return "indexerTopK: q or weights shorter than numTokens rows";
  std::vector<uint8_t> zeroRow(a.kLayout.rowBytes + 64, 0);
  // waves of rows whose scores fit the buffer; tasks = (row, chunk of kChunk keys), then one selection per row
  constexpr int64_t kChunk = 128;
  constexpr int64_t kMaxBuffer = int64_t(1) << 21;
  std::vector<float> buf;
  std::vector<int64_t> offs;
  std::vector<std::pair<int64_t, int64_t>> tasks;  // (row index, first key)
  size_t r0 = 0;
  while (r0 < rows.size()) {
    size_t r1 = r0;
    int64_t total = 0;
    offs.clear();
    tasks.clear();
    while (r1 < rows.size() && (r1 == r0 || total + rows[r1].numKeys <= kMaxBuffer)) {
      offs.push_back(total);
      for (int64_t s = 0; s < rows[r1].numKeys; s += kChunk) tasks.emplace_back(static_cast<int64_t>(r1), s);
      total += rows[r1].numKeys;
      r1++;
    }
    if (static_cast<int64_t>(buf.size()) < total) buf.resize(total);
    float* bp = buf.data();
    pool.parallelFor(static_cast<int64_t>(tasks.size()), [&](int64_t ti, int) {
      const Row& r = rows[tasks[ti].first];
      const int64_t s0 = tasks[ti].second, s1 = std::min(r.numKeys, s0 + kChunk);
      const float* qr = q + r.t * a.numHeads * a.headDim;
      const float* wr = weights + r.t * a.numHeads;
      const int32_t* lr = a.batch.reqToToken + r.tableRow;
      float* scr = bp + offs[tasks[ti].first - r0] + s0;
      switch (a.kLayout.kind) {
        case KV_BF16: indexScores8<KV_BF16>(qr, wr, a, lr, s0, s1, zeroRow.data(), scr); break;
        case KV_FP8_E4M3: indexScores8<KV_FP8_E4M3>(qr, wr, a, lr, s0, s1, zeroRow.data(), scr); break;
        case KV_FP8_E5M2: indexScores8<KV_FP8_E5M2>(qr, wr, a, lr, s0, s1, zeroRow.data(), scr); break;
        case KV_FP8_BLOCK: indexScores8<KV_FP8_BLOCK>(qr, wr, a, lr, s0, s1, zeroRow.data(), scr); break;
        default: indexScores8<KV_F32>(qr, wr, a, lr, s0, s1, zeroRow.data(), scr); break;
      }
    });
    pool.parallelFor(static_cast<int64_t>(r1 - r0), [&](int64_t i, int) {
      thread_local std::vector<float> tmp;
      const Row& r = rows[r0 + i];
      selectTopK(bp + offs[i], r.numKeys, K, tmp, out + r.t * K);
    });
    r0 = r1;
  }
  return "";
}

}  // namespace tsg
