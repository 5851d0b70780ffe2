// Causal attention over the paged KV cache, GQA/MQA (MLA absorbed: one latent kv head) and DSA sparse keys.
// One (row, head) at a time with fixed arithmetic, so a row's output does not depend on the rest of the batch.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kv_codec.h"
#include "ops.h"

namespace tsg {

namespace {

struct RowInfo {
  int32_t req;
  int32_t last;  // sequence index of the row: keys 0..last are visible
};

/** Prefetches the `bytes` of one K or V row into L1 (one hint per 64-byte line). */
#ifndef TSG_ATTN_PF
#define TSG_ATTN_PF 1
#endif
inline void prefetchRow(const uint8_t* row, int64_t bytes) {
  const char* p = reinterpret_cast<const char*>(row);
#if TSG_ATTN_PF == 1
  for (int64_t off = 0; off < bytes; off += 64) _mm_prefetch(p + off, _MM_HINT_T0);
  if (bytes > 0 && static_cast<int64_t>((reinterpret_cast<uintptr_t>(p) & 63) + bytes - 1) / 64 >= (bytes + 63) / 64) _mm_prefetch(p + bytes - 1, _MM_HINT_T0);
#elif TSG_ATTN_PF == 2
  for (int64_t off = 0; off < bytes; off += 64) _mm_prefetch(p + off, _MM_HINT_T1);
#else
  (void)p; (void)bytes;
#endif
}

/**
 * Scores of NH heads × NK keys (keys s..s+NK−1): per (head, key) eight FMA lanes over the head dim, hsum8, × scale —
 * the same arithmetic whatever the tile, so a (row, head, key) score never depends on its neighbours.
 */
template <int NH, int NK, int KIND>
inline void scoreTile(const float* const* qh, int64_t kE, const int32_t* keyLoc, int64_t s, const AttentionArgs& a,
                      float* scoreBuf, int64_t stride, int64_t pfFirst, int64_t pfEnd) {
  using L = KvLoader<KIND>;
  const KvLayout& kl = a.kLayout;
  for (int64_t p = pfFirst; p < std::min(pfFirst + NK, pfEnd); p++)
    prefetchRow(L::addr(a.k + static_cast<int64_t>(keyLoc[p]) * kl.rowBytes, kE, kl), L::spanBytes(a.headDim, kl));
  const int64_t d8 = a.headDim & ~int64_t(7);
  const int drem = static_cast<int>(a.headDim - d8);
  const uint8_t* kr[NK];
  for (int j = 0; j < NK; j++) kr[j] = a.k + static_cast<int64_t>(keyLoc[s + j]) * kl.rowBytes;
  __m256 acc[NH][NK];
  for (int i = 0; i < NH; i++)
    for (int j = 0; j < NK; j++) acc[i][j] = _mm256_setzero_ps();
  for (int64_t e = 0; e < d8; e += 8) {
    __m256 kv[NK];
    for (int j = 0; j < NK; j++) kv[j] = L::load8(kr[j], kE + e, kl);
    for (int i = 0; i < NH; i++) {
      const __m256 qv = _mm256_loadu_ps(qh[i] + e);
      for (int j = 0; j < NK; j++) acc[i][j] = _mm256_fmadd_ps(qv, kv[j], acc[i][j]);
    }
  }
  if (drem) {
    const __m256i dmask = tailMask(drem);
    __m256 kv[NK];
    for (int j = 0; j < NK; j++) kv[j] = L::loadN(kr[j], kE + d8, drem, kl, dmask);
    for (int i = 0; i < NH; i++) {
      const __m256 qv = _mm256_maskload_ps(qh[i] + d8, dmask);
      for (int j = 0; j < NK; j++) acc[i][j] = _mm256_fmadd_ps(qv, kv[j], acc[i][j]);
    }
  }
  if (NH == 4) {  // four heads' sums at once (hsum8x4: the same bits as hsum8)
    const __m128 scale = _mm_set1_ps(a.scale);
    for (int j = 0; j < NK; j++) {
      alignas(16) float v[4];
      _mm_store_ps(v, _mm_mul_ps(hsum8x4(acc[0][j], acc[1][j], acc[2][j], acc[3 % NH][j]), scale));
      for (int i = 0; i < 4; i++) scoreBuf[i * stride + s + j] = v[i];
    }
    return;
  }
  for (int i = 0; i < NH; i++)
    for (int j = 0; j < NK; j++) scoreBuf[i * stride + s + j] = hsum8(acc[i][j]) * a.scale;
}

/**
 * One pass of the value sum over keys [r0, r1) for value dims [e, e + 8·NV) of NH heads: acc = out (or 0 when
 * `first`), acc += w_hr · v_r in ascending r (one f32 FMA chain per element), stored back to out. Splitting the keys
 * into blocks this way leaves every element's chain, and so its bits, unchanged. MASKED: the last vector(s) are partial
 * (`cnt[v]` lanes, 0..8).
 */
template <int NH, int NV, bool MASKED, int KIND>
inline void valuePass(const float* scoreBuf, int64_t stride, int64_t vE, const int32_t* keyLoc, int64_t r0, int64_t r1,
                      int64_t e, const int* cnt, const AttentionArgs& a, bool first, float* out, int64_t pfDist, int64_t pfEnd) {
  using L = KvLoader<KIND>;
  const KvLayout& vl = a.vLayout;
  __m256i mask[NV];
  if (MASKED)
    for (int v = 0; v < NV; v++) mask[v] = tailMask(cnt[v]);
  __m256 acc[NH][NV];
  for (int i = 0; i < NH; i++) {
    for (int v = 0; v < NV; v++) {
      const float* o = out + i * a.vHeadDim + e + 8 * v;
      acc[i][v] = first ? _mm256_setzero_ps() : MASKED ? _mm256_maskload_ps(o, mask[v]) : _mm256_loadu_ps(o);
    }
  }
  const int64_t pfBytes = L::spanBytes(8 * NV - 8 + (MASKED ? cnt[NV - 1] : 8), vl);  // the bytes this pass reads of a row
  const int64_t rp = pfDist > 0 ? std::max(r0, std::min(r1, pfEnd - pfDist)) : r0;  // keys [r0, rp) prefetch ahead
  for (int64_t r = r0; r < r1; r++) {
    if (r < rp) {
      // the same dims of the row one block ahead (points ≤ 64 bytes apart: every line of the range)
      const char* pp = reinterpret_cast<const char*>(L::addr(a.v + static_cast<int64_t>(keyLoc[r + pfDist]) * vl.rowBytes, vE + e, vl));
      for (int64_t off = 0; off < pfBytes; off += 56) _mm_prefetch(pp + off, _MM_HINT_T0);
      _mm_prefetch(pp + pfBytes - 1, _MM_HINT_T0);
    }
    const uint8_t* vr = a.v + static_cast<int64_t>(keyLoc[r]) * vl.rowBytes;
    __m256 vv[NV];
    for (int v = 0; v < NV; v++) vv[v] = MASKED ? L::loadN(vr, vE + e + 8 * v, cnt[v], vl, mask[v]) : L::load8(vr, vE + e + 8 * v, vl);
    for (int i = 0; i < NH; i++) {
      const __m256 w = _mm256_broadcast_ss(scoreBuf + i * stride + r);
      for (int v = 0; v < NV; v++) acc[i][v] = _mm256_fmadd_ps(w, vv[v], acc[i][v]);
    }
  }
  for (int i = 0; i < NH; i++) {
    for (int v = 0; v < NV; v++) {
      float* o = out + i * a.vHeadDim + e + 8 * v;
      if (MASKED) _mm256_maskstore_ps(o, mask[v], acc[i][v]);
      else _mm256_storeu_ps(o, acc[i][v]);
    }
  }
}

/** A sub-group: up to 4 consecutive query heads of one kv head (they share every K and V load). */
struct SubGroup {
  int64_t kvHead, h0;
  int nh;
};

/** Scores of NH heads over keys [s0, s1), 3 keys per tile. */
template <int NH, int KIND>
void scoreRange(const float* const* qh, int64_t kE, const int32_t* keyLoc, int64_t s0, int64_t s1, const AttentionArgs& a,
                float* scoreBuf, int64_t stride, int64_t pfDist, int64_t pfEnd) {
  // pfDist > 0: each tile prefetches its kv head's slice of the rows pfDist keys ahead (spread over the compute)
  const int64_t end = pfDist > 0 ? pfEnd : 0;
  int64_t s = s0;
  for (; s + 3 <= s1; s += 3) scoreTile<NH, 3, KIND>(qh, kE, keyLoc, s, a, scoreBuf, stride, s + pfDist, end);
  for (; s < s1; s++) scoreTile<NH, 1, KIND>(qh, kE, keyLoc, s, a, scoreBuf, stride, s + pfDist, end);
}

/** The value sum of NH heads over keys [r0, r1) (see valuePass), 24 dims per pass, the last pass masked. */
template <int NH, int KIND>
void valueRange(const float* scoreBuf, int64_t stride, int64_t vE, const int32_t* keyLoc, int64_t r0, int64_t r1,
                const AttentionArgs& a, bool first, float* out, int64_t pfDist, int64_t pfEnd) {
  const int64_t eFull = a.vHeadDim - a.vHeadDim % 24;
  const int64_t rem = a.vHeadDim - eFull;
  const int cnt[3] = {static_cast<int>(std::min<int64_t>(8, rem)), static_cast<int>(std::max<int64_t>(0, std::min<int64_t>(8, rem - 8))),
                      static_cast<int>(std::max<int64_t>(0, rem - 16))};
  for (int64_t e = 0; e < eFull; e += 24) valuePass<NH, 3, false, KIND>(scoreBuf, stride, vE, keyLoc, r0, r1, e, cnt, a, first, out, pfDist, pfEnd);
  if (rem == 16) valuePass<NH, 2, false, KIND>(scoreBuf, stride, vE, keyLoc, r0, r1, eFull, cnt, a, first, out, pfDist, pfEnd);
  else if (rem == 8) valuePass<NH, 1, false, KIND>(scoreBuf, stride, vE, keyLoc, r0, r1, eFull, cnt, a, first, out, pfDist, pfEnd);
  else if (rem > 16) valuePass<NH, 3, true, KIND>(scoreBuf, stride, vE, keyLoc, r0, r1, eFull, cnt, a, first, out, pfDist, pfEnd);
  else if (rem > 8) valuePass<NH, 2, true, KIND>(scoreBuf, stride, vE, keyLoc, r0, r1, eFull, cnt, a, first, out, pfDist, pfEnd);
  else if (rem > 0) valuePass<NH, 1, true, KIND>(scoreBuf, stride, vE, keyLoc, r0, r1, eFull, cnt, a, first, out, pfDist, pfEnd);
}

/**
 * Softmax numerators in place for nh (≤ 4) heads' score rows (`stride` apart, n scores each) and 1/Σ per head: the
 * arithmetic of expMinusMax (max, exp8 of score − max) and a sequential f64 sum in ascending key order per head; the
 * heads' max scans and sums run interleaved (independent chains), which changes no bit.
 */
inline void softmaxHeads(float* sc, int nh, int64_t stride, int64_t n, float* inv) {
  const int64_t n8 = n & ~int64_t(7);
  for (int i = 0; i < nh; i++) {
    float* x = sc + i * stride;
    // max: `mx = x > mx ? x : mx` over all scores (NaN never wins) == lane-wise vmaxps(x, mx) then a max of the lanes
    __m256 vm = _mm256_set1_ps(-INFINITY);
    for (int64_t r = 0; r < n8; r += 8) vm = _mm256_max_ps(_mm256_loadu_ps(x + r), vm);
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, vm);
    float mx = -INFINITY;
    for (int l = 0; l < 8; l++) mx = lanes[l] > mx ? lanes[l] : mx;
    for (int64_t r = n8; r < n; r++) mx = x[r] > mx ? x[r] : mx;
    const __m256 vmx = _mm256_set1_ps(mx);
    for (int64_t r = 0; r < n8; r += 8) _mm256_storeu_ps(x + r, exp8(_mm256_sub_ps(_mm256_loadu_ps(x + r), vmx)));
    for (int64_t r = n8; r < n; r++) x[r] = x[r] - mx;
    expArray(x + n8, x + n8, n - n8);
  }
  double sum[4] = {0, 0, 0, 0};
  switch (nh) {
    case 4:
      for (int64_t r = 0; r < n; r++) {
        sum[0] += sc[r];
        sum[1] += sc[stride + r];
        sum[2] += sc[2 * stride + r];
        sum[3] += sc[3 * stride + r];
      }
      break;
    case 3:
      for (int64_t r = 0; r < n; r++) {
        sum[0] += sc[r];
        sum[1] += sc[stride + r];
        sum[2] += sc[2 * stride + r];
      }
      break;
    case 2:
      for (int64_t r = 0; r < n; r++) {
        sum[0] += sc[r];
        sum[1] += sc[stride + r];
      }
      break;
    default:
      for (int64_t r = 0; r < n; r++) sum[0] += sc[r];
      break;
  }
  for (int i = 0; i < nh; i++) inv[i] = n > 0 ? static_cast<float>(1.0 / sum[i]) : 0.0f;
}

#ifndef TSG_ATTN_KBLOCK
#define TSG_ATTN_KBLOCK 12288
#endif
#ifndef TSG_ATTN_VBLOCK
#define TSG_ATTN_VBLOCK 12288
#endif
/** Bytes of K (V) rows per key block: two blocks (the current one and the one being prefetched) fit L1. */
constexpr int64_t kBlockBytes = TSG_ATTN_KBLOCK, vBlockBytes = TSG_ATTN_VBLOCK;

/**
 * Attention of `nr` rows of one request for the sub-groups `sg[0..ng)` (consecutive heads). Row j sees keys
 * 0..numKeys[j]−1 at keyLoc (the rows share one key list: causal rows of a request see prefixes of it).
 * Per (row, head, key): q·k in eight FMA lanes over the head dim, hsum8, × scale; softmax with exp8 and an f64 sum;
 * o = Σ_s w_s·v_s in f32 in ascending s, × 1/sum — so a head's result never depends on which rows or heads share
 * the item. Keys run in blocks whose K (then V) rows, over all of the item's kv heads, fit L1: each row is read from
 * memory once for all sub-groups and rows; the next block is prefetched tile by tile during the current block's
 * compute (locs are arbitrary and rows 1–2 KB long: the hardware prefetchers stop at 4 KB pages).
 * @param qRows row j's queries [numHeads, headDim] at qRows[j]
 * @param scoreBuf [nr, 4·ng, stride] f32 scratch
 * @param outRows row j's output [numHeads, vHeadDim] at outRows[j]
 */
template <int KIND>
void attendItem(const float* const* qRows, int nr, const SubGroup* sg, int ng, const int32_t* keyLoc, const int64_t* numKeys,
                const AttentionArgs& a, float* scoreBuf, int64_t stride, float* const* outRows) {
  using L = KvLoader<KIND>;
  const int64_t kv0 = sg[0].kvHead, kv1 = sg[ng - 1].kvHead + 1;
  const int64_t kSpanE = a.kOffset + kv0 * a.headDim;  // the item's part of a K row: kv heads kv0..kv1−1 (elements)
  const int64_t vSpanE = a.vOffset + kv0 * a.vHeadDim;
  const int64_t kBytes = L::spanBytes((kv1 - kv0) * a.headDim, a.kLayout), vBytes = L::spanBytes((kv1 - kv0) * a.vHeadDim, a.vLayout);
  int64_t maxKeys = 0;
  for (int j = 0; j < nr; j++) maxKeys = std::max(maxKeys, numKeys[j]);
  const int64_t rowScores = 4 * ng * stride;
  auto prefetchRows = [&](const uint8_t* base, const KvLayout& l, int64_t e, int64_t bytes, int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; r++) prefetchRow(L::addr(base + static_cast<int64_t>(keyLoc[r]) * l.rowBytes, e, l), bytes);
  };
  // 1. scores; the prefetch of block b+1 rides on the longest row's tiles (each kv head's first sub-group)
  const int64_t kBlock = std::max<int64_t>(3, kBlockBytes / std::max<int64_t>(kBytes, 1) / 3 * 3);
  prefetchRows(a.k, a.kLayout, kSpanE, kBytes, 0, std::min(kBlock, maxKeys));
  for (int64_t s0 = 0; s0 < maxKeys; s0 += kBlock) {
    bool pfDone = false;
    for (int j = 0; j < nr; j++) {
      const int64_t s1 = std::min(numKeys[j], s0 + kBlock);
      if (s1 <= s0) continue;
      const bool pfRow = !pfDone && numKeys[j] == maxKeys;
      pfDone = pfDone || pfRow;
      for (int g = 0; g < ng; g++) {
        const float* qh[4];
        for (int i = 0; i < sg[g].nh; i++) qh[i] = qRows[j] + (sg[g].h0 + i) * a.headDim;
        const int64_t kE = a.kOffset + sg[g].kvHead * a.headDim;
        float* sc = scoreBuf + j * rowScores + 4 * g * stride;
        const int64_t pf = pfRow && (g == 0 || sg[g].kvHead != sg[g - 1].kvHead) ? kBlock : 0;
        switch (sg[g].nh) {
          case 4: scoreRange<4, KIND>(qh, kE, keyLoc, s0, s1, a, sc, stride, pf, maxKeys); break;
          case 3: scoreRange<3, KIND>(qh, kE, keyLoc, s0, s1, a, sc, stride, pf, maxKeys); break;
          case 2: scoreRange<2, KIND>(qh, kE, keyLoc, s0, s1, a, sc, stride, pf, maxKeys); break;
          default: scoreRange<1, KIND>(qh, kE, keyLoc, s0, s1, a, sc, stride, pf, maxKeys); break;
        }
      }
    }
  }
  // 2. softmax weights per (row, head) (exp8 of score − max), f64 sum
  thread_local std::vector<float> invBuf;
  if (static_cast<int64_t>(invBuf.size()) < 4 * ng * nr) invBuf.resize(4 * ng * nr);
  float* inv = invBuf.data();
  for (int j = 0; j < nr; j++)
    for (int g = 0; g < ng; g++) softmaxHeads(scoreBuf + j * rowScores + 4 * g * stride, sg[g].nh, stride, numKeys[j], inv + (j * ng + g) * 4);
  // 3. o_h = Σ_s w_hs · v_s over key blocks, then × 1/sum
  const int64_t vBlock = std::max<int64_t>(4, vBlockBytes / std::max<int64_t>(vBytes, 1));
  prefetchRows(a.v, a.vLayout, vSpanE, vBytes, 0, std::min(vBlock, maxKeys));
  for (int64_t r0 = 0; r0 < maxKeys; r0 += vBlock) {
    bool pfDone = false;
    for (int j = 0; j < nr; j++) {
      const int64_t r1 = std::min(numKeys[j], r0 + vBlock);
      if (r1 <= r0) continue;
      const bool pfRow = !pfDone && numKeys[j] == maxKeys;
      pfDone = pfDone || pfRow;
      for (int g = 0; g < ng; g++) {
        const int64_t vE = a.vOffset + sg[g].kvHead * a.vHeadDim;
        const float* sc = scoreBuf + j * rowScores + 4 * g * stride;
        float* o = outRows[j] + sg[g].h0 * a.vHeadDim;
        const int64_t pf = pfRow && (g == 0 || sg[g].kvHead != sg[g - 1].kvHead) ? vBlock : 0;
        switch (sg[g].nh) {
          case 4: valueRange<4, KIND>(sc, stride, vE, keyLoc, r0, r1, a, r0 == 0, o, pf, maxKeys); break;
          case 3: valueRange<3, KIND>(sc, stride, vE, keyLoc, r0, r1, a, r0 == 0, o, pf, maxKeys); break;
          case 2: valueRange<2, KIND>(sc, stride, vE, keyLoc, r0, r1, a, r0 == 0, o, pf, maxKeys); break;
          default: valueRange<1, KIND>(sc, stride, vE, keyLoc, r0, r1, a, r0 == 0, o, pf, maxKeys); break;
        }
      }
    }
  }
  for (int j = 0; j < nr; j++) {
    for (int g = 0; g < ng; g++) {
      for (int i = 0; i < sg[g].nh; i++) {
        const float f = inv[(j * ng + g) * 4 + i];
        const __m256 vinv = _mm256_set1_ps(f);
        float* o = outRows[j] + (sg[g].h0 + i) * a.vHeadDim;
        int64_t e = 0;
        for (; e + 8 <= a.vHeadDim; e += 8) _mm256_storeu_ps(o + e, _mm256_mul_ps(_mm256_loadu_ps(o + e), vinv));
        for (; e < a.vHeadDim; e++) o[e] = o[e] * f;
      }
    }
  }
}

}  // namespace

