// Routed experts: group token rows by expert, run every expert's SwiGLU MLP through the batch-invariant matmul
// kernels with the pool spread over (expert, weight-row chunk) tasks, then sum each token's experts in ascending
// expert id in f64 (reference: kernels/cpu/moe.ts).
#include <algorithm>
#include <vector>

#include "ops.h"

namespace tsg {

namespace {

/**
 * Weight rows per (expert, matrix) task. Few tokens (≤ 2, the direct mat-vec path: streaming the weights is the
 * whole cost) → long contiguous runs, split only enough to give every thread ~2 tasks over the 3 gate/up matrices
 * of the ~4 active experts; more tokens → the blocked path's chunk.
 */
int64_t expertRowsPerTask(const WeightView& w, int64_t tokens, int threads) {
  if (tokens > 2) return gemmRowsPerTask(w.k);
  if (threads <= 1) return w.n;
  return std::max<int64_t>(32, (w.n / threads + 3) & ~int64_t(3));
}

}  // namespace

std::string fusedMoe(ThreadPool& pool, const float* x, int64_t numTokens, int64_t hidden, const std::vector<ExpertView>& experts,
                     const int32_t* topkIds, const float* topkWeights, int64_t topK, float* out) {
  const int64_t numExperts = static_cast<int64_t>(experts.size());
  // 1. counting sort of the (token, slot) entries by expert; tokens ascending within an expert
  std::vector<int64_t> count(numExperts + 1, 0);
  for (int64_t i = 0; i < numTokens * topK; i++) {
    const int32_t e = topkIds[i];
    if (e < 0) continue;
    if (e >= numExperts) return "fusedMoe: expert id " + std::to_string(e) + " >= " + std::to_string(numExperts);
    if (experts[e].gate == nullptr) continue;
    count[e + 1]++;
  }
  std::vector<int64_t> first(numExperts + 1, 0);  // first entry of each expert
  for (int64_t e = 0; e < numExperts; e++) first[e + 1] = first[e] + count[e + 1];
  const int64_t numEntries = first[numExperts];
  std::vector<int32_t> entryToken(numEntries);
  std::vector<float> entryWeight(numEntries);
  std::vector<int32_t> entryExpert(numEntries);
  {
    std::vector<int64_t> fill(first.begin(), first.end() - 1);
    for (int64_t t = 0; t < numTokens; t++)
      for (int64_t j = 0; j < topK; j++) {
        const int32_t e = topkIds[t * topK + j];
        if (e < 0 || experts[e].gate == nullptr) continue;
        const int64_t p = fill[e]++;
        entryToken[p] = static_cast<int32_t>(t);
        entryWeight[p] = topkWeights[t * topK + j];
        entryExpert[p] = e;
      }
  }
  for (int64_t e = 0; e < numExperts; e++) {
    if (first[e + 1] == first[e]) continue;
    const ExpertView& ex = experts[e];
    if (ex.gate->k != hidden || ex.up->k != hidden || ex.up->n != ex.gate->n || ex.down->n != hidden || ex.down->k != ex.gate->n)
      return "fusedMoe: expert " + std::to_string(e) + " weight shapes do not match hidden size " + std::to_string(hidden);
  }
  // 2. gather rows; offsets of each expert's intermediate block
  // work buffers reused across calls (first-touch page faults of fresh buffers cost more than the math at decode)
  static thread_local std::vector<float> xg, g, u, yg;
  auto grow = [](std::vector<float>& v, size_t n) {
    if (v.size() < n) v.resize(n);
  };
  grow(xg, numEntries * hidden);
  std::vector<int64_t> interOff(numExperts + 1, 0);
  for (int64_t e = 0; e < numExperts; e++)
    interOff[e + 1] = interOff[e] + (first[e + 1] - first[e]) * (experts[e].gate ? experts[e].gate->n : 0);
  grow(g, interOff[numExperts]);
  grow(u, interOff[numExperts]);
  grow(yg, numEntries * hidden);
  // raw pointers: the lambdas below run on pool threads, where these thread_local names mean other buffers
  float* const xgp = xg.data();
  float* const gp = g.data();
  float* const up = u.data();
  float* const ygp = yg.data();
  for (int64_t p = 0; p < numEntries; p++) std::memcpy(xgp + p * hidden, x + entryToken[p] * hidden, hidden * sizeof(float));

  const int threads = pool.threads();
  // experts on the blocked path (more than a few rows) get their rows packed once (packActivations) for all their
  // weight-row tasks: gate and up share the packed x, down the packed h. An empty range packOff[e] == packOff[e + 1]
  // (hPackOff for h): the direct path, which reads the rows as they are.
  std::vector<int64_t> packOff(numExperts + 1, 0), hPackOff(numExperts + 1, 0);
  for (int64_t e = 0; e < numExperts; e++) {
    const int64_t rows = first[e + 1] - first[e];
    const bool blocked = rows > 0 && (matmulRangeIsBlocked(rows, *experts[e].gate) || matmulRangeIsBlocked(rows, *experts[e].up));
    const bool hBlocked = rows > 0 && matmulRangeIsBlocked(rows, *experts[e].down);
    packOff[e + 1] = packOff[e] + (blocked ? packedActivationFloats(rows, hidden) : 0);
    hPackOff[e + 1] = hPackOff[e] + (hBlocked ? packedActivationFloats(rows, experts[e].down->k) : 0);
  }
  static thread_local std::vector<float> xPacked, hPacked;
  grow(xPacked, packOff[numExperts]);
  grow(hPacked, hPackOff[numExperts]);
  float* const xpk = xPacked.data();
  float* const hpk = hPacked.data();
  const int64_t* const pOff = packOff.data();
  const int64_t* const hOff = hPackOff.data();
  // packs each blocked expert's rows, x (gate/up input) or h (down input), one task per expert (none at decode)
  auto packRows = [&](bool down) {
    if ((down ? hOff : pOff)[numExperts] == 0) return;
    pool.parallelFor(numExperts, [&](int64_t e, int) {
      const int64_t rows = first[e + 1] - first[e];
      const int64_t* off = down ? hOff : pOff;
      if (off[e + 1] == off[e]) return;
      if (down) {
        const int64_t inter = experts[e].gate->n;
        packActivations(gp + interOff[e], rows, inter, inter, hpk + off[e]);
      } else {
        packActivations(xgp + first[e] * hidden, rows, hidden, hidden, xpk + off[e]);
      }
    });
  };
  static thread_local std::vector<std::vector<float>> scratch;
  if (static_cast<int>(scratch.size()) < threads) scratch.resize(threads);
  auto* scr = &scratch;
  struct Task {
    int32_t expert;
    int32_t which;  // 0 gate, 1 up, 2 down
    int64_t n0, n1;
  };
  auto makeTasks = [&](bool down) {
    std::vector<Task> tasks;
    for (int64_t e = 0; e < numExperts; e++) {
      if (first[e + 1] == first[e]) continue;
      const WeightView& w = down ? *experts[e].down : *experts[e].gate;
      const int64_t rows = expertRowsPerTask(w, first[e + 1] - first[e], threads);
      for (int64_t n0 = 0; n0 < w.n; n0 += rows) {
        const int64_t n1 = std::min(w.n, n0 + rows);
        if (down) tasks.push_back({static_cast<int32_t>(e), 2, n0, n1});
        else {
          tasks.push_back({static_cast<int32_t>(e), 0, n0, n1});
          tasks.push_back({static_cast<int32_t>(e), 1, n0, n1});
        }
      }
    }
    return tasks;
  };
  auto runTasks = [&](const std::vector<Task>& tasks) {
    pool.parallelFor(static_cast<int64_t>(tasks.size()), [&](int64_t i, int ti) {
      const Task& tk = tasks[i];
      const ExpertView& ex = experts[tk.expert];
      const int64_t rows = first[tk.expert + 1] - first[tk.expert];
      const WeightView& w = tk.which == 0 ? *ex.gate : tk.which == 1 ? *ex.up : *ex.down;
      std::vector<float>& s = (*scr)[ti];
      if (static_cast<int64_t>(s.size()) < gemmScratchFloats(w.k)) s.resize(gemmScratchFloats(w.k));
      const int64_t e = tk.expert;
      if (tk.which == 2) {
        const int64_t inter = ex.gate->n;
        float* dst = ygp + first[e] * hidden + tk.n0;
        if (hOff[e + 1] > hOff[e]) matmulRangePacked(hpk + hOff[e], rows, w, tk.n0, tk.n1, dst, hidden, s.data());
        else matmulRange(gp + interOff[e], rows, inter, w, tk.n0, tk.n1, dst, hidden, s.data());
      } else {
        float* dst = (tk.which == 0 ? gp + interOff[e] : up + interOff[e]) + tk.n0;
        if (pOff[e + 1] > pOff[e] && matmulRangeIsBlocked(rows, w)) matmulRangePacked(xpk + pOff[e], rows, w, tk.n0, tk.n1, dst, w.n, s.data());
        else matmulRange(xgp + first[e] * hidden, rows, hidden, w, tk.n0, tk.n1, dst, w.n, s.data());
      }
    });
  };
  // 3. gate and up, 4. h = silu(g)·u (into g), 5. down
  packRows(false);
  runTasks(makeTasks(false));
  siluAndMulArray(gp, up, gp, interOff[numExperts]);
  packRows(true);
  runTasks(makeTasks(true));
  // 6. per token, f64 sum over its entries in ascending expert id (entries are grouped by expert ascending)
  std::vector<int64_t> tokenCount(numTokens + 1, 0);
  for (int64_t p = 0; p < numEntries; p++) tokenCount[entryToken[p] + 1]++;
  for (int64_t t = 0; t < numTokens; t++) tokenCount[t + 1] += tokenCount[t];
  std::vector<int64_t> byToken(numEntries);
  {
    std::vector<int64_t> fill(tokenCount.begin(), tokenCount.end() - 1);
    for (int64_t p = 0; p < numEntries; p++) byToken[fill[entryToken[p]]++] = p;  // p ascending = expert ascending
  }
  const int64_t perTask = std::max<int64_t>(1, 4096 / std::max<int64_t>(hidden, 1));
  pool.parallelFor((numTokens + perTask - 1) / perTask, [&](int64_t task, int) {
    std::vector<double> acc(hidden);
    const int64_t t1 = std::min(numTokens, (task + 1) * perTask);
    for (int64_t t = task * perTask; t < t1; t++) {
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t q = tokenCount[t]; q < tokenCount[t + 1]; q++) {
        const int64_t p = byToken[q];
        const double w = entryWeight[p];
        const float* y = ygp + p * hidden;
        for (int64_t d = 0; d < hidden; d++) acc[d] += w * y[d];
      }
      float* o = out + t * hidden;
      for (int64_t d = 0; d < hidden; d++) o[d] = static_cast<float>(acc[d]);
    }
  });
  return "";
}

}  // namespace tsg
