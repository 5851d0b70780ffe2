// Persistent spin-then-wait thread pool (see thread_pool.h).
#include "thread_pool.h"

#include <immintrin.h>

#include <chrono>
#include <cstdlib>

namespace tsg {

namespace {
/**
 * How long an idle worker spins before it sleeps, and how long the caller spins for a started worker before it
 * sleeps too. Short: ops of one forward follow each other within a few µs, so a spinning worker catches them, while
 * on a shared machine a thread that spins longer burns the share the scheduler would give it when work arrives
 * (and gets preempted mid-task more often). $TSGLANG_POOL_SPIN_US overrides (0 = block at once).
 */
std::chrono::microseconds spinTime() {
  static const std::chrono::microseconds t = [] {
    const char* e = std::getenv("TSGLANG_POOL_SPIN_US");
    const long v = e != nullptr && *e != 0 ? std::strtol(e, nullptr, 10) : -1;
    return std::chrono::microseconds(v >= 0 ? v : 50);
  }();
  return t;
}
/** Worker states of one job (low 2 bits of ThreadPool::state_). */
constexpr uint64_t kPosted = 0, kStarted = 1, kDone = 2, kCancelled = 3;
}  // namespace

ThreadPool::ThreadPool(int threads) : threads_(threads < 1 ? 1 : threads) {
  state_.reset(new std::atomic<uint64_t>[threads_]);
  for (int i = 0; i < threads_; i++) state_[i].store(kDone);
  for (int i = 1; i < threads_; i++) workers_.emplace_back([this, i] { workerLoop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_.store(true);
    generation_.fetch_add(1);
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::runTasks(int threadIndex) {
  for (;;) {
    const int64_t t = nextTask_.fetch_add(1, std::memory_order_relaxed);
    if (t >= numTasks_) break;
    (*fn_)(t, threadIndex);
  }
}

void ThreadPool::workerLoop(int index) {
  uint64_t seen = 0;
  for (;;) {
    uint64_t g = generation_.load(std::memory_order_acquire);
    if (g == seen) {
      const auto start = std::chrono::steady_clock::now();
      int spins = 0;
      while ((g = generation_.load(std::memory_order_acquire)) == seen) {
        _mm_pause();
        if (++spins % 64 == 0 && std::chrono::steady_clock::now() - start > spinTime()) {
          std::unique_lock<std::mutex> lock(mutex_);
          sleeping_.fetch_add(1);
          cv_.wait(lock, [&] { return generation_.load() != seen; });
          sleeping_.fetch_sub(1);
          g = generation_.load();
          break;
        }
      }
    }
    seen = g;
    if (stop_.load()) return;
    // join job g only if the caller has not cancelled this worker's part (or posted a newer job)
    uint64_t expect = (g << 2) | kPosted;
    if (state_[index].compare_exchange_strong(expect, (g << 2) | kStarted, std::memory_order_acq_rel)) {
      runTasks(index);
      state_[index].store((g << 2) | kDone, std::memory_order_seq_cst);
      if (callerWaiting_.load(std::memory_order_seq_cst)) {
        std::lock_guard<std::mutex> lock(doneMutex_);
        doneCv_.notify_one();
      }
    }
  }
}

void ThreadPool::parallelFor(int64_t numTasks, const std::function<void(int64_t, int)>& fn) {
  if (numTasks <= 0) return;
  if (threads_ == 1 || numTasks == 1) {
    for (int64_t t = 0; t < numTasks; t++) fn(t, 0);
    return;
  }
  fn_ = &fn;
  numTasks_ = numTasks;
  nextTask_.store(0, std::memory_order_relaxed);
  const uint64_t g = generation_.load(std::memory_order_relaxed) + 1;
  for (int i = 1; i < threads_; i++) state_[i].store((g << 2) | kPosted, std::memory_order_release);
  generation_.store(g, std::memory_order_seq_cst);
  if (sleeping_.load(std::memory_order_seq_cst) > 0) {
    std::lock_guard<std::mutex> lock(mutex_);
    cv_.notify_all();
  }
  runTasks(0);
  // every task is claimed: cancel workers that have not started, wait for those that did
  for (int i = 1; i < threads_; i++) {
    uint64_t expect = (g << 2) | kPosted;
    if (state_[i].compare_exchange_strong(expect, (g << 2) | kCancelled, std::memory_order_acq_rel)) continue;
    const uint64_t done = (g << 2) | kDone;
    const auto start = std::chrono::steady_clock::now();
    int spins = 0;
    while (state_[i].load(std::memory_order_acquire) != done) {
      _mm_pause();
      if (++spins % 64 == 0 && std::chrono::steady_clock::now() - start > spinTime()) {
        // the worker is still on its task (or was preempted in it): sleep until it reports done
        std::unique_lock<std::mutex> lock(doneMutex_);
        callerWaiting_.store(true, std::memory_order_seq_cst);
        doneCv_.wait(lock, [&] { return state_[i].load(std::memory_order_seq_cst) == done; });
        callerWaiting_.store(false, std::memory_order_relaxed);
        break;
      }
    }
  }
  fn_ = nullptr;
}

}  // namespace tsg
