// Causal attention over the paged KV cache, GQA/MQA (MLA absorbed: one latent kv head) and DSA sparse keys.
// One (row, head) at a time with fixed arithmetic, so a row's output does not depend on the rest of the batch.
#include <algorithm>
#include <cmath>
#include <vector>

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
inline void prefetchRow(const float* row, int64_t bytes) {
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
template <int NH, int NK>
inline void scoreTile(const float* const* qh, const float* kBase, const int32_t* keyLoc, int64_t s, const AttentionArgs& a,
                      float* scoreBuf, int64_t stride, int64_t pfFirst, int64_t pfEnd) {
  for (int64_t p = pfFirst; p < std::min(pfFirst + NK, pfEnd); p++) prefetchRow(kBase + static_cast<int64_t>(keyLoc[p]) * a.kRowWidth, a.headDim * 4);
  const int64_t d8 = a.headDim & ~int64_t(7);
  const int drem = static_cast<int>(a.headDim - d8);
  const float* kr[NK];
  for (int j = 0; j < NK; j++) kr[j] = kBase + static_cast<int64_t>(keyLoc[s + j]) * a.kRowWidth;
  __m256 acc[NH][NK];
  for (int i = 0; i < NH; i++)
    for (int j = 0; j < NK; j++) acc[i][j] = _mm256_setzero_ps();
  for (int64_t e = 0; e < d8; e += 8) {
    __m256 kv[NK];
    for (int j = 0; j < NK; j++) kv[j] = _mm256_loadu_ps(kr[j] + e);
    for (int i = 0; i < NH; i++) {
      const __m256 qv = _mm256_loadu_ps(qh[i] + e);
      for (int j = 0; j < NK; j++) acc[i][j] = _mm256_fmadd_ps(qv, kv[j], acc[i][j]);
    }
  }
  if (drem) {
    const __m256i dmask = tailMask(drem);
    __m256 kv[NK];
    for (int j = 0; j < NK; j++) kv[j] = _mm256_maskload_ps(kr[j] + d8, dmask);
    for (int i = 0; i < NH; i++) {
      const __m256 qv = _mm256_maskload_ps(qh[i] + d8, dmask);
      for (int j = 0; j < NK; j++) acc[i][j] = _mm256_fmadd_ps(qv, kv[j], acc[i][j]);
    }
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
template <int NH, int NV, bool MASKED>
inline void valuePass(const float* scoreBuf, int64_t stride, const float* vBase, const int32_t* keyLoc, int64_t r0, int64_t r1,
                      int64_t e, const int* cnt, const AttentionArgs& a, bool first, float* out, int64_t pfDist, int64_t pfEnd) {
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
  const int64_t pfBytes = (8 * NV - 8 + (MASKED ? cnt[NV - 1] : 8)) * 4;  // the bytes this pass reads of a row
  for (int64_t r = r0; r < r1; r++) {
    if (pfDist > 0 && r + pfDist < pfEnd) {
      // the same dims of the row one block ahead (points ≤ 64 bytes apart: every line of the range)
      const char* pp = reinterpret_cast<const char*>(vBase + static_cast<int64_t>(keyLoc[r + pfDist]) * a.vRowWidth + e);
      for (int64_t off = 0; off < pfBytes; off += 56) _mm_prefetch(pp + off, _MM_HINT_T0);
      _mm_prefetch(pp + pfBytes - 1, _MM_HINT_T0);
    }
    const float* vr = vBase + static_cast<int64_t>(keyLoc[r]) * a.vRowWidth + e;
    __m256 vv[NV];
    for (int v = 0; v < NV; v++) vv[v] = MASKED ? _mm256_maskload_ps(vr + 8 * v, mask[v]) : _mm256_loadu_ps(vr + 8 * v);
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
template <int NH>
void scoreRange(const float* const* qh, const float* kBase, const int32_t* keyLoc, int64_t s0, int64_t s1, const AttentionArgs& a,
                float* scoreBuf, int64_t stride, int64_t pfDist, int64_t pfEnd) {
  // pfDist > 0: each tile prefetches its kv head's slice of the rows pfDist keys ahead (spread over the compute)
  const int64_t end = pfDist > 0 ? pfEnd : 0;
  int64_t s = s0;
  for (; s + 3 <= s1; s += 3) scoreTile<NH, 3>(qh, kBase, keyLoc, s, a, scoreBuf, stride, s + pfDist, end);
  for (; s < s1; s++) scoreTile<NH, 1>(qh, kBase, keyLoc, s, a, scoreBuf, stride, s + pfDist, end);
}

/** The value sum of NH heads over keys [r0, r1) (see valuePass), 24 dims per pass, the last pass masked. */
template <int NH>
void valueRange(const float* scoreBuf, int64_t stride, const float* vBase, const int32_t* keyLoc, int64_t r0, int64_t r1,
                const AttentionArgs& a, bool first, float* out, int64_t pfDist, int64_t pfEnd) {
  const int64_t eFull = a.vHeadDim - a.vHeadDim % 24;
  const int64_t rem = a.vHeadDim - eFull;
  const int cnt[3] = {static_cast<int>(std::min<int64_t>(8, rem)), static_cast<int>(std::max<int64_t>(0, std::min<int64_t>(8, rem - 8))),
                      static_cast<int>(std::max<int64_t>(0, rem - 16))};
  for (int64_t e = 0; e < eFull; e += 24) valuePass<NH, 3, false>(scoreBuf, stride, vBase, keyLoc, r0, r1, e, cnt, a, first, out, pfDist, pfEnd);
  if (rem > 16) valuePass<NH, 3, true>(scoreBuf, stride, vBase, keyLoc, r0, r1, eFull, cnt, a, first, out, pfDist, pfEnd);
  else if (rem > 8) valuePass<NH, 2, true>(scoreBuf, stride, vBase, keyLoc, r0, r1, eFull, cnt, a, first, out, pfDist, pfEnd);
  else if (rem > 0) valuePass<NH, 1, true>(scoreBuf, stride, vBase, keyLoc, r0, r1, eFull, cnt, a, first, out, pfDist, pfEnd);
}

/**
 * Attention of one row for the sub-groups `sg[0..ng)` (consecutive heads) over `numKeys` keys at `keyLoc`.
 * Per (head, key): q·k in eight FMA lanes over the head dim, hsum8, × scale; softmax with exp8 and an f64 sum;
 * o = Σ_s w_s·v_s in f32 in ascending s, × 1/sum — so a head's result never depends on which heads share the item.
 * Keys run in blocks whose K (then V) rows, over all of the item's kv heads, fit L1: each row is read from memory
 * once for all sub-groups, and the next block's rows are prefetched (locs are arbitrary: no hardware stream).
 * @param qRow [numHeads, headDim] f32 queries of the row
 * @param scoreBuf [4·ng, stride] f32 scratch
 * @param outRow [numHeads, vHeadDim] f32 output of the row
 */
#ifndef TSG_ATTN_KBLOCK
#define TSG_ATTN_KBLOCK 12288
#endif
#ifndef TSG_ATTN_VBLOCK
#define TSG_ATTN_VBLOCK 12288
#endif
constexpr int64_t kBlockBytes = TSG_ATTN_KBLOCK, vBlockBytes = TSG_ATTN_VBLOCK;

void attendItem(const float* qRow, const SubGroup* sg, int ng, const int32_t* keyLoc, int64_t numKeys, const AttentionArgs& a,
                float* scoreBuf, int64_t stride, float* outRow) {
  const int64_t kv0 = sg[0].kvHead, kv1 = sg[ng - 1].kvHead + 1;
  const float* kSpan = a.k + a.kOffset + kv0 * a.headDim;  // the item's part of a K row: kv heads kv0..kv1−1
  const float* vSpan = a.v + a.vOffset + kv0 * a.vHeadDim;
  const int64_t kBytes = (kv1 - kv0) * a.headDim * 4, vBytes = (kv1 - kv0) * a.vHeadDim * 4;
  auto prefetchRows = [&](const float* base, int64_t rowWidth, int64_t bytes, int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; r++) prefetchRow(base + static_cast<int64_t>(keyLoc[r]) * rowWidth, bytes);
  };
  // 1. scores. Block b+1's rows are prefetched while block b is computed: tile by tile, each kv head's first
  //    sub-group fetching the slice it will read next (the hardware prefetchers stop at 4 KB pages: rows are long)
  const int64_t kBlock = std::max<int64_t>(3, kBlockBytes / std::max<int64_t>(kBytes, 1) / 3 * 3);
  prefetchRows(kSpan, a.kRowWidth, kBytes, 0, std::min(kBlock, numKeys));
  for (int64_t s0 = 0; s0 < numKeys; s0 += kBlock) {
    const int64_t s1 = std::min(numKeys, s0 + kBlock);
    for (int g = 0; g < ng; g++) {
      const float* qh[4];
      for (int i = 0; i < sg[g].nh; i++) qh[i] = qRow + (sg[g].h0 + i) * a.headDim;
      const float* kBase = a.k + a.kOffset + sg[g].kvHead * a.headDim;
      float* sc = scoreBuf + 4 * g * stride;
      const int64_t pf = g == 0 || sg[g].kvHead != sg[g - 1].kvHead ? kBlock : 0;
      switch (sg[g].nh) {
        case 4: scoreRange<4>(qh, kBase, keyLoc, s0, s1, a, sc, stride, pf, numKeys); break;
        case 3: scoreRange<3>(qh, kBase, keyLoc, s0, s1, a, sc, stride, pf, numKeys); break;
        case 2: scoreRange<2>(qh, kBase, keyLoc, s0, s1, a, sc, stride, pf, numKeys); break;
        default: scoreRange<1>(qh, kBase, keyLoc, s0, s1, a, sc, stride, pf, numKeys); break;
      }
    }
  }
  // 2. softmax weights per head (exp8 of score − max), f64 sum
  float inv[64];
  for (int g = 0; g < ng; g++) {
    for (int i = 0; i < sg[g].nh; i++) {
      float* sc = scoreBuf + (4 * g + i) * stride;
      expMinusMax(sc, sc, numKeys);
      double sum = 0;
      for (int64_t r = 0; r < numKeys; r++) sum += sc[r];
      inv[4 * g + i] = numKeys > 0 ? static_cast<float>(1.0 / sum) : 0.0f;
    }
  }
  // 3. o_h = Σ_s w_hs · v_s over key blocks, then × 1/sum
  if (numKeys > 0) {
    const int64_t vBlock = std::max<int64_t>(4, vBlockBytes / std::max<int64_t>(vBytes, 1));
    prefetchRows(vSpan, a.vRowWidth, vBytes, 0, std::min(vBlock, numKeys));
    for (int64_t r0 = 0; r0 < numKeys; r0 += vBlock) {
      const int64_t r1 = std::min(numKeys, r0 + vBlock);
      for (int g = 0; g < ng; g++) {
        const float* vBase = a.v + a.vOffset + sg[g].kvHead * a.vHeadDim;
        const float* sc = scoreBuf + 4 * g * stride;
        float* o = outRow + sg[g].h0 * a.vHeadDim;
        const int64_t pf = g == 0 || sg[g].kvHead != sg[g - 1].kvHead ? vBlock : 0;
        switch (sg[g].nh) {
          case 4: valueRange<4>(sc, stride, vBase, keyLoc, r0, r1, a, r0 == 0, o, pf, numKeys); break;
          case 3: valueRange<3>(sc, stride, vBase, keyLoc, r0, r1, a, r0 == 0, o, pf, numKeys); break;
          case 2: valueRange<2>(sc, stride, vBase, keyLoc, r0, r1, a, r0 == 0, o, pf, numKeys); break;
          default: valueRange<1>(sc, stride, vBase, keyLoc, r0, r1, a, r0 == 0, o, pf, numKeys); break;
        }
      }
    }
  }
  for (int g = 0; g < ng; g++) {
    for (int i = 0; i < sg[g].nh; i++) {
      const float f = inv[4 * g + i];
      const __m256 vinv = _mm256_set1_ps(f);
      float* o = outRow + (sg[g].h0 + i) * a.vHeadDim;
      int64_t e = 0;
      for (; e + 8 <= a.vHeadDim; e += 8) _mm256_storeu_ps(o + e, _mm256_mul_ps(_mm256_loadu_ps(o + e), vinv));
      for (; e < a.vHeadDim; e++) o[e] = o[e] * f;
    }
  }
}

}  // namespace

std::string attention(ThreadPool& pool, const float* q, int64_t numTokens, const AttentionArgs& a, float* out) {
  if (a.numKvHeads <= 0 || a.numHeads % a.numKvHeads != 0) return "attention: numHeads not divisible by numKvHeads";
  const int64_t group = a.numHeads / a.numKvHeads;
  std::vector<RowInfo> rows(numTokens, RowInfo{-1, -1});
  for (int64_t i = 0; i < a.numReqs; i++) {
    const int64_t start = a.extendStartLoc[i], len = a.extendSeqLens[i], prefix = a.extendPrefixLens[i];
    if (start < 0 || len < 0 || start + len > numTokens) return "attention: req rows beyond numTokens";
    const int64_t tableRow = static_cast<int64_t>(a.reqPoolIndices[i]) * a.reqToTokenStride;
    if (prefix + len > a.reqToTokenStride || tableRow < 0 || tableRow + prefix + len > a.reqToTokenLen)
      return "attention: sequence beyond reqToToken";
    for (int64_t j = 0; j < len; j++) rows[start + j] = RowInfo{static_cast<int32_t>(i), static_cast<int32_t>(prefix + j)};
  }
  const int threads = pool.threads();
  // sub-groups of up to 4 heads of one kv head; a work item = (row, consecutive sub-groups). Fewer rows than threads:
  // a row's sub-groups split over the threads; otherwise one item per row (its K/V rows read once for all heads).
  constexpr int64_t kSub = 4;
  std::vector<SubGroup> subs;
  for (int64_t g = 0; g < a.numKvHeads; g++)
    for (int64_t h0 = g * group; h0 < (g + 1) * group; h0 += kSub)
      subs.push_back(SubGroup{g, h0, static_cast<int>(std::min(kSub, (g + 1) * group - h0))});
  const int64_t numSubs = static_cast<int64_t>(subs.size());
  int64_t itemsPerRow = std::min<int64_t>(numSubs, std::max<int64_t>(1, (threads + numTokens - 1) / std::max<int64_t>(numTokens, 1)));
  if (threads == 1) itemsPerRow = 1;
  if (numSubs > 16 * itemsPerRow) itemsPerRow = (numSubs + 15) / 16;  // attendItem's inv[] holds 16 sub-groups
  const int64_t subsPerItem = (numSubs + itemsPerRow - 1) / itemsPerRow;
  itemsPerRow = (numSubs + subsPerItem - 1) / subsPerItem;
  std::vector<char> bad(threads, 0);
  std::fill(out, out + numTokens * a.numHeads * a.vHeadDim, 0.0f);
  pool.parallelFor(numTokens * itemsPerRow, [&](int64_t item, int ti) {
    const int64_t t = item / itemsPerRow;
    const int64_t u0 = (item % itemsPerRow) * subsPerItem;
    const int ng = static_cast<int>(std::min(subsPerItem, numSubs - u0));
    const RowInfo ri = rows[t];
    if (ri.req < 0) return;  // row not covered by any request: stays zero (reference leaves it zero too)
    thread_local std::vector<int32_t> locs;
    thread_local std::vector<float> scores;
    thread_local std::vector<int32_t> sel;
    const int64_t tableRow = static_cast<int64_t>(a.reqPoolIndices[ri.req]) * a.reqToTokenStride;
    int64_t numKeys = 0;
    if (a.sparse) {
      sel.clear();
      const int32_t* sp = a.sparse + t * a.sparseWidth;
      for (int64_t j = 0; j < a.sparseWidth; j++)
        if (sp[j] >= 0 && sp[j] <= ri.last) sel.push_back(sp[j]);
      if (!std::is_sorted(sel.begin(), sel.end())) std::sort(sel.begin(), sel.end());
      locs.resize(sel.size());
      for (size_t j = 0; j < sel.size(); j++) locs[j] = a.reqToToken[tableRow + sel[j]];
      numKeys = static_cast<int64_t>(sel.size());
    } else {
      numKeys = ri.last + 1;
      locs.resize(numKeys);
      for (int64_t s = 0; s < numKeys; s++) locs[s] = a.reqToToken[tableRow + s];
    }
    for (int64_t s = 0; s < numKeys; s++) {
      if (locs[s] < 0 || locs[s] >= a.kLocs || locs[s] >= a.vLocs) {
        bad[ti] = 1;
        return;
      }
    }
    const int64_t stride = numKeys + 8;  // scores of sub-group g, head i at sc[(4g + i) * stride]
    if (static_cast<int64_t>(scores.size()) < kSub * ng * stride) scores.resize(kSub * ng * stride);
    attendItem(q + t * a.numHeads * a.headDim, subs.data() + u0, ng, locs.data(), numKeys, a, scores.data(), stride,
               out + t * a.numHeads * a.vHeadDim);
  });
  for (char b : bad)
    if (b) return "attention: a KV loc from reqToToken lies outside the K/V buffers";
  return "";
}

}  // namespace tsg
