// One step of the worker loop — the part that runs once per forward pass and allocates nothing
// after warm-up: compose the plan, run it on the executor, report the result to the scheduler.
// Intake before it, and detokenization and event delivery after it, are the worker's.
#pragma once

#include <cstdint>
#include <span>

#include "engine/step_cost_model.h"
#include "scheduler/engine_scheduler.h"
#include "scheduler/executor.h"
#include "util/function_ref.h"
#include "util/progress_log.h"

namespace drift {

struct StepReport {
  bool ran = false;  // the plan had items and went to the executor
  int32_t num_items = 0;
  int32_t prefill_tokens = 0;
  int32_t decode_tokens = 0;
  // What the step's time depends on, and the time the executor took (for the step cost model).
  StepShape shape;
  double executor_seconds = 0;
  // Ok, or why the executor failed the whole step.
  Status status;
  // Tokens and finishes, as the scheduler reported them; valid until the next call into the
  // scheduler.
  std::span<const SequenceOutcome> outcomes;
};

// The shape of a plan: prefill tokens, decodes, and the positions its tokens attend over.
StepShape step_shape(const StepPlan& plan);

// `on_plan` sees a non-empty plan before the executor runs it (the engine stamps queue times
// there). A step the executor fails — an error returned or an exception thrown — ends every
// sequence in it with that error; the other sequences go on.
StepReport run_engine_step(EngineScheduler& scheduler, Executor& executor, ExecutionResult& result,
                           ProgressLog& log, FunctionRef<void(const StepPlan&)> on_plan);

}  // namespace drift
