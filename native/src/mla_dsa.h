// DeepSeek attention helpers of the native backend: the per-group (per-head) products of MLA's absorbed form and
// the DSA lightning indexer's top-k key selection. Each row's result depends only on that row (batch invariant).
#pragma once

#include <cstdint>
#include <string>

#include "common.h"
#include "gemm.h"
#include "kv_codec.h"
#include "thread_pool.h"

namespace tsg {

/** Element strides (in floats) of groupedMatmul's input and output. */
struct GroupedLayout {
  int64_t xRowStride, xGroupStride, outRowStride, outGroupStride;
};

/**
 * Per-group linear layers in one call (reference: kernels/cpu/grouped_matmul.ts):
 * y[m, g, 0..N) = x[m, g, 0..K) · W_gᵀ, W_g = rows g·N .. g·N+N−1 of w ([groups·N, K], any stored format), N = w.n/groups.
 * Each element uses matmul's per-element arithmetic (matmulRange), so results equal ops.matmul of the same row
 * against the group's rows, bit for bit, whatever M or the thread count.
 * @param x element (m, g, k) at x[m·xRowStride + g·xGroupStride + k]
 * @param y element (m, g, n) at y[m·outRowStride + g·outGroupStride + n] (other elements untouched)
 */
void groupedMatmul(ThreadPool& pool, const float* x, int64_t M, int64_t groups, const WeightView& w, const GroupedLayout& l, float* y);

/** Geometry and inputs of indexerTopK: index keys [kLocs rows of kRowWidth floats] and the paged batch. */
struct IndexerArgs {
  int64_t numHeads, headDim, topK;
  const uint8_t* k;  // index keys: key of loc = elements 0..headDim of the row at k + loc·kLayout.rowBytes
  int64_t kRowWidth, kLocs;
  KvLayout kLayout;
  PagedBatch batch;
  int64_t qLen, wLen;  // elements of q / weights (checked only when some row needs scores)
};

/**
 * DSA indexer top-k (reference: kernels/cpu/indexer.ts; model-spec §3.8.2–§3.8.3). For a row with sequence index
 * `last`: all positions 0..last when last+1 ≤ topK; otherwise scores I[s] = Σ_h w[h]·ReLU(q[h]·k_s) (dot: eight f32
 * FMA lanes over the head dim, lanes summed pairwise ((0+1)+(2+3))+((4+5)+(6+7)); the head sum one f32 FMA per head in
 * ascending h) and the topK largest positions, ties towards the lower position, written ascending. Unused slots −1.
 * @param q [numTokens, numHeads, headDim] f32 (read only for rows with more than topK keys)
 * @param weights [numTokens, numHeads] f32
 * @param out [numTokens, topK] i32
 * @return "" or an error message (bad geometry / loc)
 */
std::string indexerTopK(ThreadPool& pool, const float* q, const float* weights, int64_t numTokens, const IndexerArgs& a, int32_t* out);

}  // namespace tsg
