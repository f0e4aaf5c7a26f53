#include "util/thread_pool.h"

#include <immintrin.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include "util/signal_stack.h"

namespace drift {
namespace {

// How long a thread polls before it sleeps: long enough to bridge the gap between two kernels of
// one forward pass (a few microseconds), short enough that a spinning thread does not hold a core
// that the thread it waits for needs — on a 2-core machine shared with HTTP I/O or another
// process, a long spin turns every parallel region into a wait for a time slice. Measured in
// time, not iterations, because a pause instruction costs 10 cycles on some CPUs and 140 on
// others.
// DRIFT_POOL_SPIN_US overrides it (for measuring the trade-off on a given machine).
const std::chrono::nanoseconds kSpinTime = [] {
  const char* text = std::getenv("DRIFT_POOL_SPIN_US");
  const long micros = text ? std::strtol(text, nullptr, 10) : 20;
  return std::chrono::microseconds(std::clamp(micros, 0L, 1000000L));
}();

// Polls `done` until it returns true or the spin time is over; returns its last answer.
template <typename Done>
bool spin_until(Done done) {
  const auto deadline = std::chrono::steady_clock::now() + kSpinTime;
  for (;;) {
    for (int i = 0; i < 16; ++i) {
      if (done()) return true;
      _mm_pause();
    }
    if (std::chrono::steady_clock::now() >= deadline) return done();
  }
}

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
  generation_.fetch_add(1, std::memory_order_seq_cst);
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
  // seq_cst pairs with the sleepers_ increment in worker_loop: either the worker sees the new
  // generation before it sleeps, or this sees it asleep and wakes it. The syscall is skipped
  // while every worker is still spinning, which is the common case inside a forward pass.
  generation_.fetch_add(1, std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) != 0) futex_wake_all(generation_);
  job(0, num_threads_);
  auto all_done = [&] { return pending_.load(std::memory_order_acquire) == 0; };
  if (!spin_until(all_done)) {
    while (uint32_t left = pending_.load(std::memory_order_acquire)) futex_wait(pending_, left);
  }
  job_ = nullptr;
}

void ThreadPool::worker_loop(int index) {
  ensure_alternate_signal_stack();
  // The generation the pool was built with, not a fresh load: the first run() may bump it before
  // this thread gets scheduled, and that job must not be missed.
  uint32_t seen = 0;
  for (;;) {
    auto new_job = [&] { return generation_.load(std::memory_order_acquire) != seen; };
    if (!spin_until(new_job)) {
      sleepers_.fetch_add(1, std::memory_order_seq_cst);
      while (generation_.load(std::memory_order_seq_cst) == seen) futex_wait(generation_, seen);
      sleepers_.fetch_sub(1, std::memory_order_relaxed);
    }
    seen = generation_.load(std::memory_order_acquire);
    if (stopping_.load(std::memory_order_acquire)) return;
    (*job_)(index, num_threads_);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) futex_wake_all(pending_);
  }
}

}  // namespace drift
