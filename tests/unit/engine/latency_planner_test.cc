// The prefill budget holds the inter-token target: over random costs and step mixes, a step that
// carries the budget's prefill is predicted to fit the target, one more token would not, and
// prefill never stops (the floor).
#include "engine/latency_planner.h"

#include <gtest/gtest.h>

#include <random>

namespace drift {
namespace {

// A model that has learned exactly `costs` (a clock without noise).
StepCostModel model_with(const StepCosts& costs) {
  StepCostModel model;
  std::mt19937_64 rng(1);
  for (int i = 0; i < 64; ++i) {
    StepShape s{int64_t(rng() % 1024), int64_t(rng() % 16), 0};
    if (i % 4 == 0) s.prefill_tokens = 0;
    if (i % 4 == 1) s.decode_sequences = 0;
    s.attended_positions = int64_t(rng() % 4000000);
    model.observe(s, costs.seconds(s) + (costs.seconds(s) == 0 ? 1e-9 : 0));
  }
  return model;
}

TEST(LatencyPlanner, TheBudgetIsTheLargestThatKeepsTheStepUnderTheTarget) {
  std::mt19937_64 rng(2024);
  int cut = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const StepCosts truth{1e-4 * double(rng() % 50), 1e-5 * double(1 + rng() % 200),
                          1e-5 * double(rng() % 100), 1e-10 * double(rng() % 50)};
    const StepCostModel model = model_with(truth);
    ASSERT_TRUE(model.calibrated());
    LatencyConfig config;
    config.target_itl_seconds = 0.02 + 0.01 * double(rng() % 20);
    config.min_prefill_tokens = 16;
    BudgetInputs in;
    in.max_num_batched_tokens = 2048;
    in.load.decoding = 1 + int32_t(rng() % 32);
    in.load.decode_context = in.load.decoding * int64_t(rng() % 2000);
    in.load.prefill_start = int32_t(rng() % 2000);
    in.load.pending_prefill_tokens = int64_t(rng() % 5000);
    const int32_t b = plan_prefill_budget(model, config, in);
    const int32_t cap = in.max_num_batched_tokens - in.load.decoding;
    SCOPED_TRACE(testing::Message() << "trial " << trial << " budget " << b);
    ASSERT_GE(b, config.min_prefill_tokens) << "prefill is never starved";
    ASSERT_LE(b, cap) << "decodes keep their tokens";
    const double t = predict_step_seconds(model.costs(), in.load, b);
    if (b > config.min_prefill_tokens) {
      EXPECT_LE(t, *config.target_itl_seconds) << "the budget's step fits the target";
    }
    if (b < cap) {
      const double next = predict_step_seconds(model.costs(), in.load, b + 1);
      if (b > config.min_prefill_tokens) {
        EXPECT_GT(next, *config.target_itl_seconds) << "and is the largest that does";
      }
      ++cut;
    }
  }
  EXPECT_GT(cut, 50) << "the trials should exercise the cut, not only the cap";
}

TEST(LatencyPlanner, TheIdleBoundWhenNothingDecodesAndTheFloorUntilDecodesAreMeasured) {
  const StepCostModel model = model_with(StepCosts{1e-3, 1e-3, 1e-3, 0});
  LatencyConfig config;
  config.target_itl_seconds = 0.0505;
  config.idle_step_seconds = 0.5005;
  BudgetInputs in;
  in.max_num_batched_tokens = 2048;
  in.load.pending_prefill_tokens = 4000;
  EXPECT_EQ(plan_prefill_budget(model, config, in), 499) << "no decodes: 500 ms - 1 ms per step";
  config.idle_step_seconds.reset();
  EXPECT_EQ(plan_prefill_budget(model, config, in), 2048) << "no decodes, no idle bound: whole";
  EXPECT_EQ(plan_prefill_budget(StepCostModel{}, config, in), 2048) << "a fresh engine, idle";
  in.load.decoding = 4;
  EXPECT_EQ(plan_prefill_budget(model, config, in), 45) << "50 ms - 1 ms - 4 ms = 45 tokens";
  // A fresh engine (drift generate with 32 prompts) prefilled 2,048 tokens in its first step
  // and, not knowing what decodes cost, the rest beside the first decodes: a 2.5 s gap. One
  // step at the floor measures them.
  EXPECT_EQ(plan_prefill_budget(StepCostModel{}, config, in), config.min_prefill_tokens)
      << "uncalibrated";
  config.target_itl_seconds.reset();
  config.idle_step_seconds = 0.5005;
  EXPECT_EQ(plan_prefill_budget(model, config, in), 2048) << "no target";
  in.load.decoding = 0;
  EXPECT_EQ(plan_prefill_budget(model, config, in), 2048) << "no target: no idle bound either";
}

// Idle steps are cut like the others: over random costs, the budget's step fits the bound, one
// more token would not, and a first-token target at risk still grows it.
TEST(LatencyPlanner, TheIdleBoundIsTheLargestPrefillUnderIt) {
  std::mt19937_64 rng(77);
  for (int trial = 0; trial < 200; ++trial) {
    const StepCosts truth{1e-4 * double(rng() % 50), 1e-5 * double(1 + rng() % 200),
                          1e-5 * double(rng() % 100), 1e-10 * double(rng() % 50)};
    const StepCostModel model = model_with(truth);
    LatencyConfig config;
    config.idle_step_seconds = 0.1 + 0.05 * double(rng() % 20);
    BudgetInputs in;
    in.max_num_batched_tokens = 2048;
    in.load.prefill_start = int32_t(rng() % 4000);
    in.load.pending_prefill_tokens = 1 + int64_t(rng() % 5000);
    const int32_t b = plan_prefill_budget(model, config, in);
    SCOPED_TRACE(testing::Message() << "trial " << trial << " budget " << b);
    ASSERT_GE(b, config.min_prefill_tokens);
    if (b > config.min_prefill_tokens)
      EXPECT_LE(predict_step_seconds(model.costs(), in.load, b), *config.idle_step_seconds);
    if (b < 2048 && b > config.min_prefill_tokens)
      EXPECT_GT(predict_step_seconds(model.costs(), in.load, b + 1), *config.idle_step_seconds);
    config.target_ttft_seconds = 1.0;
    in.oldest_unserved_seconds = 2.0;  // late: as fast as possible
    EXPECT_EQ(plan_prefill_budget(model, config, in), 2048);
  }
}

TEST(LatencyPlanner, DecodesBeyondTheTargetStillLeaveTheProgressFloor) {
  const StepCostModel model = model_with(StepCosts{1e-3, 1e-3, 1e-2, 0});
  LatencyConfig config;
  config.target_itl_seconds = 0.05;
  config.min_prefill_tokens = 32;
  BudgetInputs in;
  in.max_num_batched_tokens = 2048;
  in.load.decoding = 16;  // 161 ms of decodes alone
  EXPECT_EQ(plan_prefill_budget(model, config, in), 32);
}

TEST(LatencyPlanner, AFirstTokenTargetAtRiskGrowsTheBudget) {
  // 10 ms per step of decodes, 1 ms per prefill token; 100 ms per step allows 90 tokens.
  const StepCostModel model = model_with(StepCosts{0, 1e-3, 1e-3, 0});
  LatencyConfig config;
  config.target_itl_seconds = 0.1005;
  BudgetInputs in;
  in.max_num_batched_tokens = 2048;
  in.load.decoding = 10;
  in.load.pending_prefill_tokens = 1000;
  EXPECT_EQ(plan_prefill_budget(model, config, in), 90);
  config.target_ttft_seconds = 2.0;
  in.oldest_unserved_seconds = 0.5;
  // 1.5 s left for 1,000 tokens: ceil(1000 / B) * (10 ms + B ms) <= 1.5 s needs B >= 20 — the
  // inter-token budget already does it.
  EXPECT_EQ(plan_prefill_budget(model, config, in), 90);
  in.oldest_unserved_seconds = 0.899;
  // 1.101 s left: 90-token steps take 12 * 100 ms = 1.2 s, 91-token ones 11 * 101 ms; 100-token
  // steps 10 * 110 ms = 1.1 s.
  EXPECT_EQ(plan_prefill_budget(model, config, in), 100);
  in.oldest_unserved_seconds = 5;  // already late: as fast as possible
  EXPECT_EQ(plan_prefill_budget(model, config, in), 2048 - 10);
}

TEST(LatencyPlanner, PredictedTimeToFirstTokenIsTheBacklogAheadPlusThePrompt) {
  EXPECT_DOUBLE_EQ(predict_ttft_seconds(1000, 500, 2e-3), 3.0);
  EXPECT_DOUBLE_EQ(predict_ttft_seconds(-5, 500, 2e-3), 1.0);
  const StepCostModel model = model_with(StepCosts{0, 1e-3, 1e-3, 0});
  StepLoad load;
  load.decoding = 10;
  EXPECT_NEAR(seconds_per_prefill_token(model, load, 90), 0.1 / 90, 1e-6 * 0.1 / 90);
  EXPECT_EQ(seconds_per_prefill_token(StepCostModel{}, load, 90), 0) << "nothing known";
}

TEST(LatencyPlanner, ValidateNamesTheField) {
  LatencyConfig c;
  c.target_itl_seconds = -1;
  EXPECT_NE(c.validate().message().find("latency.target_itl_seconds"), std::string::npos);
  c = LatencyConfig{};
  c.idle_step_seconds = 0;
  EXPECT_NE(c.validate().message().find("latency.idle_step_seconds"), std::string::npos);
  c = LatencyConfig{};
  c.min_prefill_tokens = 0;
  EXPECT_NE(c.validate().message().find("min_prefill_tokens"), std::string::npos);
  EXPECT_TRUE(LatencyConfig{}.validate().ok());
}

}  // namespace
}  // namespace drift
