// The scheduler with a prefix cache, in small cases that pin exact state: where prefill starts,
// which page ids are shared, refcounts, what admission counts, what stays cached.
#include <gtest/gtest.h>

#include "fake_executor.h"
#include "plan_views.h"
#include "scheduler/engine_scheduler.h"

namespace drift {
namespace {

using Pages = std::vector<PageId>;
using testing::D;
using testing::Driver;
using testing::FakeModel;
using testing::items_of;
using testing::ItemView;
using testing::make_request;
using testing::P;
using testing::pages_of;
using Items = std::vector<ItemView>;

constexpr std::optional<PrefixHashFn> kCache = default_prefix_hash;

SchedulerConfig config(int32_t budget) {
  SchedulerConfig c;
  c.max_num_batched_tokens = budget;
  c.max_num_seqs = 4;
  c.max_model_len = 64;
  return c;
}

// `prefix` then `own` distinct tokens (from 300 + 10 * id), as request `id`.
SequenceRequest request_with(SeqId id, const std::vector<TokenId>& prefix, int32_t own,
                             int32_t max_new_tokens) {
  SequenceRequest r;
  r.id = id;
  r.prompt = prefix;
  for (int32_t i = 0; i < own; ++i) r.prompt.push_back(TokenId(300 + 10 * id + i));
  r.max_new_tokens = max_new_tokens;
  return r;
}

std::vector<TokenId> tokens(int32_t n, TokenId first = 100) {
  std::vector<TokenId> t;
  for (int32_t i = 0; i < n; ++i) t.push_back(first + i);
  return t;
}

TEST(PrefixScheduler, AFinishedRequestsFullPagesServeTheNextRequestsPrefix) {
  Driver d(config(16), 16, 4, FakeModel{}, {}, kCache);
  d.submit(request_with(1, tokens(10), 0, 2));
  EXPECT_EQ(items_of(d.step()), (Items{{1, P, 0, 10, true}}));
  EXPECT_EQ(d.prefix_cache()->num_registered(), 2) << "pages 0 and 1 are full once reported";
  EXPECT_EQ(items_of(d.step()), (Items{{1, D, 10, 1, true}}));
  ASSERT_EQ(d.records()[1].finish, FinishReason::kLength);
  EXPECT_EQ(d.kv().cached_pages_in_order(), (Pages{1, 0})) << "the partial page 2 is freed";

  // 8 shared tokens and 3 of its own: prefill starts at 8 over pages 0 and 1.
  d.submit(request_with(2, tokens(8), 3, 2));
  StepPlan s = d.step();
  EXPECT_EQ(items_of(s), (Items{{2, P, 8, 3, true}}));
  EXPECT_EQ(pages_of(s, 0), (Pages{0, 1, 3}));
  EXPECT_EQ(d.kv().refcount(0), 1);
  EXPECT_EQ(d.kv().refcount(1), 1);
  EXPECT_TRUE(d.kv().cached_pages_in_order().empty());
  const PrefixCacheStats& stats = d.prefix_cache()->stats();
  EXPECT_EQ(stats.queries, 2u);
  EXPECT_EQ(stats.hits, 1u);
  EXPECT_EQ(stats.misses, 1u);
  EXPECT_EQ(stats.queried_tokens, 10u + 11u);
  EXPECT_EQ(stats.hit_tokens, 8u);
  ASSERT_TRUE(d.run_to_completion());
  EXPECT_EQ(d.records()[2].generated, d.reference(2));
  d.expect_all_released();
}

TEST(PrefixScheduler, TheLastPromptTokenIsAlwaysComputed) {
  Driver d(config(16), 16, 4, FakeModel{}, {}, kCache);
  d.submit(request_with(1, tokens(8), 0, 1));
  ASSERT_TRUE(d.run_to_completion());
  // The same 8 tokens: both pages are cached, but the last token must be run for its logits, so
  // only the first page is shared and the second is computed again into a fresh page.
  d.submit(request_with(2, tokens(8), 0, 1));
  StepPlan s = d.step();
  EXPECT_EQ(items_of(s), (Items{{2, P, 4, 4, true}}));
  EXPECT_EQ(pages_of(s, 0), (Pages{0, 2}));
  // One more token: both pages are shared.
  d.submit(request_with(3, tokens(9), 0, 1));
  s = d.step();
  EXPECT_EQ(items_of(s), (Items{{3, P, 8, 1, true}}));
  EXPECT_EQ(pages_of(s, 0), (Pages{0, 1, 3}));
  EXPECT_EQ(d.records()[2].generated, d.reference(2));
  EXPECT_EQ(d.records()[3].generated, d.reference(3));
  d.expect_all_released();
}

TEST(PrefixScheduler, ARequestWaitsUntilTheStepThatWritesEveryPageItCanShareThenJoinsIt) {
  SchedulerConfig c = config(12);
  c.long_prefill_token_threshold = 8;
  c.max_num_partial_prefills = 2;
  Driver d(c, 16, 4, FakeModel{}, {}, kCache);
  d.submit(request_with(1, tokens(24), 0, 2));
  EXPECT_EQ(items_of(d.step()), (Items{{1, P, 0, 8, false}}));
  // Pages 0 and 1 are cached; 2 could share pages 2-4 too (not page 5: it holds 2's last
  // token), but 1 writes only pages 2 and 3 in the next step: 2 waits rather than compute 4.
  d.submit(request_with(2, tokens(24), 0, 2));
  EXPECT_EQ(items_of(d.step()), (Items{{1, P, 8, 8, false}}));
  EXPECT_EQ(d.scheduler().stats().prefix_waits, 1u);
  // 1's last chunk writes page 4: 2 joins that step, sharing pages 0-4 (0-3 from the cache, 4
  // as 1 writes it: the executor stores every token's K/V before any token attends).
  StepPlan s = d.step();
  EXPECT_EQ(items_of(s), (Items{{1, P, 16, 8, true}, {2, P, 20, 4, true}}));
  EXPECT_EQ(pages_of(s, 0), (Pages{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(pages_of(s, 1), (Pages{0, 1, 2, 3, 4, 6}));
  for (PageId p : {0, 1, 2, 3, 4}) EXPECT_EQ(d.kv().refcount(p), 2) << "page " << p;
  EXPECT_EQ(d.scheduler().stats().prefix_shared_in_step, 1u);
  ASSERT_TRUE(d.run_to_completion());
  EXPECT_EQ(d.records()[1].generated, d.reference(1));
  EXPECT_EQ(d.records()[2].generated, d.reference(2));
  EXPECT_EQ(d.scheduler().stats().prefill_tokens, 24u + 4u);
  d.expect_all_released();
}

TEST(PrefixScheduler, ABurstWithOneSystemPromptComputesItOnceInTheStepEveryRequestJoins) {
  Driver d(config(36), 32, 4, FakeModel{}, {}, kCache);
  for (SeqId id = 1; id <= 4; ++id) d.submit(request_with(id, tokens(20), 4, 2));
  StepPlan s = d.step();
  EXPECT_EQ(
      items_of(s),
      (Items{{1, P, 0, 24, true}, {2, P, 20, 4, true}, {3, P, 20, 4, true}, {4, P, 20, 4, true}}))
      << "the others share its pages as it writes them instead of computing them too";
  for (size_t i = 1; i < 4; ++i)
    EXPECT_EQ(pages_of(s, i), (Pages{0, 1, 2, 3, 4, PageId(5 + i)})) << "item " << i;
  for (PageId p : {0, 1, 2, 3, 4}) EXPECT_EQ(d.kv().refcount(p), 4) << "page " << p;
  EXPECT_EQ(d.scheduler().stats().prefix_waits, 0u);
  EXPECT_EQ(d.scheduler().stats().prefix_shared_in_step, 3u);
  ASSERT_TRUE(d.run_to_completion());
  EXPECT_EQ(d.scheduler().stats().prefill_tokens, 24u + 3 * 4);
  for (SeqId id = 1; id <= 4; ++id) EXPECT_EQ(d.records()[id].generated, d.reference(id));
  d.expect_all_released();
}

// With nothing decoding, the prefill budget only bounds how long arrivals wait (the engine's idle
// step bound), so requests joining the step that writes their prefix go past it; once a sequence
// decodes, the budget protects its stream and they wait for the next step.
TEST(PrefixScheduler, JoinersGoPastThePrefillBudgetOnlyWhileNothingDecodes) {
  Driver d(config(64), 32, 4, FakeModel{}, {}, kCache);
  for (SeqId id = 1; id <= 3; ++id) d.submit(request_with(id, tokens(20), 4, 2));
  d.scheduler().set_prefill_token_budget(24);
  EXPECT_EQ(items_of(d.step()),
            (Items{{1, P, 0, 24, true}, {2, P, 20, 4, true}, {3, P, 20, 4, true}}));
  // 1-3 decode now: 5 could join 4, which writes their shared prefix, but 4 takes the budget.
  d.submit(request_with(4, tokens(20, 500), 4, 2));
  d.submit(request_with(5, tokens(20, 500), 4, 2));
  EXPECT_EQ(
      items_of(d.step()),
      (Items{{1, D, 24, 1, true}, {2, D, 24, 1, true}, {3, D, 24, 1, true}, {4, P, 0, 24, true}}));
  EXPECT_EQ(items_of(d.step()), (Items{{4, D, 24, 1, true}, {5, P, 20, 4, true}}))
      << "1-3 have generated their 2 tokens; 5 is a cache hit on the pages 4 wrote";
  ASSERT_TRUE(d.run_to_completion());
  for (SeqId id = 1; id <= 5; ++id) EXPECT_EQ(d.records()[id].generated, d.reference(id));
  d.expect_all_released();
}

// A compressed sequence's pages are compacted in place and never registered: a request with the
// same prompt neither waits for them nor shares them.
TEST(PrefixScheduler, NoOneWaitsForOrSharesThePagesOfACompressedPrefill) {
  SchedulerConfig c = config(12);
  c.long_prefill_token_threshold = 8;
  c.max_num_partial_prefills = 2;
  c.kv_compress.min_tokens = 16;
  c.kv_compress.sink_tokens = 2;
  c.kv_compress.recent_tokens = 8;
  c.kv_compress.metric_window = 4;
  Driver d(c, 16, 4, FakeModel{}, {}, kCache);
  SequenceRequest compressed = request_with(1, tokens(24), 0, 2);
  compressed.kv_keep = 0.5;
  d.submit(compressed);
  d.submit(request_with(2, tokens(24), 0, 2));
  StepPlan s = d.step();
  EXPECT_EQ(items_of(s), (Items{{1, P, 0, 8, false}, {2, P, 0, 4, false}}));
  EXPECT_EQ(d.scheduler().stats().prefix_waits, 0u);
  EXPECT_EQ(d.scheduler().stats().prefix_shared_in_step, 0u);
  ASSERT_TRUE(d.run_to_completion());
  EXPECT_EQ(d.records()[1].generated, d.reference(1));
  EXPECT_EQ(d.records()[2].generated, d.reference(2));
  d.expect_all_released();
}

// Guaranteed admission needs the sequence's worst case beyond its shared pages, plus the shared
// pages that leave the cached list; a page shared with a running sequence costs nothing.
TEST(PrefixScheduler, GuaranteedAdmissionCountsSharedPagesOnce) {
  for (bool cache : {false, true}) {
    SCOPED_TRACE(cache ? "cache on" : "cache off");
    Driver d(config(32), 10, 4, FakeModel{}, {}, cache ? kCache : std::nullopt);
    d.submit(request_with(1, tokens(16), 0, 4));  // 20 tokens: 5 pages
    EXPECT_EQ(items_of(d.step()), (Items{{1, P, 0, 16, true}}));
    EXPECT_EQ(d.kv().num_available_pages(), 5);
    d.submit(request_with(2, tokens(16), 4, 4));  // 24 tokens: 6 pages
    StepPlan s = d.step();
    if (!cache) {
      EXPECT_EQ(items_of(s), (Items{{1, D, 16, 1, true}})) << "6 pages needed, 5 available";
    } else {
      EXPECT_EQ(items_of(s), (Items{{1, D, 16, 1, true}, {2, P, 16, 4, true}}));
      EXPECT_EQ(pages_of(s, 1), (Pages{0, 1, 2, 3, 5}));
      EXPECT_EQ(d.kv().reserved_pages(2), 1) << "6 pages: 4 shared, 1 bound, 1 reserved";
      EXPECT_EQ(d.kv().num_available_pages(), 3);
    }
    ASSERT_TRUE(d.run_to_completion());
    EXPECT_EQ(d.records()[2].generated, d.reference(2));
    d.expect_all_released();
  }
}

TEST(PrefixScheduler, CachedPagesCountAsFreeAndAreEvictedLeastRecentFirst) {
  Driver d(config(64), 10, 4, FakeModel{}, {}, kCache);
  d.submit(request_with(1, tokens(16), 0, 1));
  ASSERT_TRUE(d.run_to_completion());
  d.submit(request_with(2, tokens(8, 500), 0, 1));
  ASSERT_TRUE(d.run_to_completion());
  // 1 left its full pages 3, 2, 1, 0 in that order (deepest first), then 2 (a miss) left 5, 4.
  EXPECT_EQ(d.kv().cached_pages_in_order(), (Pages{3, 2, 1, 0, 5, 4}));
  EXPECT_EQ(d.kv().num_free_pages(), 4);
  // 36 + 4 tokens need all 10 pages: admitted, since cached pages count as free; the 4 free pages
  // go first, then the cached ones in order.
  d.submit(request_with(3, tokens(36, 700), 0, 4));
  StepPlan s = d.step();
  EXPECT_EQ(items_of(s), (Items{{3, P, 0, 36, true}}));
  EXPECT_EQ(pages_of(s, 0), (Pages{6, 7, 8, 9, 3, 2, 1, 0, 5}));
  EXPECT_EQ(d.prefix_cache()->stats().evictions, 5u);
  EXPECT_EQ(d.kv().cached_pages_in_order(), (Pages{4}));
  ASSERT_TRUE(d.run_to_completion());
  d.expect_all_released();
}

TEST(PrefixScheduler, ACancelledPrefillLeavesItsWrittenFullPagesCached) {
  Driver d(config(8), 16, 4, FakeModel{}, {}, kCache);
  d.submit(request_with(1, tokens(20), 0, 2));
  EXPECT_EQ(items_of(d.step()), (Items{{1, P, 0, 8, false}}));
  ASSERT_TRUE(d.cancel(1));
  EXPECT_EQ(d.kv().cached_pages_in_order(), (Pages{1, 0}));
  d.submit(request_with(2, tokens(20), 0, 2));
  StepPlan s = d.step();
  EXPECT_EQ(items_of(s), (Items{{2, P, 8, 8, false}}));
  EXPECT_EQ(pages_of(s, 0), (Pages{0, 1, 2, 3}));
  ASSERT_TRUE(d.run_to_completion());
  EXPECT_EQ(d.records()[2].generated, d.reference(2));
  d.expect_all_released();
}

TEST(PrefixScheduler, NamespacesDoNotShare) {
  Driver d(config(16), 16, 4, FakeModel{}, {}, kCache);
  d.submit(request_with(1, tokens(12), 0, 1));
  ASSERT_TRUE(d.run_to_completion());
  SequenceRequest other = request_with(2, tokens(12), 0, 1);
  other.cache_namespace = 7;
  d.submit(other);
  EXPECT_EQ(items_of(d.step()), (Items{{2, P, 0, 12, true}}));
  d.expect_all_released();
}

// A forced collision in the scheduler: every page hashes alike; prompts that differ only in a
// later page share only what is really equal, and every read is verified by the fake executor.
uint64_t colliding_hash(uint64_t, std::span<const TokenId>) { return 7; }

TEST(PrefixScheduler, AForcedHashCollisionReusesOnlyEqualPages) {
  Driver d(config(16), 16, 4, FakeModel{}, {}, std::optional<PrefixHashFn>(colliding_hash));
  d.submit(request_with(1, tokens(12), 0, 1));
  ASSERT_TRUE(d.run_to_completion());
  std::vector<TokenId> prompt = tokens(12);
  prompt[5] = 999;  // differs in the second page
  d.submit(request_with(2, prompt, 0, 1));
  EXPECT_EQ(items_of(d.step()), (Items{{2, P, 4, 8, true}}));
  d.submit(request_with(3, tokens(12, 101), 0, 1));  // differs everywhere
  EXPECT_EQ(items_of(d.step()), (Items{{3, P, 0, 12, true}}));
  EXPECT_EQ(d.records()[2].generated, d.reference(2));
  d.expect_all_released();
}

}  // namespace
}  // namespace drift
