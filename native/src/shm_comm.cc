// Shared-memory collectives between rank threads (see shm_comm.h for the layout and the protocol).
#include "shm_comm.h"

#include <immintrin.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

namespace tsg {

namespace {

constexpr int kCtrlMagic = 0, kCtrlSize = 1, kCtrlSlot = 2, kCtrlAbort = 3, kCtrlSleepers = 4;

int64_t nowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

int32_t loadAcquire(const int32_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }

/** FUTEX_WAIT (process-private: the ranks are threads of one process) until *addr ≠ expected, a wake or timeoutNs. */
void futexWait(int32_t* addr, int32_t expected, int64_t timeoutNs) {
  timespec ts;
  ts.tv_sec = static_cast<time_t>(timeoutNs / 1000000000LL);
  ts.tv_nsec = static_cast<long>(timeoutNs % 1000000000LL);
  syscall(SYS_futex, addr, FUTEX_WAIT_PRIVATE, expected, &ts, nullptr, 0);
}

void futexWakeAll(int32_t* addr) { syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0); }

/** True when step counter `have` has reached `want` (wrapping int32 comparison). */
bool reached(int32_t have, uint32_t want) { return static_cast<int32_t>(static_cast<uint32_t>(have) - want) >= 0; }

/**
 * out[i] = ((src[0][i] + src[1][i]) + src[2][i]) + … in this order for every i (8 lanes at a time; the same
 * left-to-right f32 additions as the scalar loop, so the bits do not depend on the vector width).
 */
void sumInOrder(float* out, const float* const* src, int nsrc, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 acc = _mm256_loadu_ps(src[0] + i);
    for (int r = 1; r < nsrc; ++r) acc = _mm256_add_ps(acc, _mm256_loadu_ps(src[r] + i));
    _mm256_storeu_ps(out + i, acc);
  }
  for (; i < n; ++i) {
    float acc = src[0][i];
    for (int r = 1; r < nsrc; ++r) acc += src[r][i];
    out[i] = acc;
  }
}

}  // namespace

ShmComm::ShmComm(uint8_t* base, int rank, int size, size_t slotBytes, int64_t spinNs)
    : base_(base), rank_(rank), size_(size), slotBytes_(slotBytes), dataOff_(shmDataOffset(size)), spinNs_(spinNs) {
  // The creator zero-fills; the first rank to attach stamps the header (the same values from every rank).
  int32_t* c = ctrl();
  __atomic_store_n(&c[kCtrlSize], size, __ATOMIC_RELAXED);
  __atomic_store_n(&c[kCtrlSlot], static_cast<int32_t>(slotBytes), __ATOMIC_RELAXED);
  __atomic_store_n(&c[kCtrlMagic], kShmMagic, __ATOMIC_RELEASE);
  seq_ = static_cast<uint32_t>(loadAcquire(&line(rank)[0]));
}

