#include "util/cpu_budget.h"

#include <pthread.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>

#include "util/signal_stack.h"

namespace drift {
namespace {

using Clock = std::chrono::steady_clock;

// Linux keeps a nice value per thread (setpriority on a thread id), and a thread may always lower
// its own priority; it could not raise it back, which is why the work gets a thread of its own.
void lower_this_thread_priority(int increment) {
  const auto tid = id_t(syscall(SYS_gettid));
  errno = 0;
  const int current = getpriority(PRIO_PROCESS, tid);
  if (errno != 0) return;
  setpriority(PRIO_PROCESS, tid, std::min(current + increment, 19));
}

std::optional<std::chrono::nanoseconds> cpu_time(clockid_t clock) {
  timespec now{};
  if (clock_gettime(clock, &now) != 0) return std::nullopt;
  return std::chrono::seconds(now.tv_sec) + std::chrono::nanoseconds(now.tv_nsec);
}

}  // namespace

BudgetOutcome run_within_cpu_budget(FunctionRef<void()> work, FunctionRef<void()> cancel,
                                    CpuBudget budget) {
  std::mutex mutex;
  std::condition_variable finished;
  bool done = false;
  std::exception_ptr error;
  std::thread worker([&] {
    ensure_alternate_signal_stack();
    lower_this_thread_priority(kBudgetedWorkNiceIncrement);
    try {
      work();
    } catch (...) {
      error = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(mutex);
      done = true;
    }
    finished.notify_one();
  });
  clockid_t worker_clock{};
  const bool has_cpu_clock = pthread_getcpuclockid(worker.native_handle(), &worker_clock) == 0;
  const Clock::time_point started = Clock::now();
  BudgetOutcome outcome = BudgetOutcome::kFinished;
  {
    std::unique_lock<std::mutex> lock(mutex);
    while (!done) {
      const auto waited = Clock::now() - started;
      // Without a CPU clock for the thread, the time that passed is the bound that still holds.
      const auto used = (has_cpu_clock ? cpu_time(worker_clock) : std::nullopt).value_or(waited);
      if (used >= budget.cpu) {
        outcome = BudgetOutcome::kOverCpuBudget;
        break;
      }
      if (waited >= budget.wall) {
        outcome = BudgetOutcome::kOverWallLimit;
        break;
      }
      // One thread uses at most the time that passes, so neither limit is reached before this.
      finished.wait_for(lock, std::min<Clock::duration>(budget.cpu - used, budget.wall - waited));
    }
  }
  if (outcome != BudgetOutcome::kFinished) cancel();
  worker.join();
  if (error) std::rethrow_exception(error);
  return outcome;
}

}  // namespace drift
