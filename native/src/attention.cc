// Causal attention over the paged KV cache, GQA/MQA (MLA absorbed: one latent kv head) and DSA sparse keys.
// One (row, head) at a time with fixed arithmetic, so a row's output does not depend on the rest of the batch.
#include <algorithm>
#include <cmath>
#include <vector>

#include "ops.h"

namespace tsg {

namespace {

/** q·k over `d` dims: eight FMA lanes, zero-padded tail, hsum8. */
inline float dotF32(const float* a, const float* b, int64_t d) {
  __m256 acc = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= d; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc);
  if (i < d) {
    const __m256i m = tailMask(static_cast<int>(d - i));
    acc = _mm256_fmadd_ps(_mm256_maskload_ps(a + i, m), _mm256_maskload_ps(b + i, m), acc);
  }
  return hsum8(acc);
}

struct RowInfo {
  int32_t req;
  int32_t last;  // sequence index of the row: keys 0..last are visible
};

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
  // work item: (row, head range); single heads when there are few rows (decode) so all threads get work
  const int64_t headsPerItem = numTokens >= 2 * threads ? a.numHeads : 1;
  const int64_t itemsPerRow = a.numHeads / headsPerItem;
  std::vector<char> bad(threads, 0);
  std::fill(out, out + numTokens * a.numHeads * a.vHeadDim, 0.0f);
  pool.parallelFor(numTokens * itemsPerRow, [&](int64_t item, int ti) {
    const int64_t t = item / itemsPerRow;
    const int64_t h0 = (item % itemsPerRow) * headsPerItem;
    const RowInfo ri = rows[t];
    if (ri.req < 0) return;  // row not covered by any request: stays zero (reference leaves it zero too)
    thread_local std::vector<int32_t> locs;
    thread_local std::vector<float> scores;
    thread_local std::vector<int32_t> sel;
    const int64_t tableRow = static_cast<int64_t>(a.reqPoolIndices[ri.req]) * a.reqToTokenStride;
    int64_t numKeys = 0;
    if (a.sparse) {
      sel.clear();
      const int32_t* s = a.sparse + t * a.sparseWidth;
      for (int64_t j = 0; j < a.sparseWidth; j++)
        if (s[j] >= 0 && s[j] <= ri.last) sel.push_back(s[j]);
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
    if (static_cast<int64_t>(scores.size()) < numKeys + 8) scores.resize(numKeys + 8);
    for (int64_t h = h0; h < h0 + headsPerItem; h++) {
      const int64_t kvHead = h / group;
      const float* qh = q + (t * a.numHeads + h) * a.headDim;
      const float* kBase = a.k + a.kOffset + kvHead * a.headDim;
      const float* vBase = a.v + a.vOffset + kvHead * a.vHeadDim;
      float mx = -INFINITY;
      for (int64_t s = 0; s < numKeys; s++) {
        const float sc = dotF32(qh, kBase + static_cast<int64_t>(locs[s]) * a.kRowWidth, a.headDim) * a.scale;
        scores[s] = sc;
        mx = sc > mx ? sc : mx;
      }
      const __m256 vm = _mm256_set1_ps(mx);
      int64_t s = 0;
      for (; s + 8 <= numKeys; s += 8) _mm256_storeu_ps(&scores[s], exp8(_mm256_sub_ps(_mm256_loadu_ps(&scores[s]), vm)));
      for (int64_t r = s; r < numKeys; r++) scores[r] -= mx;
      expArray(&scores[s], &scores[s], numKeys - s);
      double sum = 0;
      for (int64_t r = 0; r < numKeys; r++) sum += scores[r];
      float* o = out + (t * a.numHeads + h) * a.vHeadDim;
      const float inv = numKeys > 0 ? static_cast<float>(1.0 / sum) : 0.0f;
      // o = Σ_s w_s · v_s in f32, eight value dims per register, ascending s
      for (int64_t e = 0; e < a.vHeadDim; e += 32) {
        const int64_t width = std::min<int64_t>(32, a.vHeadDim - e);
        __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
        if (width == 32) {
          for (int64_t r = 0; r < numKeys; r++) {
            const float* vr = vBase + static_cast<int64_t>(locs[r]) * a.vRowWidth + e;
            const __m256 w = _mm256_set1_ps(scores[r]);
            acc[0] = _mm256_fmadd_ps(w, _mm256_loadu_ps(vr), acc[0]);
            acc[1] = _mm256_fmadd_ps(w, _mm256_loadu_ps(vr + 8), acc[1]);
            acc[2] = _mm256_fmadd_ps(w, _mm256_loadu_ps(vr + 16), acc[2]);
            acc[3] = _mm256_fmadd_ps(w, _mm256_loadu_ps(vr + 24), acc[3]);
          }
        } else {
          for (int64_t r = 0; r < numKeys; r++) {
            const float* vr = vBase + static_cast<int64_t>(locs[r]) * a.vRowWidth + e;
            const __m256 w = _mm256_set1_ps(scores[r]);
            for (int64_t c = 0; c < width; c += 8) {
              const int cnt = static_cast<int>(std::min<int64_t>(8, width - c));
              const __m256 vv = cnt == 8 ? _mm256_loadu_ps(vr + c) : _mm256_maskload_ps(vr + c, tailMask(cnt));
              acc[c / 8] = _mm256_fmadd_ps(w, vv, acc[c / 8]);
            }
          }
        }
        const __m256 vinv = _mm256_set1_ps(inv);
        for (int64_t c = 0; c < width; c += 8) {
          const int cnt = static_cast<int>(std::min<int64_t>(8, width - c));
          const __m256 r = _mm256_mul_ps(acc[c / 8], vinv);
          if (cnt == 8) _mm256_storeu_ps(o + e + c, r);
          else _mm256_maskstore_ps(o + e + c, tailMask(cnt), r);
        }
      }
    }
  });
  for (char b : bad)
    if (b) return "attention: a KV loc from reqToToken lies outside the K/V buffers";
  return "";
}

}  // namespace tsg
