// A persistent pool of compute threads for data-parallel kernels. The calling thread is worker 0,
// so a pool of size N starts N-1 threads. Between jobs, workers spin for a few tens of microseconds
// (a decode step runs hundreds of short parallel regions back to back) and then sleep on a futex,
// so an idle engine leaves both cores to the I/O threads.
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "util/function_ref.h"

namespace drift {

class ThreadPool {
 public:
  // `num_threads` counts the caller; at least 1.
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return num_threads_; }

  // Runs job(thread_index, num_threads) on every thread, the caller as index 0, and returns when
  // all have finished. The job must not throw. Not reentrant: one run at a time. No allocation.
  void run(FunctionRef<void(int, int)> job);

 private:
  void worker_loop(int index);

  const int num_threads_;
  std::vector<std::thread> threads_;
  std::atomic<uint32_t> generation_{0};  // bumped once per job (wraps; only equality matters)
  std::atomic<uint32_t> pending_{0};     // workers (excluding the caller) still running the job
  std::atomic<uint32_t> sleepers_{0};    // workers asleep (or about to be) on generation_
  std::atomic<bool> stopping_{false};
  const FunctionRef<void(int, int)>* job_ = nullptr;  // valid while a generation runs
};

// Splits [0, n) into `parts` contiguous ranges of nearly equal size and returns range `index`.
struct Range {
  int64_t begin;
  int64_t end;
};
inline Range split_range(int64_t n, int index, int parts) {
  int64_t base = n / parts, extra = n % parts;
  int64_t begin = index * base + (index < extra ? index : extra);
  return {begin, begin + base + (index < extra ? 1 : 0)};
}

}  // namespace drift
