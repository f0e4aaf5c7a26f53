#include "runtime/failing_executor.h"

namespace drift {

Status FailingExecutor::run(const StepPlan& plan, ExecutionResult& result) {
  if (failed_)
    return make_error("the executor failed at step {} (--debug-fail-at-step)", fail_at_step_);
  if (++steps_ == fail_at_step_) {
    failed_ = true;
    return make_error("injected executor failure at step {} (--debug-fail-at-step)", steps_);
  }
  return inner_->run(plan, result);
}

}  // namespace drift
