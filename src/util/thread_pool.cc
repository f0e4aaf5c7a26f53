#include "util/thread_pool.h"

#include <immintrin.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace drift {
namespace {

// About 50-100 µs of polling before a worker sleeps: long enough to bridge the gap between two
// kernels of one forward pass, short enough not to burn a core while the engine is idle.
constexpr int kSpinIterations = 20000;

// Raw futex calls on 32-bit atomics: exactly one syscall per wait/wake, with none of the
// waiter-table bookkeeping that std::atomic::wait adds.
void futex_wait(std::atomic<uint32_t>& word, uint32_t expected) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAIT_PRIVATE, expected, nullptr,
          nullptr, 0);
}

void futex_wake_all(std::atomic<uint32_t>& word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE_PRIVATE, INT32_MAX, nullptr,
          nullptr, 0);
}

static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));

}  // namespace

ThreadPool::ThreadPool(int num_threads) : num_threads_(num_threads < 1 ? 1 : num_threads) {
  threads_.reserve(num_threads_ - 1);
  for (int i = 1; i < num_threads_; ++i) threads_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  stopping_.store(true, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  futex_wake_all(generation_);
  for (std::thread& t : threads_) t.join();
}

void ThreadPool::run(FunctionRef<void(int, int)> job) {
  if (num_threads_ == 1) {
    job(0, 1);
    return;
  }
  job_ = &job;
  pending_.store(static_cast<uint32_t>(num_threads_ - 1), std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  futex_wake_all(generation_);
  job(0, num_threads_);
  for (int spins = 0; pending_.load(std::memory_order_acquire) != 0; ++spins) {
    if (spins < kSpinIterations) {
      _mm_pause();
    } else {
      uint32_t left = pending_.load(std::memory_order_acquire);
      if (left != 0) futex_wait(pending_, left);
    }
  }
  job_ = nullptr;
}

void ThreadPool::worker_loop(int index) {
  // The generation the pool was built with, not a fresh load: the first run() may bump it before
  // this thread gets scheduled, and that job must not be missed.
  uint32_t seen = 0;
  for (;;) {
    uint32_t current = seen;
    for (int spins = 0; spins < kSpinIterations; ++spins) {
      current = generation_.load(std::memory_order_acquire);
      if (current != seen) break;
      _mm_pause();
    }
    while (current == seen) {
      futex_wait(generation_, seen);
      current = generation_.load(std::memory_order_acquire);
    }
    seen = current;
    if (stopping_.load(std::memory_order_acquire)) return;
    (*job_)(index, num_threads_);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) futex_wake_all(pending_);
  }
}

}  // namespace drift