std::string attention(ThreadPool& pool, const float* q, int64_t numTokens, const AttentionArgs& a, float* out) {
  if (a.numKvHeads <= 0 || a.numHeads % a.numKvHeads != 0) return "attention: numHeads not divisible by numKvHeads";
  if (a.kLayout.kind != a.vLayout.kind || a.kLayout.kind < KV_F32 || a.kLayout.kind > KV_FP8_BLOCK) return "attention: K and V must share one known KV codec";
  const int64_t group = a.numHeads / a.numKvHeads;
  std::vector<RowInfo> rows(numTokens, RowInfo{-1, -1});
  for (int64_t i = 0; i < a.batch.numReqs; i++) {
    int64_t tableRow = 0;
    if (std::string err = a.batch.checkReq(i, numTokens, "attention", &tableRow); !err.empty()) return err;
    const int64_t start = a.batch.extendStartLoc[i], len = a.batch.extendSeqLens[i], prefix = a.batch.extendPrefixLens[i];
    for (int64_t j = 0; j < len; j++) rows[start + j] = RowInfo{static_cast<int32_t>(i), static_cast<int32_t>(prefix + j)};
  }
  const int threads = pool.threads();
  // sub-groups of up to 4 heads of one kv head. A work item = (consecutive rows of one request, consecutive
  // sub-groups). Fewer rows than threads: a row's sub-groups split over the threads; otherwise every sub-group in
  // one item, and dense causal rows of a request in chunks of kRows (they share each K/V block: prefill).
  constexpr int64_t kSub = 4;
  std::vector<SubGroup> subs;
  for (int64_t g = 0; g < a.numKvHeads; g++)
    for (int64_t h0 = g * group; h0 < (g + 1) * group; h0 += kSub)
      subs.push_back(SubGroup{g, h0, static_cast<int>(std::min(kSub, (g + 1) * group - h0))});
  const int64_t numSubs = static_cast<int64_t>(subs.size());
  int64_t itemsPerRow = threads == 1 ? 1 : std::min<int64_t>(numSubs, std::max<int64_t>(1, (threads + numTokens - 1) / std::max<int64_t>(numTokens, 1)));
  const int64_t subsPerItem = (numSubs + itemsPerRow - 1) / itemsPerRow;
  itemsPerRow = (numSubs + subsPerItem - 1) / subsPerItem;
  const int64_t kRows = itemsPerRow == 1 && !a.sparse ? 8 : 1;
  struct Item {
    int64_t t0;
    int nr;
    int64_t u0;
  };
  std::vector<Item> items;
  for (int64_t i = 0; i < a.batch.numReqs; i++) {
    const int64_t start = a.batch.extendStartLoc[i], len = a.batch.extendSeqLens[i];
    for (int64_t j = 0; j < len; j += kRows)
      for (int64_t u = 0; u < numSubs; u += subsPerItem) items.push_back(Item{start + j, static_cast<int>(std::min(kRows, len - j)), u});
  }
  std::vector<char> bad(threads, 0);
  std::fill(out, out + numTokens * a.numHeads * a.vHeadDim, 0.0f);
  pool.parallelFor(static_cast<int64_t>(items.size()), [&](int64_t itemIndex, int ti) {
    const Item it = items[itemIndex];
    const int ng = static_cast<int>(std::min(subsPerItem, numSubs - it.u0));
    const RowInfo ri = rows[it.t0];  // every row of the item belongs to this request
    if (ri.req < 0) return;
    thread_local std::vector<int32_t> locs;
    thread_local std::vector<float> scores;
    thread_local std::vector<int32_t> sel;
    const int64_t tableRow = static_cast<int64_t>(a.batch.reqPoolIndices[ri.req]) * a.batch.reqToTokenStride;
    int64_t numKeys[8];
    const float* qRows[8];
    float* outRows[8];
    int64_t maxKeys = 0;
    for (int j = 0; j < it.nr; j++) {
      const int64_t t = it.t0 + j;
      qRows[j] = q + t * a.numHeads * a.headDim;
      outRows[j] = out + t * a.numHeads * a.vHeadDim;
      numKeys[j] = rows[t].last + 1;
      maxKeys = std::max(maxKeys, numKeys[j]);
    }
    if (a.sparse) {  // one row per item: its picks in ascending order
      sel.clear();
      const int32_t* sp = a.sparse + it.t0 * a.sparseWidth;
      for (int64_t j = 0; j < a.sparseWidth; j++)
        if (sp[j] >= 0 && sp[j] <= ri.last) sel.push_back(sp[j]);
      if (!std::is_sorted(sel.begin(), sel.end())) std::sort(sel.begin(), sel.end());
      locs.resize(sel.size());
      for (size_t j = 0; j < sel.size(); j++) locs[j] = a.batch.reqToToken[tableRow + sel[j]];
      numKeys[0] = maxKeys = static_cast<int64_t>(sel.size());
    } else {
      locs.resize(maxKeys);
      for (int64_t s = 0; s < maxKeys; s++) locs[s] = a.batch.reqToToken[tableRow + s];
    }
    for (int64_t s = 0; s < maxKeys; s++) {
      if (locs[s] < 0 || locs[s] >= a.kLocs || locs[s] >= a.vLocs) {
        bad[ti] = 1;
        return;
      }
    }
    const int64_t stride = maxKeys + 8;  // scores of row j, sub-group g, head i at sc[(j·4·ng + 4g + i) · stride]
    if (static_cast<int64_t>(scores.size()) < it.nr * kSub * ng * stride) scores.resize(it.nr * kSub * ng * stride);
    switch (a.kLayout.kind) {
      case KV_BF16: attendItem<KV_BF16>(qRows, it.nr, subs.data() + it.u0, ng, locs.data(), numKeys, a, scores.data(), stride, outRows); break;
      case KV_FP8_E4M3: attendItem<KV_FP8_E4M3>(qRows, it.nr, subs.data() + it.u0, ng, locs.data(), numKeys, a, scores.data(), stride, outRows); break;
      case KV_FP8_E5M2: attendItem<KV_FP8_E5M2>(qRows, it.nr, subs.data() + it.u0, ng, locs.data(), numKeys, a, scores.data(), stride, outRows); break;
      case KV_FP8_BLOCK: attendItem<KV_FP8_BLOCK>(qRows, it.nr, subs.data() + it.u0, ng, locs.data(), numKeys, a, scores.data(), stride, outRows); break;
      default: attendItem<KV_F32>(qRows, it.nr, subs.data() + it.u0, ng, locs.data(), numKeys, a, scores.data(), stride, outRows); break;
    }
  });
  for (char b : bad)
    if (b) return "attention: a KV loc from reqToToken lies outside the K/V buffers";
  return "";
}

}  // namespace tsg
