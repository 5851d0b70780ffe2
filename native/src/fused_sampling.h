// Fused row sampler (issue 21): every mode of src/sampling/sampler.ts (greedy, temperature, top-k, top-p, min-p, the
// logprob of the drawn token) for a batch of rows in one call, rows spread over the thread pool. Penalties, logit
// bias, min_new_tokens and grammar masks are applied to the rows beforehand (sparse, in TypeScript); the uniform
// draw u of each non-greedy row comes from the request's seeded RNG, one per row, as the reference takes it.
//
// Numerics. The reference (sampler_reference.ts) computes lse = max + log Σ exp(s − max) and p = f32(exp(f32(s −
// lse))) with V8's Math.exp. Here the exps are a double-precision polynomial (relative error ~1e-14, no division,
// four lanes per instruction) and the sums are lane-parallel: lse agrees with the reference's to ~1e-14 relative, so
// an f32 value derived from it (p, logprobs) is the reference's or its neighbour (logprobs near 0, of near-certain
// tokens, carry that ~1e-14 absolute), and a drawn token differs only when u lands within ~1e-13 of a cumulative
// boundary (never seen in the conformance test: 15 modes × 10,000 rows). The candidates' p (top-k / top-p / min-p)
// use V8's exp itself. Rows with NaN or +Infinity, or all −Infinity, are left to the reference.
#pragma once
#include <cstdint>

#include "thread_pool.h"

namespace tsg {

/** Per-row inputs of fusedSampleRows (one struct per row, filled from TypeScript as 8 doubles). */
struct FusedRowParams {
  double invT;      // 1 / temperature; 0 = greedy (top_k = 1)
  double topK;      // ≥ V: off
  double topP;      // ≥ 1: off
  double minP;      // ≤ 0: off
  double u;         // uniform draw in [0, 1) (non-greedy rows)
  double wantLp;    // 1: compute lse (the logprob of the token)
  double topN;      // > 0: also write the row's logprobs f32(s − lse) in place (top logprobs are taken from them)
  double reserved;
};

/** Status of one row. */
enum FusedStatus : int32_t {
  kFusedOk = 0,
  /** Non-finite values (NaN, +Infinity, all −Infinity): the caller samples it with the reference (row scaled in place when non-greedy). */
  kFusedFallback = 1,
};

/**
 * Samples m rows of a [*, V] logits matrix. Row r = rows[j]: greedy rows take the first largest logit (NaN skipped);
 * others are scaled in place s = f32(logit · invT) and drawn from softmax(s) under top-k / top-p / min-p exactly as
 * the reference's candidate rules (sampler.ts drawCandidates + drawSortedCandidates), or over the whole vocabulary
 * when no filter is on (sampler.ts drawUnfiltered). lpOut[j] = f32(s[tok] − lse) (NaN when not wanted for a greedy
 * row); with topN > 0 the row is overwritten with f32(s − lse). Each row's result depends on its row only.
 * @param logits [≥ (max row + 1)·V] f32 in/out @param rows [m] i32 @param params [m]
 * @param tokOut [m] i32 @param lpOut [m] f64 @param statusOut [m] i32 (FusedStatus)
 */
void fusedSampleRows(ThreadPool& pool, float* logits, int64_t V, const int32_t* rows, int64_t m, const FusedRowParams* params,
                     int32_t* tokOut, double* lpOut, int32_t* statusOut);

/** e^x for x ≤ 0 in double (relative error ~1e-14; x < −708 gives ~3e-308, NaN stays NaN); exposed for tests. */
double fastExpScalar(double x);

}  // namespace tsg
