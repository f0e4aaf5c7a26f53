#include "engine/engine_step.h"

#include <exception>

namespace drift {

namespace {

// The executor's step as a Status: an exception escaping it is a failure of this step only.
Status run_guarded(Executor& executor, const StepPlan& plan, ExecutionResult& result) {
  try {
    return executor.run(plan, result);
  } catch (const std::exception& e) {
    return make_error("executor threw in step {}: {}", plan.step, e.what());
  } catch (...) {
    return make_error("executor threw in step {}: an exception of unknown type", plan.step);
  }
}

}  // namespace

StepReport run_engine_step(EngineScheduler& scheduler, Executor& executor, ExecutionResult& result,
                           ProgressLog& log, FunctionRef<void(const StepPlan&)> on_plan) {
  // Rule: schedule, run, report — and nothing else between two step boundaries.
  StepReport report;
  const StepPlan& plan = scheduler.schedule_step();
  if (plan.empty()) return report;
  report.ran = true;
  report.num_items = int32_t(plan.items.size());
  report.prefill_tokens = plan.num_prefill_tokens;
  report.decode_tokens = plan.num_decode_tokens;
  on_plan(plan);
  const uint64_t step = plan.step;
  report.status = run_guarded(executor, plan, result);
  if (report.status.ok()) {
    report.outcomes = scheduler.on_step_executed(result);
  } else {
    log.record(ProgressEvent::kError, step, int64_t(step), -1);
    report.outcomes = scheduler.on_step_failed(report.status.error());
  }
  return report;
}

}  // namespace drift
