#include "util/cpu_budget.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <thread>

namespace drift {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

std::chrono::nanoseconds this_thread_cpu_time() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return std::chrono::seconds(now.tv_sec) + std::chrono::nanoseconds(now.tv_nsec);
}

int this_thread_nice() { return getpriority(PRIO_PROCESS, id_t(syscall(SYS_gettid))); }

TEST(CpuBudget, WorkThatFinishesInTimeIsNotCancelled) {
  bool ran = false, cancelled = false;
  const BudgetOutcome outcome =
      run_within_cpu_budget([&] { ran = true; }, [&] { cancelled = true; }, {50ms, 5000ms});
  EXPECT_EQ(outcome, BudgetOutcome::kFinished);
  EXPECT_TRUE(ran);
  EXPECT_FALSE(cancelled);
}

TEST(CpuBudget, BusyWorkIsCancelledOnceItHasUsedItsCpuTime) {
  std::atomic<bool> cancelled{false};
  std::chrono::nanoseconds used{};
  const auto started = Clock::now();
  const BudgetOutcome outcome = run_within_cpu_budget(
      [&] {
        while (!cancelled.load()) {
        }
        used = this_thread_cpu_time();
      },
      [&] { cancelled = true; }, {50ms, 60000ms});
  EXPECT_EQ(outcome, BudgetOutcome::kOverCpuBudget);
  EXPECT_GE(used, 50ms);
  EXPECT_LT(Clock::now() - started, 60000ms);
}

// A thread that waits for a core (here: sleeps) is not charged for the wait, so cheap work on a
// machine whose cores are busy decoding is not refused for the machine's load.
TEST(CpuBudget, TimeSpentWaitingIsNotCharged) {
  bool cancelled = false;
  const BudgetOutcome outcome = run_within_cpu_budget([] { std::this_thread::sleep_for(300ms); },
                                                      [&] { cancelled = true; }, {50ms, 5000ms});
  EXPECT_EQ(outcome, BudgetOutcome::kFinished);
  EXPECT_FALSE(cancelled);
}

TEST(CpuBudget, TheWallClockCeilingBoundsWorkThatNeverGetsACore) {
  std::mutex mutex;
  std::condition_variable wake;
  bool cancelled = false;
  const auto started = Clock::now();
  const BudgetOutcome outcome = run_within_cpu_budget(
      [&] {
        std::unique_lock<std::mutex> lock(mutex);
        wake.wait(lock, [&] { return cancelled; });
      },
      [&] {
        {
          std::lock_guard<std::mutex> lock(mutex);
          cancelled = true;
        }
        wake.notify_one();
      },
      {60000ms, 100ms});
  const auto took = Clock::now() - started;
  EXPECT_EQ(outcome, BudgetOutcome::kOverWallLimit);
  EXPECT_GE(took, 100ms);
  EXPECT_LT(took, 30000ms);
}

TEST(CpuBudget, WorkRunsBelowTheCallersPriorityAndTheCallerKeepsItsOwn) {
  const int caller = this_thread_nice();
  int during = caller;
  run_within_cpu_budget([&] { during = this_thread_nice(); }, [] {}, {});
  EXPECT_EQ(during, std::min(caller + kBudgetedWorkNiceIncrement, 19));
  EXPECT_EQ(this_thread_nice(), caller);
}

TEST(CpuBudget, AnExceptionFromTheWorkReachesTheCaller) {
  EXPECT_THROW(run_within_cpu_budget([] { throw std::runtime_error("bad"); }, [] {}, {}),
               std::runtime_error);
}

}  // namespace
}  // namespace drift
