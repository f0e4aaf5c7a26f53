#include "engine/engine_step.h"

#include <chrono>
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

StepShape step_shape(const StepPlan& plan) {
  StepShape shape;
  // A decode item's drafts cost what prefill tokens do: their compute, with weights read once.
  shape.prefill_tokens = plan.num_prefill_tokens + plan.num_draft_tokens;
  shape.decode_sequences = plan.num_decode_tokens;
  for (const StepItem& item : plan.items) {
    // Tokens at positions s .. s+n-1 attend over s+1 .. s+n positions.
    const int64_t s = item.start_position, n = item.num_tokens;
    shape.attended_positions += n * s + n * (n + 1) / 2;
  }
  return shape;
}

StepReport run_engine_step(EngineScheduler& scheduler, Executor& executor, ExecutionResult& result,
                           ProgressLog& log, FunctionRef<void(const StepPlan&)> on_plan) {
  // Rule: schedule, run, report — and nothing else between two step boundaries.
  StepReport report;
  // The whole step is timed for --spec auto: drafting and committing are part of what drafts cost.
  const auto step_started = std::chrono::steady_clock::now();
  const StepPlan& plan = scheduler.schedule_step();
  if (plan.empty()) return report;
  report.ran = true;
  report.num_items = int32_t(plan.items.size());
  report.prefill_tokens = plan.num_prefill_tokens;
  report.decode_tokens = plan.num_decode_tokens;
  report.shape = step_shape(plan);
  on_plan(plan);
  const uint64_t step = plan.step;
  const auto started = std::chrono::steady_clock::now();
  report.status = run_guarded(executor, plan, result);
  report.executor_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (report.status.ok()) {
    report.outcomes = scheduler.on_step_executed(result);
    scheduler.observe_step_seconds(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - step_started).count());
  } else {
    log.record(ProgressEvent::kError, step, int64_t(step), -1);
    report.outcomes = scheduler.on_step_failed(report.status.error());
  }
  return report;
}

}  // namespace drift