void ShmComm::abort(uint8_t* base, int size, int32_t code) {
  int32_t* c = reinterpret_cast<int32_t*>(base);
  int32_t zero = 0;
  __atomic_compare_exchange_n(&c[kCtrlAbort], &zero, code, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  for (int r = 0; r < size; ++r) futexWakeAll(reinterpret_cast<int32_t*>(base + kShmLine * static_cast<size_t>(r + 1)));
}

ShmStatus ShmComm::fail(ShmStatus s) {
  broken_ = true;
  brokenStatus_ = s;
  return s;
}

int ShmComm::arrive(ShmOp op, int64_t bytes, int32_t aux) {
  ++seq_;
  const int parity = static_cast<int>(seq_ & 1u);
  int32_t* me = line(rank_);
  me[1 + 3 * parity] = static_cast<int32_t>(op);
  me[2 + 3 * parity] = static_cast<int32_t>(bytes);
  me[3 + 3 * parity] = aux;
  // seq_cst store, then the sleeper count: a waiter increments the count before it re-reads our seq, so either we
  // see it and wake it, or it sees the new seq and does not sleep.
  __atomic_store_n(&me[0], static_cast<int32_t>(seq_), __ATOMIC_SEQ_CST);
  if (__atomic_load_n(&ctrl()[kCtrlSleepers], __ATOMIC_SEQ_CST) > 0) futexWakeAll(&me[0]);
  return parity;
}

ShmStatus ShmComm::waitAll(ShmOp op, int64_t bytes, int32_t aux, int64_t deadlineNs) {
  int32_t* c = ctrl();
  const int64_t spinStart = nowNs();
  const int64_t spinUntil = spinStart + spinNs_;
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    int32_t* seqWord = &line(r)[0];
    for (uint32_t spins = 0;; ++spins) {
      if (reached(loadAcquire(seqWord), seq_)) break;
      const int32_t ab = loadAcquire(&c[kCtrlAbort]);
      if (ab != 0) {
        abortCode_ = ab;
        return fail(ShmStatus::kAborted);
      }
      if ((spins & 63u) != 63u) {
        _mm_pause();
        continue;
      }
      const int64_t now = nowNs();
      if (deadlineNs >= 0 && now >= deadlineNs) {
        missing_.clear();
        for (int j = 0; j < size_; ++j)
          if (j != rank_ && !reached(loadAcquire(&line(j)[0]), seq_)) missing_.push_back(j);
        if (missing_.empty()) break;  // they all arrived at the last moment
        return fail(ShmStatus::kTimeout);
      }
      if (now < spinUntil) {
        // After the first microseconds, yield between polls: when the peer shares this core (ranks outnumber the
        // cores, or the machine is busy) a pure spin would keep it off the core until the spin ends.
        if (now - spinStart > 2000) sched_yield();
        continue;
      }
      // Sleep on the missing rank's seq word, in slices of ≤ 100 ms so an abort is noticed even without a wake.
      const int32_t seen = loadAcquire(seqWord);
      __atomic_fetch_add(&c[kCtrlSleepers], 1, __ATOMIC_SEQ_CST);
      if (!reached(__atomic_load_n(seqWord, __ATOMIC_SEQ_CST), seq_) && __atomic_load_n(&c[kCtrlAbort], __ATOMIC_SEQ_CST) == 0) {
        int64_t slice = 100000000LL;
        if (deadlineNs >= 0) slice = std::max<int64_t>(1, std::min(slice, deadlineNs - now));
        futexWait(seqWord, seen, slice);
      }
      __atomic_fetch_sub(&c[kCtrlSleepers], 1, __ATOMIC_SEQ_CST);
    }
  }
  const int parity = static_cast<int>(seq_ & 1u);
  for (int r = 0; r < size_; ++r) {
    const int32_t* l = line(r);
    if (l[1 + 3 * parity] != static_cast<int32_t>(op) || l[2 + 3 * parity] != static_cast<int32_t>(bytes) ||
        l[3 + 3 * parity] != aux) {
      detail_ = "rank " + std::to_string(r) + " called op " + std::to_string(l[1 + 3 * parity]) + " with " +
                std::to_string(l[2 + 3 * parity]) + " bytes (aux " + std::to_string(l[3 + 3 * parity]) + "), rank " +
                std::to_string(rank_) + " op " + std::to_string(static_cast<int32_t>(op)) + " with " +
                std::to_string(bytes) + " bytes (aux " + std::to_string(aux) + ")";
      return fail(ShmStatus::kMismatch);
    }
  }
  return ShmStatus::kOk;
}

namespace {
/** All-reduce chunks of at least this many bytes are reduced in two steps, one segment per rank. */
constexpr size_t kSplitBytes = 64 << 10;
int64_t deadlineOf(int64_t timeoutMs) { return timeoutMs < 0 ? -1 : nowNs() + timeoutMs * 1000000LL; }
}  // namespace

#define TSG_SHM_ENTER()                                            \
  do {                                                             \
    if (broken_) return brokenStatus_;                             \
    const int32_t ab = loadAcquire(&ctrl()[kCtrlAbort]);           \
    if (ab != 0) {                                                 \
      abortCode_ = ab;                                             \
      return fail(ShmStatus::kAborted);                            \
    }                                                              \
  } while (0)

