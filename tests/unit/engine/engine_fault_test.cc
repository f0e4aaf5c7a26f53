// Executor faults: an exception or an item error ends only the requests it touched; an executor
// that goes unhealthy ends every request with an error and the engine refuses new ones. Never a
// hang: every handle gets its finish event.
#include <gtest/gtest.h>

#include <set>
#include <stdexcept>

#include "engine/engine.h"
#include "engine_fakes.h"

namespace drift {
namespace {

using namespace testing;
using std::chrono::milliseconds;

TEST(EngineFault, ExecutorExceptionFailsOnlyThatStepsRequests) {
  FakeModel model;
  EngineConfig config = small_config();
  config.scheduler.max_num_seqs = 2;  // at most two requests share the failing step
  std::set<SeqId> in_failed_step;     // written on the worker before the throw
  FakeHooks hooks;
  hooks.before_step = [&](const StepPlan& plan) {
    if (!in_failed_step.empty() || !plan_has(plan, 1, StepItemKind::kDecode, 5 + 2)) return;
    for (const StepItem& item : plan.items) in_failed_step.insert(item.seq_id);
    throw std::runtime_error("injected kernel failure");
  };
  FakeEngine fake = make_fake_engine(config, model, hooks);
  std::vector<RequestHandle> handles;
  std::vector<std::vector<TokenId>> want;
  for (RequestId id = 1; id <= 4; ++id) {
    Request r = token_request(id, 5, 10);
    want.push_back(model.reference(id, std::get<std::vector<TokenId>>(r.prompt), 10));
    handles.push_back(fake.engine->submit(r));
  }
  std::vector<Completion> done;
  for (RequestHandle& h : handles) done.push_back(finish_within(h));
  ASSERT_TRUE(in_failed_step.contains(1));
  for (RequestId id = 1; id <= 4; ++id) {
    SCOPED_TRACE(::testing::Message() << "request " << id);
    const Completion& c = done[id - 1];
    const std::vector<TokenId>& w = want[id - 1];
    if (in_failed_step.contains(id)) {
      EXPECT_EQ(c.finish.reason, FinishReason::kError);
      EXPECT_NE(c.finish.message.find("injected kernel failure"), std::string::npos)
          << c.finish.message;
      EXPECT_TRUE(std::equal(c.tokens.begin(), c.tokens.end(), w.begin()));
      if (id == 1) EXPECT_EQ(c.tokens.size(), 3u);  // prefill + decodes at 5 and 6
    } else {
      EXPECT_EQ(c.finish.reason, FinishReason::kLength);
      EXPECT_EQ(c.tokens, w);
    }
  }
  EXPECT_TRUE(fake.engine->healthy());
  RequestHandle after = fake.engine->submit(token_request(9, 5, 4));
  EXPECT_EQ(finish_within(after).finish.reason, FinishReason::kLength);
  EngineMetrics m = fake.engine->metrics();
  EXPECT_TRUE(idle(m)) << describe(m);
  EXPECT_EQ(m.finished(FinishReason::kError), in_failed_step.size());
  EXPECT_EQ(m.finished(FinishReason::kLength), 5 - in_failed_step.size());
}

TEST(EngineFault, ItemErrorEndsOnlyThatRequest) {
  FakeModel model;
  FakeHooks hooks;
  hooks.after_step = [](const StepPlan& plan, ExecutionResult& result) {
    for (size_t i = 0; i < plan.items.size(); ++i)
      if (plan.items[i].seq_id == 2 && plan.items[i].kind == StepItemKind::kDecode)
        result.items[i].error = Error{"injected: NaN logits"};
    return Status::Ok();
  };
  FakeEngine fake = make_fake_engine(small_config(), model, hooks);
  std::vector<RequestHandle> handles;
  for (RequestId id = 1; id <= 3; ++id)
    handles.push_back(fake.engine->submit(token_request(id, 5, 8)));
  for (RequestId id = 1; id <= 3; ++id) {
    Completion c = finish_within(handles[id - 1]);
    if (id == 2) {
      EXPECT_EQ(c.finish.reason, FinishReason::kError);
      EXPECT_EQ(c.finish.message, "injected: NaN logits");
      EXPECT_EQ(c.tokens.size(), 1u) << "the token from its prefill";
    } else {
      EXPECT_EQ(c.finish.reason, FinishReason::kLength);
      EXPECT_EQ(c.tokens, model.reference(id, fake_prompt(id, 5), 8));
    }
  }
  EXPECT_TRUE(idle(fake.engine->metrics())) << describe(fake.engine->metrics());
}

TEST(EngineFault, ReturnedStepErrorFailsThatStepOnly) {
  std::atomic<int> failures{0};
  FakeHooks hooks;
  hooks.after_step = [&](const StepPlan& plan, ExecutionResult&) -> Status {
    if (plan.step == 3 && failures.fetch_add(1) == 0) return make_error("injected step error");
    return Status::Ok();
  };
  FakeEngine fake = make_fake_engine(small_config(), {}, hooks);
  RequestHandle a = fake.engine->submit(token_request(1, 5, 10));
  Completion c = finish_within(a);
  EXPECT_EQ(c.finish.reason, FinishReason::kError);
  EXPECT_EQ(c.finish.message, "injected step error");
  RequestHandle b = fake.engine->submit(token_request(2, 5, 10));
  EXPECT_EQ(finish_within(b).finish.reason, FinishReason::kLength);
  EXPECT_TRUE(fake.engine->healthy());
}

TEST(EngineFault, UnhealthyExecutorEndsEverythingAndRefusesNewRequests) {
  FakeExecutor* executor = nullptr;
  StepGate gate([](const StepPlan& plan) { return plan_has(plan, 1, StepItemKind::kDecode, 8); });
  FakeHooks hooks = pause_hooks(gate);
  hooks.after_step = [&](const StepPlan& plan, ExecutionResult&) -> Status {
    if (!plan_has(plan, 1, StepItemKind::kDecode, 8)) return Status::Ok();
    executor->set_healthy(false);
    return make_error("device lost");
  };
  EngineConfig config = small_config();
  config.scheduler.max_num_seqs = 2;
  FakeEngine fake = make_fake_engine(config, {}, hooks);
  executor = fake.executor;
  std::vector<RequestHandle> handles;
  for (RequestId id = 1; id <= 5; ++id)
    handles.push_back(fake.engine->submit(token_request(id, 5, 30)));
  ASSERT_TRUE(gate.wait_paused());
  // Queued in the gateway while the failing step runs: these end too.
  for (RequestId id = 6; id <= 7; ++id)
    handles.push_back(fake.engine->submit(token_request(id, 5, 30)));
  gate.open();
  for (RequestHandle& h : handles) {
    Completion c = finish_within(h);
    EXPECT_TRUE(c.finish.reason == FinishReason::kError ||
                c.finish.reason == FinishReason::kRejected)
        << h.id() << " " << finish_reason_name(c.finish.reason);
    EXPECT_NE(c.finish.message.find(h.id() <= 2 ? "device lost" : "unhealthy"), std::string::npos)
        << h.id() << ": " << c.finish.message;
  }
  EXPECT_FALSE(fake.engine->healthy());
  RequestHandle late = fake.engine->submit(token_request(20, 5, 5));
  Completion c = finish_within(late, milliseconds(0));
  EXPECT_EQ(c.finish.reason, FinishReason::kRejected);
  EXPECT_EQ(c.finish.message, "the engine is unhealthy: device lost");
  EngineMetrics m = fake.engine->metrics();
  EXPECT_FALSE(m.healthy);
  EXPECT_EQ(m.num_running, 0);
  EXPECT_EQ(m.kv_pages_used, 0);
  EXPECT_EQ(m.finished_total(), 8u);
  fake.engine->shutdown(ShutdownMode::kDrain);  // returns: nothing can hang
}

}  // namespace
}  // namespace drift
