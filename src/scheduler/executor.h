// The executor interface: runs one forward step described by a StepPlan. The CPU executor
// (executor/) implements it over the model; tests implement it with fakes. Scheduler code never
// sees a tensor.
#pragma once

#include "kv/kv_page_memory.h"
#include "scheduler/step_plan.h"
#include "util/error.h"

namespace drift {

class Executor {
 public:
  virtual ~Executor() = default;

  // Runs the step: performs plan.page_copies, writes the K/V of every scheduled token into its
  // slot, attends each item over its pages, and samples a token for every item with sample =
  // true. Fills `result` with one ItemResult per item (an error there ends only that sequence).
  // An item's pages may include pages that an earlier item of the same plan writes (a request
  // sharing the prefix another is computing, EngineScheduler::try_admit): the executor stores
  // the K/V of every token of a layer before any token of that layer attends, so a later item
  // reads those positions as written in this step.
  // A returned error means the whole step failed (the engine then calls on_step_failed).
  // After warm-up it performs no heap allocation.
  virtual Status run(const StepPlan& plan, ExecutionResult& result) = 0;

  // False once the executor cannot run any further step; the engine then ends every request
  // with an error (EngineScheduler::abort_all) and reports itself unhealthy.
  virtual bool healthy() const = 0;

  // Byte access to its KV pages for a disk tier (kv/kv_page_memory.h); null: it gives none, and
  // the engine runs without a tier.
  virtual KVPageMemory* page_memory() { return nullptr; }
};

}  // namespace drift
