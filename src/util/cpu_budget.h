// Runs a piece of work that may cost more than it should (a hostile grammar's first masks) on a
// thread of its own, below the engine's scheduling priority, and cancels it once it has used its
// CPU budget. The budget counts the work's own CPU time, not the clock: on a machine whose cores
// are busy decoding (or shared with another tenant) a cheap piece of work may wait a long while
// for a core, and must not be refused for that; a wall-clock ceiling still bounds how long the
// caller waits.
#pragma once

#include <chrono>

#include "util/function_ref.h"

namespace drift {

struct CpuBudget {
  std::chrono::milliseconds cpu{250};    // of the work's own thread
  std::chrono::milliseconds wall{2000};  // however starved that thread is
};

enum class BudgetOutcome { kFinished, kOverCpuBudget, kOverWallLimit };

// How much lower than the caller's the work thread's scheduling priority is (a nice value
// difference). The engine's compute threads meet at a barrier every step, so a core taken from any
// one of them stalls every stream; at +10 the work gets about a tenth of a shared core.
inline constexpr int kBudgetedWorkNiceIncrement = 10;

// Runs `work` on a new thread at kBudgetedWorkNiceIncrement below the caller's priority and
// waits for it. Once the thread has used `budget.cpu` of CPU time, or `budget.wall` has passed,
// calls `cancel` (from the calling thread), which must make `work` return soon: a cooperative
// cancellation flag. Returns which limit was passed when `cancel` was called. An exception from
// `work` is rethrown here.
BudgetOutcome run_within_cpu_budget(FunctionRef<void()> work, FunctionRef<void()> cancel,
                                    CpuBudget budget);

}  // namespace drift
