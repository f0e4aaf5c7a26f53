// --debug-fail-at-step's executor: the real executor runs every step before K, step K fails, and
// the executor stays unhealthy, so the engine's failure path (every request ends with an error,
// tested in unit_engine's EngineFault) starts exactly there.
#include "runtime/failing_executor.h"

#include <gtest/gtest.h>

#include <memory>

namespace drift {
namespace {

// Counts the steps it runs; always healthy.
class CountingExecutor : public Executor {
 public:
  explicit CountingExecutor(int* runs) : runs_(runs) {}
  Status run(const StepPlan&, ExecutionResult&) override {
    ++*runs_;
    return Status::Ok();
  }
  bool healthy() const override { return true; }

 private:
  int* runs_;
};

TEST(FailingExecutor, RunsTheRealStepsUntilStepKThenFailsForGood) {
  int runs = 0;
  FailingExecutor executor(std::make_unique<CountingExecutor>(&runs), /*fail_at_step=*/3);
  StepPlan plan;
  ExecutionResult result;
  EXPECT_TRUE(executor.run(plan, result).ok());
  EXPECT_TRUE(executor.run(plan, result).ok());
  EXPECT_TRUE(executor.healthy());
  EXPECT_EQ(runs, 2);
  Status third = executor.run(plan, result);
  ASSERT_FALSE(third.ok());
  EXPECT_NE(third.message().find("step 3"), std::string::npos) << third.message();
  EXPECT_FALSE(executor.healthy());
  EXPECT_FALSE(executor.run(plan, result).ok());  // no step runs after the failure
  EXPECT_EQ(runs, 2);
  EXPECT_FALSE(executor.healthy());
}

}  // namespace
}  // namespace drift
