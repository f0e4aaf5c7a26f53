// Cancel at every point of a request's life, a handle dropped early, and shutdown in both modes:
// each request gets exactly one finish event, and every KV page comes back.
#include <gtest/gtest.h>

#include <thread>

#include "engine/engine.h"
#include "engine_fakes.h"

namespace drift {
namespace {

using namespace testing;
using std::chrono::milliseconds;

bool is_prefix(const std::vector<TokenId>& prefix, const std::vector<TokenId>& of) {
  return prefix.size() <= of.size() && std::equal(prefix.begin(), prefix.end(), of.begin());
}

TEST(EngineCancel, WhileQueued) {
  StepGate gate([](const StepPlan& plan) { return plan_has(plan, 1); });
  FakeHooks hooks = pause_hooks(gate);
  FakeEngine fake = make_fake_engine(small_config(), {}, hooks);
  RequestHandle busy = fake.engine->submit(token_request(1, 5, 5));
  ASSERT_TRUE(gate.wait_paused());
  RequestHandle queued = fake.engine->submit(token_request(2, 5, 5));
  queued.cancel();
  gate.open();
  Completion c = finish_within(queued);
  EXPECT_EQ(c.finish.reason, FinishReason::kCancelled);
  EXPECT_TRUE(c.tokens.empty());
  EXPECT_FALSE(c.finish.timings.queue_seconds) << "it never reached a step";
  EXPECT_EQ(finish_within(busy).finish.reason, FinishReason::kLength);
  EXPECT_TRUE(idle(fake.engine->metrics())) << describe(fake.engine->metrics());
}

TEST(EngineCancel, MidPrefillFreesItsPages) {
  EngineConfig config = small_config();
  config.scheduler.max_num_batched_tokens = 8;  // a 40-token prompt takes 5 steps
  StepGate gate([](const StepPlan& plan) {
    return plan_has(plan, 7, StepItemKind::kPrefill, /*min_start=*/16);
  });
  FakeHooks hooks = pause_hooks(gate);
  FakeEngine fake = make_fake_engine(config, {}, hooks);
  RequestHandle h = fake.engine->submit(token_request(7, 40, 10));
  ASSERT_TRUE(gate.wait_paused());
  h.cancel();
  gate.open();
  Completion c = finish_within(h);
  EXPECT_EQ(c.finish.reason, FinishReason::kCancelled);
  EXPECT_TRUE(c.tokens.empty());
  EXPECT_EQ(c.finish.usage.completion_tokens, 0);
  EXPECT_TRUE(c.finish.timings.queue_seconds);
  // Metrics are published before the event, so they already show the pages back.
  EngineMetrics m = fake.engine->metrics();
  EXPECT_TRUE(idle(m)) << describe(m);
  EXPECT_EQ(m.finished(FinishReason::kCancelled), 1u);
  EXPECT_LT(m.prefill_tokens_total, 40u);
}

TEST(EngineCancel, MidDecodeKeepsWhatWasGenerated) {
  FakeModel model;
  StepGate gate([](const StepPlan& plan) {
    return plan_has(plan, 3, StepItemKind::kDecode, /*min_start=*/6 + 4);
  });
  FakeHooks hooks = pause_hooks(gate);
  FakeEngine fake = make_fake_engine(small_config(), model, hooks);
  Request r = token_request(3, 6, 50);
  std::vector<TokenId> prompt = std::get<std::vector<TokenId>>(r.prompt);
  RequestHandle h = fake.engine->submit(r);
  ASSERT_TRUE(gate.wait_paused());
  h.cancel();
  h.cancel();  // twice is harmless
  gate.open();
  Completion c = finish_within(h);
  EXPECT_EQ(c.finish.reason, FinishReason::kCancelled);
  std::vector<TokenId> want = model.reference(3, prompt, 50);
  EXPECT_GE(c.tokens.size(), 5u);
  EXPECT_LT(c.tokens.size(), 50u);
  EXPECT_TRUE(is_prefix(c.tokens, want));
  EXPECT_EQ(c.text, expected_text(c.tokens, false)) << "held-back bytes are flushed";
  EXPECT_EQ(c.finish.usage.completion_tokens, int32_t(c.tokens.size()));
  EXPECT_TRUE(idle(fake.engine->metrics())) << describe(fake.engine->metrics());
}

TEST(EngineCancel, CancelAfterFinishChangesNothing) {
  FakeEngine fake = make_fake_engine(small_config());
  RequestHandle h = fake.engine->submit(token_request(1, 4, 3));
  EXPECT_EQ(finish_within(h).finish.reason, FinishReason::kLength);
  h.cancel();
  RequestHandle other = fake.engine->submit(token_request(2, 4, 3));
  EXPECT_EQ(finish_within(other).finish.reason, FinishReason::kLength);
  EXPECT_EQ(fake.engine->metrics().finished(FinishReason::kCancelled), 0u);
}

TEST(EngineCancel, DroppingTheHandleCancelsTheRequest) {
  StepGate gate([](const StepPlan& plan) { return plan_has(plan, 1, StepItemKind::kDecode); });
  FakeHooks hooks = pause_hooks(gate);
  FakeEngine fake = make_fake_engine(small_config(), {}, hooks);
  {
    RequestHandle h = fake.engine->submit(token_request(1, 5, 100));
    ASSERT_TRUE(gate.wait_paused());
  }  // dropped mid-decode
  {
    RequestHandle h = fake.engine->submit(token_request(2, 5, 100));
  }  // dropped at once, probably still queued
  gate.open();
  EngineMetrics m = metrics_when(*fake.engine, [](const EngineMetrics& m) {
    return m.finished(FinishReason::kCancelled) == 2;
  });
  EXPECT_TRUE(idle(m)) << describe(m);
  EXPECT_LT(m.generation_tokens_total, 10u);
}

TEST(EngineCancel, NoCallbackRunsAfterItsHandleIsDestroyed) {
  std::atomic<bool> destroyed{false};
  std::atomic<int> late_calls{0}, calls{0};
  FakeEngine fake = make_fake_engine(small_config());
  {
    RequestHandle h = fake.engine->submit(token_request(1, 5, 100), [&](TokenEvent) {
      if (destroyed.load()) late_calls.fetch_add(1);
      calls.fetch_add(1);
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    });
    while (calls.load() < 3) std::this_thread::sleep_for(milliseconds(1));
  }
  destroyed.store(true);
  metrics_when(*fake.engine,
               [](const EngineMetrics& m) { return m.finished(FinishReason::kCancelled) == 1; });
  EXPECT_EQ(late_calls.load(), 0);
}

TEST(EngineCancel, ACallbackThatThrowsIsDetachedAndItsRequestCancelled) {
  FakeEngine fake = make_fake_engine(small_config());
  RequestHandle bad = fake.engine->submit(
      token_request(1, 5, 50), [](TokenEvent) { throw std::runtime_error("consumer bug"); });
  RequestHandle good = fake.engine->submit(token_request(2, 5, 20));
  EXPECT_EQ(finish_within(good).finish.reason, FinishReason::kLength);
  EngineMetrics m = metrics_when(*fake.engine, [](const EngineMetrics& m) {
    return m.finished(FinishReason::kCancelled) == 1 && m.num_running == 0;
  });
  EXPECT_TRUE(m.healthy);
}

TEST(EngineShutdown, DrainRunsEveryAcceptedRequestToItsEnd) {
  FakeModel model;
  FakeEngine fake = make_fake_engine(small_config(), model);
  std::vector<RequestHandle> handles;
  std::vector<std::vector<TokenId>> want;
  for (RequestId id = 1; id <= 12; ++id) {
    Request r = token_request(id, 3 + int32_t(id), 20);
    want.push_back(model.reference(id, std::get<std::vector<TokenId>>(r.prompt), 20));
    handles.push_back(fake.engine->submit(r));
  }
  fake.engine->shutdown(ShutdownMode::kDrain);  // returns once the worker has joined
  for (size_t i = 0; i < handles.size(); ++i) {
    Completion c = finish_within(handles[i], milliseconds(0));
    EXPECT_EQ(c.finish.reason, FinishReason::kLength);
    EXPECT_EQ(c.tokens, want[i]);
  }
  RequestHandle late = fake.engine->submit(token_request(99, 5, 5));
  Completion c = finish_within(late, milliseconds(0));
  EXPECT_EQ(c.finish.reason, FinishReason::kRejected);
  EXPECT_EQ(c.finish.message, "the engine is shutting down");
  EngineMetrics m = fake.engine->metrics();
  EXPECT_TRUE(idle(m)) << describe(m);
  EXPECT_EQ(m.finished(FinishReason::kLength), 12u);
  fake.engine->shutdown(ShutdownMode::kAbort);  // again: nothing left to do
}

// A server's drain: what has started finishes, what still waits for its first token is cut at
// once (its client can retry elsewhere now rather than after the drain).
TEST(EngineShutdown, DrainStartedCancelsOnlyRequestsWithoutAToken) {
  EngineConfig config = small_config();
  config.scheduler.max_num_seqs = 1;  // one runs, the others wait
  config.scheduler.max_num_partial_prefills = 1;
  StepGate gate([](const StepPlan& plan) { return plan_has(plan, 1, StepItemKind::kDecode); });
  FakeHooks hooks = pause_hooks(gate);
  FakeModel model;
  FakeEngine fake = make_fake_engine(config, model, hooks);
  Request first = token_request(1, 4, 6);
  const std::vector<TokenId> want =
      model.reference(1, std::get<std::vector<TokenId>>(first.prompt), 6);
  RequestHandle running = fake.engine->submit(first);
  ASSERT_TRUE(gate.wait_paused());  // request 1 has its first token and decodes
  RequestHandle waiting_a = fake.engine->submit(token_request(2, 4, 6));
  RequestHandle waiting_b = fake.engine->submit(token_request(3, 4, 6));
  std::thread drain([&] { fake.engine->shutdown(ShutdownMode::kDrainStarted); });
  // The drain is requested once the gateway refuses new requests (same lock); then the paused
  // step may go on, and the worker takes the shutdown with requests 2 and 3.
  // (An immediate rejection is delivered before submit returns; a probe accepted before that
  // waits like requests 2 and 3, and must end like them.)
  std::vector<RequestHandle> waiting;
  waiting.push_back(std::move(waiting_a));
  waiting.push_back(std::move(waiting_b));
  for (RequestId probe = 100;; ++probe) {
    RequestHandle h = fake.engine->submit(token_request(probe, 4, 1));
    std::optional<TokenEvent> e = h.next_for(milliseconds(0));
    if (e && e->finish && e->finish->message == "the engine is shutting down") break;
    waiting.push_back(std::move(h));
    std::this_thread::sleep_for(milliseconds(1));
  }
  gate.open();
  for (RequestHandle* h : {&waiting[0], &waiting[1]}) {
    Completion c = finish_within(*h);
    EXPECT_EQ(c.finish.reason, FinishReason::kCancelled);
    EXPECT_TRUE(c.tokens.empty());
    EXPECT_NE(c.finish.message.find("had not started"), std::string::npos) << c.finish.message;
  }
  for (size_t i = 2; i < waiting.size(); ++i)
    EXPECT_EQ(finish_within(waiting[i]).finish.reason, FinishReason::kCancelled);
  drain.join();
  Completion c = finish_within(running, milliseconds(0));
  EXPECT_EQ(c.finish.reason, FinishReason::kLength);
  EXPECT_EQ(c.tokens, want);
  EXPECT_TRUE(idle(fake.engine->metrics())) << describe(fake.engine->metrics());
}

TEST(EngineShutdown, AbortEndsEveryRequestCancelled) {
  StepGate gate([](const StepPlan& plan) { return plan_has(plan, 1); });
  FakeHooks hooks = pause_hooks(gate);
  EngineConfig config = small_config();
  config.max_queued_requests = 10000;
  FakeEngine fake = make_fake_engine(config, {}, hooks);
  std::vector<RequestHandle> handles;
  for (RequestId id = 1; id <= 10; ++id)
    handles.push_back(fake.engine->submit(token_request(id, 5, 100)));
  ASSERT_TRUE(gate.wait_paused());
  std::thread stopper([&] { fake.engine->shutdown(ShutdownMode::kAbort); });
  // Submit probes until one is refused: then the shutdown has been requested.
  for (RequestId id = 100;; ++id) {
    handles.push_back(fake.engine->submit(token_request(id, 5, 100)));
    std::optional<TokenEvent> e = handles.back().next_for(milliseconds(0));
    if (e && e->finish) {
      EXPECT_EQ(e->finish->message, "the engine is shutting down");
      handles.pop_back();
      break;
    }
    std::this_thread::sleep_for(milliseconds(1));
  }
  gate.open();
  stopper.join();
  for (RequestHandle& h : handles) {
    Completion c = finish_within(h, milliseconds(0));
    EXPECT_EQ(c.finish.reason, FinishReason::kCancelled) << h.id();
    EXPECT_EQ(c.finish.message, "the engine was shut down");
    EXPECT_LE(c.tokens.size(), 1u) << "at most the token of the step that was running";
  }
  EngineMetrics m = fake.engine->metrics();
  EXPECT_TRUE(idle(m)) << describe(m);
  EXPECT_EQ(m.finished(FinishReason::kCancelled), handles.size());
}

TEST(EngineShutdown, DestroyingTheEngineEndsRequestsAndLeavesHandlesUsable) {
  std::vector<RequestHandle> handles;
  {
    FakeEngine fake = make_fake_engine(small_config());
    for (RequestId id = 1; id <= 5; ++id)
      handles.push_back(fake.engine->submit(token_request(id, 5, 100)));
  }
  for (RequestHandle& h : handles) {
    Completion c = finish_within(h, milliseconds(0));
    EXPECT_TRUE(c.finish.reason == FinishReason::kCancelled ||
                c.finish.reason == FinishReason::kLength);
    h.cancel();  // the engine is gone: a no-op
  }
}

}  // namespace
}  // namespace drift
