// The engine's judge (engine/admission_judge.h) is the one place a request is admitted or
// refused. It judges whether a request can ever fit in the KV cache by the capacity scheduler's
// own estimate (kv_keep included), so a request that fits only compressed is admitted and runs,
// and one that cannot fit even compressed is refused at submit; what it admits is the only kind
// of request the scheduler takes.
#include <gtest/gtest.h>

#include <type_traits>

#include "engine/engine.h"
#include "engine_fakes.h"

namespace drift {
namespace {

using namespace testing;

// 24 pages of 4 tokens (96 tokens), compression by window from 16 tokens on.
EngineConfig compressing_config() {
  EngineConfig c = small_config(/*kv_pages=*/24);
  c.scheduler.kv_compress.policy = KvEvictPolicy::kWindow;
  c.scheduler.kv_compress.min_tokens = 16;
  c.scheduler.kv_compress.sink_tokens = 2;
  c.scheduler.kv_compress.recent_tokens = 8;
  c.scheduler.kv_compress.metric_window = 4;
  return c;
}

TEST(EngineAdmissionJudge, ARequestThatFitsOnlyCompressedIsAdmittedAndRuns) {
  FakeModel model;
  FakeEngine fake = make_fake_engine(compressing_config(), model);
  ASSERT_TRUE(fake.engine);
  // 20 + 100 tokens need 30 pages uncompressed: more than the cache has.
  RequestHandle whole = fake.engine->submit(token_request(1, 20, 100));
  Completion refused = finish_within(whole);
  ASSERT_EQ(refused.finish.reason, FinishReason::kRejected);
  EXPECT_EQ(refused.finish.reject_reason, RejectReason::kExceedsKvCache);

  // Kept at a quarter, it never holds more than its target + a page + a step: it fits.
  Request compressed = token_request(2, 20, 100);
  compressed.kv_keep = 0.25;
  RequestHandle h = fake.engine->submit(std::move(compressed));
  Completion c = finish_within(h);
  ASSERT_EQ(c.finish.reason, FinishReason::kLength) << c.finish.message;
  EXPECT_EQ(c.tokens.size(), 100u);
}

TEST(EngineAdmissionJudge, KvKeepOutsideZeroToOneIsRefusedWithTheField) {
  FakeEngine fake = make_fake_engine(compressing_config());
  for (double keep : {0.0, -0.5, 1.5}) {
    Request r = token_request(1, 8, 2);
    r.kv_keep = keep;
    RequestHandle h = fake.engine->submit(std::move(r));
    Completion c = finish_within(h);
    ASSERT_EQ(c.finish.reason, FinishReason::kRejected);
    EXPECT_EQ(c.finish.reject_reason, RejectReason::kInvalidRequest);
    EXPECT_EQ(c.finish.message, fmt::format("kv_keep must be in (0, 1], got {}", keep));
  }
  EXPECT_EQ(fake.engine->metrics().steps, 0u) << "nothing reached the scheduler";
}

// Nothing but an issuer (the judge; tests that run the scheduler alone) can make an
// AdmittedRequest, and EngineScheduler::add takes nothing else.
TEST(EngineAdmissionJudge, OnlyAnIssuerMakesWhatTheSchedulerTakes) {
  static_assert(!std::is_constructible_v<AdmittedRequest, SequenceRequest>);
  static_assert(!std::is_default_constructible_v<AdmittedRequest>);
  static_assert(
      !std::is_invocable_v<decltype(&EngineScheduler::add), EngineScheduler&, SequenceRequest>);
  static_assert(!std::is_constructible_v<AdmissionJudge::Fields>);
  static_assert(!std::is_constructible_v<AdmissionJudge::Size>);
}

}  // namespace
}  // namespace drift
