// In-process shared-memory collectives between the rank threads of one process (SGLang's CPU backend does the same
// with sgl_kernel.shm_allreduce when every rank of a group is local). The memory is a SharedArrayBuffer created by
// the TypeScript side (src/distributed/shm_layout.ts, which mirrors the layout below) and handed to every rank thread.
//
// Layout (byte offsets; all words int32, little endian):
//   [0, 64)                      control line: magic, size, slotBytes, abort word, sleepers
//   [64 + 64·r, 128 + 64·r)      rank r's line: seq (the last step it arrived at), then per buffer parity b ∈ {0,1}
//                                the step's record {op, bytes, aux} at words 1 + 3b .. 3 + 3b
//   [dataOff + (b·size + r)·slotBytes, +slotBytes)   rank r's slot of buffer parity b (dataOff = 64·(size+1),
//                                rounded up to 4096)
//
// One step = every rank writes its slot of parity (seq & 1), publishes seq with a release store, waits until every
// rank's seq ≥ its own (spinning briefly, then futex-waiting: ranks may outnumber cores), then reads the slots.
// Two parities make one synchronisation per step enough: a rank that reaches step s+2 has seen every rank arrive at
// step s+1, so every rank has finished reading step s's slots. Large buffers go through in slot-sized chunks.
// Sums are computed by every rank over all slots in rank order (s_0 + s_1 + … + s_{size-1}, f32, no FMA), so every
// rank gets the same bits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tsg {

constexpr int32_t kShmMagic = 0x53475354;  // "TSGS"
constexpr size_t kShmLine = 64;

/** Byte offset of the slot area for a group of `size` ranks (must equal src/distributed/shm_layout.ts). */
inline size_t shmDataOffset(int size) {
  const size_t raw = kShmLine * static_cast<size_t>(size + 1);
  return (raw + 4095) / 4096 * 4096;
}

/** Total bytes of a group's shared buffer. */
inline size_t shmTotalBytes(int size, size_t slotBytes) { return shmDataOffset(size) + 2 * static_cast<size_t>(size) * slotBytes; }

/** Outcome of a collective. */
enum class ShmStatus : int { kOk = 0, kTimeout = 1, kAborted = 2, kMismatch = 3, kBadArgs = 4 };

/** Operation codes recorded per step (a rank that calls a different collective than its peers is detected). */
enum class ShmOp : int32_t { kAllReduce = 1, kAllGather = 2, kReduceScatter = 3, kBroadcast = 4, kAllToAll = 5, kBarrier = 6 };

/**
 * One rank's view of a group. Not thread-safe: used by its rank thread only. The memory is owned by the JS side.
 */
class ShmComm {
 public:
  /**
   * @param base the group's shared buffer (shmTotalBytes(size, slotBytes) bytes, zero-initialised by its creator)
   * @param spinNs how long a waiting rank spins before it futex-waits
   */
  ShmComm(uint8_t* base, int rank, int size, size_t slotBytes, int64_t spinNs);

  int rank() const { return rank_; }
  int size() const { return size_; }

  /** In place: buf[i] = Σ_r buf_r[i] in rank order. n floats. */
  ShmStatus allReduceSum(float* buf, size_t n, int64_t timeoutMs);
  /** dst[r·bytes .. (r+1)·bytes) = src_r. */
  ShmStatus allGather(const uint8_t* src, size_t bytes, uint8_t* dst, int64_t timeoutMs);
  /** dst[0..m) = Σ_r src_r[rank·m .. (rank+1)·m), rank order. src has size·m floats. */
  ShmStatus reduceScatterSum(const float* src, size_t m, float* dst, int64_t timeoutMs);
  /** buf = buf_root (bytes on every rank). */
  ShmStatus broadcast(uint8_t* buf, size_t bytes, int root, int64_t timeoutMs);
  /** dst[j·block ..) = src_j[rank·block ..), block bytes per peer. */
  ShmStatus allToAll(const uint8_t* src, size_t block, uint8_t* dst, int64_t timeoutMs);
  ShmStatus barrier(int64_t timeoutMs);

  /** After a failure: the ranks that had not arrived (kTimeout), the abort word (kAborted), or the mismatch text. */
  const std::vector<int>& missing() const { return missing_; }
  int32_t abortCode() const { return abortCode_; }
  const std::string& detail() const { return detail_; }
  /** The number of steps this rank has taken (the step counter of the last failure). */
  uint32_t seq() const { return seq_; }

  /**
   * Marks the group broken (code ≠ 0, e.g. 1 + the rank that died, or −1 for closed) and wakes every waiter; any
   * thread may call it. Later collectives on every rank fail with kAborted.
   */
  static void abort(uint8_t* base, int size, int32_t code);
  /** The group's abort word (0 while healthy). */
  static int32_t abortWord(const uint8_t* base) { return __atomic_load_n(reinterpret_cast<const int32_t*>(base) + 3, __ATOMIC_ACQUIRE); }

 private:
  int32_t* ctrl() const { return reinterpret_cast<int32_t*>(base_); }
  int32_t* line(int r) const { return reinterpret_cast<int32_t*>(base_ + kShmLine * static_cast<size_t>(r + 1)); }
  uint8_t* slot(int parity, int r) const {
    return base_ + dataOff_ + (static_cast<size_t>(parity) * static_cast<size_t>(size_) + static_cast<size_t>(r)) * slotBytes_;
  }
  /** Publishes this rank's arrival at the next step (its slot is written); returns the step's parity. */
  int arrive(ShmOp op, int64_t bytes, int32_t aux);
  /** Waits for every rank to arrive at the current step and checks that they all run the same op. */
  ShmStatus waitAll(ShmOp op, int64_t bytes, int32_t aux, int64_t deadlineNs);
  ShmStatus fail(ShmStatus s);

  uint8_t* base_;
  int rank_;
  int size_;
  size_t slotBytes_;
  size_t dataOff_;
  int64_t spinNs_;
  uint32_t seq_ = 0;
  bool broken_ = false;
  ShmStatus brokenStatus_ = ShmStatus::kOk;
  std::vector<int> missing_;
  int32_t abortCode_ = 0;
  std::string detail_;
};

}  // namespace tsg
