// The engine's latency machinery end to end over the fake executor: the step cost model learns
// from real steps, predictive admission refuses what would wait too long (with a retry time),
// and per-request priorities need the priority policy.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "engine_fakes.h"

namespace drift {
namespace {

using namespace std::chrono_literals;
using testing::FakeEngine;
using testing::FakeHooks;
using testing::finish_within;
using testing::make_fake_engine;
using testing::plan_has;
using testing::small_config;
using testing::StepGate;
using testing::token_request;

// An executor that takes time like a real one: 200 us per prefill token, 500 us per decode.
FakeHooks timed_hooks(StepGate* gate) {
  FakeHooks hooks;
  hooks.before_step = [gate](const StepPlan& plan) {
    if (gate) gate->on_step(plan);
    std::this_thread::sleep_for(
        std::chrono::microseconds(200 * plan.num_prefill_tokens + 500 * plan.num_decode_tokens));
  };
  return hooks;
}

// Runs a few requests to their end, so that the cost model has seen prefill and decode steps.
void calibrate(Engine& engine) {
  std::vector<RequestHandle> handles;
  for (RequestId id = 1000; id < 1004; ++id)
    handles.push_back(engine.submit(token_request(id, 40, 6)));
  for (RequestHandle& h : handles) EXPECT_EQ(finish_within(h).finish.reason, FinishReason::kLength);
}

TEST(EngineLatency, TheStepCostModelLearnsFromTheStepsTheEngineRuns) {
  EngineConfig config = small_config(256);
  FakeEngine fake = make_fake_engine(config, {}, timed_hooks(nullptr));
  calibrate(*fake.engine);
  const EngineMetrics m = fake.engine->metrics();
  ASSERT_TRUE(m.step_costs_calibrated);
  // Sleeps overshoot (a loaded machine only ever makes them longer), so the bounds are loose
  // above; below, a prefill token cannot cost less than the 200 us slept for it.
  EXPECT_GT(m.step_costs.per_prefill_token, 150e-6);
  EXPECT_LT(m.step_costs.per_prefill_token, 2e-3);
  EXPECT_GT(m.last_step_seconds, 0);
  EXPECT_GT(m.last_step_predicted_seconds, 0);
  EXPECT_GE(m.prefill_token_budget, 1);
  EXPECT_LE(m.prefill_token_budget, config.scheduler.max_num_batched_tokens);
}

TEST(EngineLatency, PredictiveAdmissionRefusesAtOnceWithARetryTime) {
  EngineConfig config = small_config(1024);
  config.max_queued_requests = 256;
  config.latency.max_ttft_seconds = 0.1;
  StepGate gate([](const StepPlan& plan) { return plan_has(plan, 1, StepItemKind::kDecode); });
  FakeEngine fake = make_fake_engine(config, {}, timed_hooks(&gate));
  calibrate(*fake.engine);

  // Request 1 decodes; the engine pauses in its step while 20 prompts of 100 tokens arrive. At
  // about 0.2 ms per prefill token, 0.1 s of predicted wait is ~500 tokens of backlog.
  RequestHandle decoding = fake.engine->submit(token_request(1, 8, 50));
  ASSERT_TRUE(gate.wait_paused());
  std::vector<RequestHandle> accepted;
  std::vector<Finish> refused;
  for (RequestId id = 2; id < 22; ++id) {
    RequestHandle h = fake.engine->submit(token_request(id, 100, 4));
    std::optional<TokenEvent> e = h.next_for(0ms);
    if (e && e->finish) {
      refused.push_back(*e->finish);
    } else {
      ASSERT_TRUE(refused.empty()) << "a request accepted after one was refused: " << id;
      accepted.push_back(std::move(h));
    }
  }
  EXPECT_GE(accepted.size(), 1u) << "a request with nothing ahead is never refused";
  ASSERT_FALSE(refused.empty());
  for (const Finish& f : refused) {
    EXPECT_EQ(f.reason, FinishReason::kRejected);
    EXPECT_EQ(f.message.rfind("overloaded: predicted time to first token", 0), 0u) << f.message;
    ASSERT_TRUE(f.retry_after_seconds);
    EXPECT_GT(*f.retry_after_seconds, 0);
  }
  // Later refusals are behind more backlog: they are told to wait longer.
  EXPECT_GE(*refused.back().retry_after_seconds, *refused.front().retry_after_seconds);
  gate.open();
  for (RequestHandle& h : accepted)
    EXPECT_EQ(finish_within(h).finish.reason, FinishReason::kLength);
  EXPECT_EQ(finish_within(decoding).finish.reason, FinishReason::kLength);
  // With the backlog gone, the same request is admitted.
  RequestHandle again = fake.engine->submit(token_request(2, 100, 4));
  EXPECT_EQ(finish_within(again).finish.reason, FinishReason::kLength);
}

TEST(EngineLatency, APriorityNeedsThePriorityPolicy) {
  Request r = token_request(1, 4, 2);
  r.priority = 3;
  {
    FakeEngine fake = make_fake_engine(small_config());
    RequestHandle h = fake.engine->submit(r);
    Completion c = finish_within(h);
    EXPECT_EQ(c.finish.reason, FinishReason::kRejected);
    EXPECT_NE(c.finish.message.find("--policy priority"), std::string::npos) << c.finish.message;
  }
  EngineConfig config = small_config();
  config.scheduler.policy = SchedulerPolicy::kPriority;
  FakeEngine fake = make_fake_engine(config);
  RequestHandle h = fake.engine->submit(r);
  EXPECT_EQ(finish_within(h).finish.reason, FinishReason::kLength);
}

}  // namespace
}  // namespace drift