ShmStatus ShmComm::allReduceSum(float* buf, size_t n, int64_t timeoutMs) {
  TSG_SHM_ENTER();
  const int64_t deadline = deadlineOf(timeoutMs);
  const size_t chunk = slotBytes_ / sizeof(float);
  std::vector<const float*> src(static_cast<size_t>(size_));
  size_t off = 0;
  do {
    const size_t c = std::min(chunk, n - off);
    const int64_t bytes = static_cast<int64_t>(c * sizeof(float));
    const int parity = static_cast<int>((seq_ + 1) & 1u);
    std::memcpy(slot(parity, rank_), buf + off, c * sizeof(float));
    if (c * sizeof(float) < kSplitBytes || size_ == 1) {
      // Small: one step; every rank adds every slot (the redundant adds are cheaper than a second synchronisation).
      arrive(ShmOp::kAllReduce, bytes, 0);
      const ShmStatus s = waitAll(ShmOp::kAllReduce, bytes, 0, deadline);
      if (s != ShmStatus::kOk) return s;
      for (int r = 0; r < size_; ++r) src[static_cast<size_t>(r)] = reinterpret_cast<const float*>(slot(parity, r));
      sumInOrder(buf + off, src.data(), size_, c);
    } else {
      // Large: two steps. Rank r adds segment r of every slot (rank order) into its slot of the other parity; then every
      // rank copies the segments out. The sums land in the other parity, so the next collective (which writes this
      // parity's slots after the second step) cannot overwrite data a slower rank is still reading.
      arrive(ShmOp::kAllReduce, bytes, 1);
      ShmStatus s = waitAll(ShmOp::kAllReduce, bytes, 1, deadline);
      if (s != ShmStatus::kOk) return s;
      const size_t seg = (c / static_cast<size_t>(size_) + 15) / 16 * 16;
      const size_t lo = std::min(c, seg * static_cast<size_t>(rank_)), hi = std::min(c, lo + seg);
      for (int r = 0; r < size_; ++r) src[static_cast<size_t>(r)] = reinterpret_cast<const float*>(slot(parity, r)) + lo;
      sumInOrder(reinterpret_cast<float*>(slot(parity ^ 1, rank_)) + lo, src.data(), size_, hi - lo);
      arrive(ShmOp::kAllReduce, bytes, 2);
      s = waitAll(ShmOp::kAllReduce, bytes, 2, deadline);
      if (s != ShmStatus::kOk) return s;
      for (int r = 0; r < size_; ++r) {
        const size_t l = std::min(c, seg * static_cast<size_t>(r)), h = std::min(c, l + seg);
        std::memcpy(buf + off + l, reinterpret_cast<const float*>(slot(parity ^ 1, r)) + l, (h - l) * sizeof(float));
      }
    }
    off += c;
  } while (off < n);
  return ShmStatus::kOk;
}

ShmStatus ShmComm::allGather(const uint8_t* src, size_t bytes, uint8_t* dst, int64_t timeoutMs) {
  TSG_SHM_ENTER();
  const int64_t deadline = deadlineOf(timeoutMs);
  size_t off = 0;
  do {
    const size_t c = std::min(slotBytes_, bytes - off);
    const int parity = static_cast<int>((seq_ + 1) & 1u);
    std::memcpy(slot(parity, rank_), src + off, c);
    arrive(ShmOp::kAllGather, static_cast<int64_t>(c), 0);
    const ShmStatus s = waitAll(ShmOp::kAllGather, static_cast<int64_t>(c), 0, deadline);
    if (s != ShmStatus::kOk) return s;
    for (int r = 0; r < size_; ++r) std::memcpy(dst + static_cast<size_t>(r) * bytes + off, slot(parity, r), c);
    off += c;
  } while (off < bytes);
  return ShmStatus::kOk;
}

