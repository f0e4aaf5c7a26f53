// Fault injection for `drift serve --debug-fail-at-step K`: an executor that runs the real one
// for K-1 steps and then fails for good, as a kernel fault or a lost device would — step K
// returns an error and healthy() turns false. What happens next is the engine's and the server's
// ordinary failure path (every request ends with an error, /health answers 503, the process
// exits non-zero), so deployments and tests can exercise it with the release binary.
#pragma once

#include <cstdint>
#include <memory>

#include "scheduler/executor.h"

namespace drift {

class FailingExecutor : public Executor {
 public:
  // `fail_at_step` >= 1: the 1-based step (call of run) that fails.
  FailingExecutor(std::unique_ptr<Executor> inner, int64_t fail_at_step)
      : inner_(std::move(inner)), fail_at_step_(fail_at_step) {}

  Status run(const StepPlan& plan, ExecutionResult& result) override;
  bool healthy() const override { return !failed_ && inner_->healthy(); }
  KVPageMemory* page_memory() override { return inner_->page_memory(); }

 private:
  std::unique_ptr<Executor> inner_;
  int64_t fail_at_step_;
  int64_t steps_ = 0;    // steps run, the failed one included; touched by the engine worker only
  bool failed_ = false;  // read by healthy() on the worker, after run
};

}  // namespace drift
