// The prefix cache through the engine over the fake executor: requests that share a prompt
// prefix hit it and give their reference outputs, the counters reach Engine::metrics(), and after
// the workload a reset leaves every page free; with the cache off nothing is kept.
#include <gtest/gtest.h>

#include <thread>

#include "engine/engine.h"
#include "engine_fakes.h"

namespace drift {
namespace {

using namespace testing;

// 24 tokens shared by every request, then 6 of its own.
Request shared_prefix_request(RequestId id) {
  Request r = token_request(id, 30, 5);
  std::vector<TokenId>& prompt = std::get<std::vector<TokenId>>(r.prompt);
  for (size_t i = 0; i < 24; ++i) prompt[i] = TokenId(100 + i);
  return r;
}

EngineMetrics metrics_when(Engine& engine, bool (*done)(const EngineMetrics&)) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  EngineMetrics m = engine.metrics();
  while (!done(m) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    m = engine.metrics();
  }
  return m;
}

TEST(EnginePrefixCache, SharedPrefixesHitAndAResetLeavesEveryPageFree) {
  FakeModel model;
  FakeEngine fake = make_fake_engine(small_config(), model);
  std::vector<RequestHandle> handles;
  std::vector<Request> requests;
  for (RequestId id = 1; id <= 12; ++id) {
    requests.push_back(shared_prefix_request(id));
    handles.push_back(fake.engine->submit(requests.back()));
  }
  handles[5].cancel();
  for (size_t i = 0; i < handles.size(); ++i) {
    Completion c = finish_within(handles[i]);
    if (c.finish.reason == FinishReason::kCancelled) continue;
    ASSERT_EQ(c.finish.reason, FinishReason::kLength) << c.finish.message;
    EXPECT_EQ(c.tokens, model.reference(requests[i].id.value(),
                                        std::get<std::vector<TokenId>>(requests[i].prompt), 5));
  }
  EngineMetrics m = fake.engine->metrics();
  EXPECT_TRUE(m.prefix_cache_enabled);
  EXPECT_GT(m.prefix_cache.hit_tokens, 0u);
  EXPECT_EQ(m.prefix_cache.hit_tokens % 4, 0u) << "whole pages of 4";
  EXPECT_GE(m.prefix_cache.queried_tokens, 11u * 30);
  EXPECT_GT(m.kv_pages_cached, 0);
  EXPECT_TRUE(idle(m)) << describe(m);

  fake.engine->reset_prefix_cache();
  m = metrics_when(*fake.engine,
                   [](const EngineMetrics& x) { return x.kv_pages_free == x.kv_pages_total; });
  EXPECT_EQ(m.kv_pages_free, m.kv_pages_total) << describe(m);
  EXPECT_EQ(m.kv_pages_cached, 0);
  EXPECT_GT(m.prefix_cache.evictions, 0u);
}

// Each request's finish reports the prompt tokens the cache held at its admission (the Responses
// API's cached_tokens): none for the first, the shared prefix's whole pages for a later one.
TEST(EnginePrefixCache, AFinishCountsTheRequestsCachedPromptTokens) {
  FakeEngine fake = make_fake_engine(small_config());
  RequestHandle first = fake.engine->submit(shared_prefix_request(1));
  const Completion a = finish_within(first);
  ASSERT_EQ(a.finish.reason, FinishReason::kLength) << a.finish.message;
  EXPECT_EQ(a.finish.usage.cached_prompt_tokens, 0);
  RequestHandle second = fake.engine->submit(shared_prefix_request(2));
  const Completion b = finish_within(second);
  ASSERT_EQ(b.finish.reason, FinishReason::kLength) << b.finish.message;
  EXPECT_EQ(b.finish.usage.cached_prompt_tokens, 24) << "the 24 shared tokens: 6 pages of 4";
  EXPECT_EQ(b.finish.usage.prompt_tokens, 30);
}

// The gauge says the cache is on before any request has run (it read 0 until the first step).
TEST(EnginePrefixCache, EnabledGaugeHoldsBeforeTheFirstRequest) {
  FakeEngine on = make_fake_engine(small_config());
  EXPECT_TRUE(on.engine->metrics().prefix_cache_enabled);
  EngineConfig config = small_config();
  config.kv.enable_prefix_caching = false;
  FakeEngine off = make_fake_engine(config);
  EXPECT_FALSE(off.engine->metrics().prefix_cache_enabled);
}

TEST(EnginePrefixCache, OffKeepsNoPageAndCountsNothing) {
  EngineConfig config = small_config();
  config.kv.enable_prefix_caching = false;
  FakeEngine fake = make_fake_engine(config);
  std::vector<RequestHandle> handles;
  for (RequestId id = 1; id <= 4; ++id)
    handles.push_back(fake.engine->submit(shared_prefix_request(id)));
  for (RequestHandle& h : handles) EXPECT_EQ(finish_within(h).finish.reason, FinishReason::kLength);
  EngineMetrics m = fake.engine->metrics();
  EXPECT_FALSE(m.prefix_cache_enabled);
  EXPECT_EQ(m.prefix_cache.queries, 0u);
  EXPECT_EQ(m.kv_pages_free, m.kv_pages_total);
  fake.engine->reset_prefix_cache();  // harmless without a cache
  EXPECT_EQ(metrics_when(*fake.engine, [](const EngineMetrics&) { return true; }).kv_pages_cached,
            0);
}

}  // namespace
}  // namespace drift
