// Row-wise and element-wise kernels, attention and routed experts of the native backend. Each mirrors the TS
// reference in src/kernels/cpu/ (same formula and the same reduction order per row); every row is computed by the
// same code whatever the batch, so the backend stays batch invariant.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common.h"
#include "gemm.h"
#include "kv_codec.h"
#include "thread_pool.h"

namespace tsg {

/** y = x · (Σx²/width + eps)^-1/2 · w, f64 reduction and scaling (reference: kernels/cpu/norm.ts). */
void rmsNorm(ThreadPool& pool, const float* x, int64_t rows, int64_t width, int64_t xStride, const float* w, double eps, float* y);

/** y = (x − mean)/sqrt(var + eps) · w + b (biased variance, f64). */
void layerNorm(ThreadPool& pool, const float* x, int64_t rows, int64_t width, const float* w, const float* b, double eps, float* y);

/** Row softmax (max-subtracted; exp in f32, sum and scaling in f64). */
void softmax(ThreadPool& pool, const float* x, int64_t rows, int64_t width, float* y);

void addArrays(const float* a, const float* b, float* y, int64_t n);
void sigmoidArray(const float* x, float* y, int64_t n);
/** y = g/(1+e^-g) · u (model-spec §1.6). */
void siluAndMulArray(const float* g, const float* u, float* y, int64_t n);

/** RoPE in place (reference: kernels/cpu/rope.ts; f64 rotation of f32 values, cos/sin rounded to f32 × mscale). */
void rope(ThreadPool& pool, float* x, int64_t numTokens, const int32_t* positions, int64_t numHeads, int64_t headDim,
          int64_t rowStride, int64_t offset, const float* invFreq, int64_t rotaryDim, bool interleaved, double mscale);

/** Top-k per row: descending, ties → lower index, NaN ranks lowest. */
void topk(ThreadPool& pool, const float* x, int64_t rows, int64_t width, int64_t k, int32_t* idx, float* val);

/** Rows of a weight table (any stored format) → f32. @return false if an id is outside [0, V) */
bool embedding(ThreadPool& pool, const int32_t* ids, int64_t n, const WeightView& table, float* y);

/**
 * Geometry and inputs of attention: K/V rows of kRowWidth / vRowWidth floats in the KV pool (heads start at
 * kOffset / vOffset), the paged batch, and optional DSA top-k key positions [numTokens, sparseWidth] (−1 pads).
 */
struct AttentionArgs {
  int64_t numHeads, numKvHeads, headDim, vHeadDim;
  float scale;
  const uint8_t* k;  // K rows: row loc at k + loc·kLayout.rowBytes, stored as kLayout says (kv_codec.h)
  int64_t kRowWidth, kOffset, kLocs;  // elements per row, first element of kv head 0; kLocs = rows available (bounds check)
  const uint8_t* v;
  int64_t vRowWidth, vOffset, vLocs;
  KvLayout kLayout, vLayout;
  PagedBatch batch;
  const int32_t* sparse;  // [numTokens, sparseWidth] or nullptr
  int64_t sparseWidth;
};

/**
 * Causal attention over the paged KV cache (reference: kernels/cpu/attention.ts). Per (row, head): scores q·k in
 * eight f32 FMA lanes then hsum8, × scale; softmax with exp8 and an f64 sum; values accumulated in f32 in ascending
 * key order. @return "" or an error message (bad loc / geometry)
 */
std::string attention(ThreadPool& pool, const float* q, int64_t numTokens, const AttentionArgs& a, float* out);

/** One routed expert's SwiGLU weights: gate, up [I, D], down [D, I]; gate == nullptr marks an absent expert. */
struct ExpertView {
  const WeightView* gate;
  const WeightView* up;
  const WeightView* down;
};

/**
 * Routed experts (reference: kernels/cpu/moe.ts): tokens grouped by expert (ascending token), gate/up/down through
 * matmulRange (batch invariant), per-token f64 sum in ascending expert id. experts[e].gate == nullptr: absent.
 * @return "" or an error message
 */
std::string fusedMoe(ThreadPool& pool, const float* x, int64_t numTokens, int64_t hidden, const std::vector<ExpertView>& experts,
                     const int32_t* topkIds, const float* topkWeights, int64_t topK, float* out);

/** Measured FMA peak of `pool.threads()` threads (GFLOP/s) over about `seconds`. */
double measureFmaPeak(ThreadPool& pool, double seconds);

/**
 * Measured read bandwidth (GB/s) streaming a `bytes` buffer `reps` times with all threads (best rep). The buffer is
 * placed as weights are (mapHugePages), so mat-vec figures compare against the same kind of memory.
 */
double measureReadBandwidth(ThreadPool& pool, int64_t bytes, int reps);


}  // namespace tsg
