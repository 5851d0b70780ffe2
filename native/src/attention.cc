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

/**
 * Attention of NH query heads (consecutive, one kv head) of one row over `numKeys` keys at `keyLoc`: the heads share
 * every K and V load. Per (head, key): q·k in eight FMA lanes over the head dim, hsum8, × scale; softmax with exp8
 * and an f64 sum; o = Σ_s w_s·v_s in f32 in ascending s, × 1/sum.
 * @param out [NH, vHeadDim] f32
 */
template <int NH>
void attendHeads(const float* const* qh, const float* kBase, const float* vBase, const int32_t* keyLoc, int64_t numKeys,
                 const AttentionArgs& a, float* scoreBuf, int64_t stride, float* out) {
    // 1. scores: per (head, key) eight FMA lanes over the head dim then hsum8 (= dotF32), × scale
  const int64_t d8 = a.headDim & ~int64_t(7);
  const int drem = static_cast<int>(a.headDim - d8);
  const __m256i dmask = tailMask(drem);
  for (int64_t s = 0; s < numKeys; s++) {
    const float* kr = kBase + static_cast<int64_t>(keyLoc[s]) * a.kRowWidth;
    __m256 acc[NH];
    for (int i = 0; i < NH; i++) acc[i] = _mm256_setzero_ps();
    for (int64_t e = 0; e < d8; e += 8) {
      const __m256 kv = _mm256_loadu_ps(kr + e);
      for (int i = 0; i < NH; i++) acc[i] = _mm256_fmadd_ps(_mm256_loadu_ps(qh[i] + e), kv, acc[i]);
    }
    if (drem) {
      const __m256 kv = _mm256_maskload_ps(kr + d8, dmask);
      for (int i = 0; i < NH; i++) acc[i] = _mm256_fmadd_ps(_mm256_maskload_ps(qh[i] + d8, dmask), kv, acc[i]);
    }
    for (int i = 0; i < NH; i++) scoreBuf[i * stride + s] = hsum8(acc[i]) * a.scale;
  }
  // 2. softmax weights per head (exp8 of score − max), f64 sum
  float inv[NH];
  for (int i = 0; i < NH; i++) {
    float* sc = scoreBuf + i * stride;
    expMinusMax(sc, sc, numKeys);
    double sum = 0;
    for (int64_t r = 0; r < numKeys; r++) sum += sc[r];
    inv[i] = numKeys > 0 ? static_cast<float>(1.0 / sum) : 0.0f;
  }
  // 3. o_h = Σ_s w_hs · v_s in f32, ascending s, 16 value dims of all heads per pass (shared V loads)
  for (int64_t e = 0; e < a.vHeadDim; e += 16) {
    const int64_t width = std::min<int64_t>(16, a.vHeadDim - e);
    const int c0 = static_cast<int>(std::min<int64_t>(8, width));
    const int c1 = static_cast<int>(width - c0);
    const __m256i m0 = tailMask(c0), m1 = tailMask(c1);
    __m256 acc[NH][2];
    for (int i = 0; i < NH; i++) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
    for (int64_t r = 0; r < numKeys; r++) {
      const float* vr = vBase + static_cast<int64_t>(keyLoc[r]) * a.vRowWidth + e;
      const __m256 v0 = c0 == 8 ? _mm256_loadu_ps(vr) : _mm256_maskload_ps(vr, m0);
      const __m256 v1 = c1 == 8 ? _mm256_loadu_ps(vr + 8) : c1 > 0 ? _mm256_maskload_ps(vr + 8, m1) : _mm256_setzero_ps();
      for (int i = 0; i < NH; i++) {
        const __m256 w = _mm256_broadcast_ss(scoreBuf + i * stride + r);
        acc[i][0] = _mm256_fmadd_ps(w, v0, acc[i][0]);
        acc[i][1] = _mm256_fmadd_ps(w, v1, acc[i][1]);
      }
    }
    for (int i = 0; i < NH; i++) {
      float* o = out + i * a.vHeadDim + e;
      const __m256 vinv = _mm256_set1_ps(inv[i]);
      const __m256 r0 = _mm256_mul_ps(acc[i][0], vinv), r1 = _mm256_mul_ps(acc[i][1], vinv);
      if (c0 == 8) _mm256_storeu_ps(o, r0);
      else _mm256_maskstore_ps(o, m0, r0);
      if (c1 == 8) _mm256_storeu_ps(o + 8, r1);
      else if (c1 > 0) _mm256_maskstore_ps(o + 8, m1, r1);
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
  // work item: (row, sub-group of up to kSub heads sharing one kv head); the sub-group shares every K and V load
  constexpr int64_t kSub = 4;
  const int64_t subPerGroup = (group + kSub - 1) / kSub;
  const int64_t itemsPerRow = a.numKvHeads * subPerGroup;
  std::vector<char> bad(threads, 0);
  std::fill(out, out + numTokens * a.numHeads * a.vHeadDim, 0.0f);
  pool.parallelFor(numTokens * itemsPerRow, [&](int64_t item, int ti) {
    const int64_t t = item / itemsPerRow;
    const int64_t kvHead = (item % itemsPerRow) / subPerGroup;
    const int64_t h0 = kvHead * group + ((item % itemsPerRow) % subPerGroup) * kSub;
    const int64_t nh = std::min(kSub, (kvHead + 1) * group - h0);
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
      std::sort(sel.begin(), sel.end());
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
    const int64_t stride = numKeys + 8;  // scores of head i at sc[i * stride]
    if (static_cast<int64_t>(scores.size()) < kSub * stride) scores.resize(kSub * stride);
    float* const scoreBuf = scores.data();  // plain pointers: no thread_local lookups inside the loops
    const int32_t* const keyLoc = locs.data();
    const float* kBase = a.k + a.kOffset + kvHead * a.headDim;
    const float* vBase = a.v + a.vOffset + kvHead * a.vHeadDim;
    const float* qh[kSub];
    for (int64_t i = 0; i < nh; i++) qh[i] = q + (t * a.numHeads + h0 + i) * a.headDim;
    switch (nh) {
      case 4: attendHeads<4>(qh, kBase, vBase, keyLoc, numKeys, a, scoreBuf, stride, out + (t * a.numHeads + h0) * a.vHeadDim); break;
      case 3: attendHeads<3>(qh, kBase, vBase, keyLoc, numKeys, a, scoreBuf, stride, out + (t * a.numHeads + h0) * a.vHeadDim); break;
      case 2: attendHeads<2>(qh, kBase, vBase, keyLoc, numKeys, a, scoreBuf, stride, out + (t * a.numHeads + h0) * a.vHeadDim); break;
      default: attendHeads<1>(qh, kBase, vBase, keyLoc, numKeys, a, scoreBuf, stride, out + (t * a.numHeads + h0) * a.vHeadDim); break;
    }
  });
  for (char b : bad)
    if (b) return "attention: a KV loc from reqToToken lies outside the K/V buffers";
  return "";
}

}  // namespace tsg