ShmStatus ShmComm::reduceScatterSum(const float* src, size_t m, float* dst, int64_t timeoutMs) {
  TSG_SHM_ENTER();
  const int64_t deadline = deadlineOf(timeoutMs);
  // Each step moves `c` floats of every rank's block: slot = [block 0 part | block 1 part | …].
  const size_t chunk = std::max<size_t>(1, slotBytes_ / sizeof(float) / static_cast<size_t>(size_));
  std::vector<const float*> parts(static_cast<size_t>(size_));
  size_t off = 0;
  do {
    const size_t c = std::min(chunk, m - off);
    const int parity = static_cast<int>((seq_ + 1) & 1u);
    float* mine = reinterpret_cast<float*>(slot(parity, rank_));
    for (int j = 0; j < size_; ++j) std::memcpy(mine + static_cast<size_t>(j) * c, src + static_cast<size_t>(j) * m + off, c * sizeof(float));
    arrive(ShmOp::kReduceScatter, static_cast<int64_t>(c * sizeof(float)), 0);
    const ShmStatus s = waitAll(ShmOp::kReduceScatter, static_cast<int64_t>(c * sizeof(float)), 0, deadline);
    if (s != ShmStatus::kOk) return s;
    for (int r = 0; r < size_; ++r)
      parts[static_cast<size_t>(r)] = reinterpret_cast<const float*>(slot(parity, r)) + static_cast<size_t>(rank_) * c;
    sumInOrder(dst + off, parts.data(), size_, c);
    off += c;
  } while (off < m);
  return ShmStatus::kOk;
}

ShmStatus ShmComm::broadcast(uint8_t* buf, size_t bytes, int root, int64_t timeoutMs) {
  TSG_SHM_ENTER();
  const int64_t deadline = deadlineOf(timeoutMs);
  size_t off = 0;
  do {
    const size_t c = std::min(slotBytes_, bytes - off);
    const int parity = static_cast<int>((seq_ + 1) & 1u);
    if (rank_ == root) std::memcpy(slot(parity, rank_), buf + off, c);
    arrive(ShmOp::kBroadcast, static_cast<int64_t>(c), root);
    const ShmStatus s = waitAll(ShmOp::kBroadcast, static_cast<int64_t>(c), root, deadline);
    if (s != ShmStatus::kOk) return s;
    if (rank_ != root) std::memcpy(buf + off, slot(parity, root), c);
    off += c;
  } while (off < bytes);
  return ShmStatus::kOk;
}

ShmStatus ShmComm::allToAll(const uint8_t* src, size_t block, uint8_t* dst, int64_t timeoutMs) {
  TSG_SHM_ENTER();
  const int64_t deadline = deadlineOf(timeoutMs);
  const size_t chunk = std::max<size_t>(1, slotBytes_ / static_cast<size_t>(size_));
  size_t off = 0;
  do {
    const size_t c = std::min(chunk, block - off);
    const int parity = static_cast<int>((seq_ + 1) & 1u);
    uint8_t* mine = slot(parity, rank_);
    for (int j = 0; j < size_; ++j) std::memcpy(mine + static_cast<size_t>(j) * c, src + static_cast<size_t>(j) * block + off, c);
    arrive(ShmOp::kAllToAll, static_cast<int64_t>(c), 0);
    const ShmStatus s = waitAll(ShmOp::kAllToAll, static_cast<int64_t>(c), 0, deadline);
    if (s != ShmStatus::kOk) return s;
    for (int j = 0; j < size_; ++j)
      std::memcpy(dst + static_cast<size_t>(j) * block + off, slot(parity, j) + static_cast<size_t>(rank_) * c, c);
    off += c;
  } while (off < block);
  return ShmStatus::kOk;
}

ShmStatus ShmComm::barrier(int64_t timeoutMs) {
  TSG_SHM_ENTER();
  arrive(ShmOp::kBarrier, 0, 0);
  return waitAll(ShmOp::kBarrier, 0, 0, deadlineOf(timeoutMs));
}

}  // namespace tsg
