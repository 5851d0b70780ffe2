// A persistent thread pool: `threads - 1` workers created once, plus the calling thread. Work is handed out as
// a range of task indices through an atomic counter (dynamic scheduling, robust when cores are shared).
// Workers spin on a generation counter for a short while (50 µs) after each job, then sleep on a condition variable
// (spin-then-wait), so back-to-back ops cost ~1 µs to dispatch and an idle pool costs no CPU; the caller, once its
// tasks are done, spins as briefly for workers still on theirs and then sleeps until they report done (on a shared
// machine a preempted worker is waited for without burning a core). A worker joins a job
// only by claiming it (posted → started); once the caller has run out of tasks it cancels the claims of workers
// that have not started, so a worker that is descheduled (cores shared with other processes) never stalls a job
// it took no task of.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace tsg {

class ThreadPool {
 public:
  /** @param threads total threads including the caller (1 = everything runs on the caller, no workers). */
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int threads() const { return threads_; }

  /**
   * Runs fn(task, threadIndex) for task in [0, numTasks) across the pool and returns when all are done.
   * Which thread runs which task is unspecified: a task's result must not depend on it.
   * Not re-entrant (fn must not call parallelFor on the same pool).
   */
  void parallelFor(int64_t numTasks, const std::function<void(int64_t, int)>& fn);

 private:
  void workerLoop(int index);
  void runTasks(int threadIndex);

  int threads_;
  std::vector<std::thread> workers_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int64_t> nextTask_{0};
  /** Per worker: (job generation << 2) | kPosted / kStarted / kDone / kCancelled. */
  std::unique_ptr<std::atomic<uint64_t>[]> state_;
  std::atomic<int> sleeping_{0};
  std::atomic<bool> stop_{false};
  int64_t numTasks_ = 0;
  const std::function<void(int64_t, int)>* fn_ = nullptr;
  std::mutex mutex_;
  std::condition_variable cv_;
  /** The caller sleeping for a started worker to finish (parallelFor's wait). */
  std::atomic<bool> callerWaiting_{false};
  std::mutex doneMutex_;
  std::condition_variable doneCv_;
};

}  // namespace tsg
