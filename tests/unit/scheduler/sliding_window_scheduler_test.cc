// Sliding-window KV groups in the scheduler, on the fake executor (which fails any read of a
// freed page, and checks every read a window needs): exactly which pages leave a sliding group
// after which step, a guaranteed sequence's promise kept through it, more long sequences at once
// in the same bytes, a prefix hit that shares a sliding group's window only, and KV-Compress on a
// hybrid layout (every group compacted alike, nothing freed by window).
#include <gtest/gtest.h>

#include <vector>

#include "fake_executor.h"
#include "plan_views.h"
#include "scheduler/engine_scheduler.h"

namespace drift {
namespace {

using testing::Driver;
using testing::FakeModel;
using testing::make_request;
using Pages = std::vector<PageId>;
constexpr PageId X = kNoPage;
const std::vector<KVGroup> kFullAndSliding8 = {{0}, {8}};  // a query at p sees p-7 .. p

Pages pages_of(KVCacheManager& kv, SeqId seq, int32_t group) {
  auto span = kv.pages(seq, group);
  return Pages(span.begin(), span.end());
}

SchedulerConfig chunks_of(int32_t tokens) {
  SchedulerConfig c;
  c.max_num_batched_tokens = 64;
  c.long_prefill_token_threshold = tokens;
  c.max_num_seqs = 16;
  c.max_model_len = 128;
  return c;
}

TEST(SlidingWindowScheduler, PagesLeaveTheSlidingGroupAfterTheStepThatPassesThem) {
  Driver d(chunks_of(8), 64, 4, FakeModel{}, {}, std::nullopt, kFullAndSliding8);
  d.submit(make_request(1, 20, 6));
  KVCacheManager& kv = d.kv();
  // Worst case: 26 tokens, 7 pages in group 0; the sliding group at most the pages of
  // 7 + 8 positions from anywhere in a page: 5.
  d.step();  // prefill 0-7; the next query (8) sees 1..8: nothing to free
  EXPECT_EQ(pages_of(kv, 1, 0), (Pages{0, 1}));
  EXPECT_EQ(pages_of(kv, 1, 1), (Pages{2, 3}));
  EXPECT_EQ(kv.reserved_pages(1), 12 - 4);
  StepPlan p = d.step();  // 8-15; the next query (16) sees 9..16: pages 0, 1 (0..7) go
  EXPECT_EQ(testing::pages_of(p, 0), (Pages{0, 1, 4, 5, 2, 3, 6, 7}));  // [group][page]
  EXPECT_EQ(pages_of(kv, 1, 1), (Pages{X, X, 6, 7}));
  EXPECT_EQ(kv.refcount(2), 0);
  EXPECT_EQ(kv.refcount(3), 0);
  Pages free = kv.free_pages_in_order();
  EXPECT_EQ(Pages(free.end() - 2, free.end()), (Pages{2, 3}));
  EXPECT_EQ(kv.promised_pages(1), 12) << "the freed pages came back as reservation";
  p = d.step();  // 16-19, the prompt's end: the next query (20) sees 13..20: page 2 (8..11) goes
  EXPECT_EQ(testing::items_of(p), (std::vector<testing::ItemView>{{1, testing::P, 16, 4, true}}));
  EXPECT_EQ(testing::pages_of(p, 0), (Pages{0, 1, 4, 5, 8, X, X, 6, 7, 9}));
  EXPECT_EQ(pages_of(kv, 1, 1), (Pages{X, X, X, 7, 9}));
  EXPECT_EQ(kv.held_pages(1), 5 + 2);
  d.step();  // decode 20 (page 5): the next query (21) sees 14..21
  d.step();  // decode 21
  EXPECT_EQ(pages_of(kv, 1, 1), (Pages{X, X, X, 7, 9, 11}));
  d.step();  // decode 22: the next query (23) sees 16..23: page 3 (12..15) goes
  EXPECT_EQ(pages_of(kv, 1, 1), (Pages{X, X, X, X, 9, 11}));
  EXPECT_EQ(kv.promised_pages(1), 12);
  ASSERT_TRUE(d.run_to_completion());
  EXPECT_EQ(d.records().at(1).generated, d.reference(1));
  d.expect_all_released();
}

// 16 requests of 44 + 20 tokens. Without freeing, a sequence holds its 16 pages in both groups
// (one group of double pages: the same bytes); freeing, 16 + 5. In 84 pages, 4 run at once
// instead of 2, with the same outputs.
int32_t most_running(std::vector<KVGroup> groups, int32_t num_pages,
                     std::map<SeqId, std::vector<TokenId>>& outputs) {
  SchedulerConfig c = chunks_of(8);
  c.max_num_partial_prefills = 16;
  Driver d(c, num_pages, 4, FakeModel{}, {}, std::nullopt, std::move(groups));
  for (SeqId id = 1; id <= 16; ++id) d.submit(make_request(id, 44, 20));
  int32_t most = 0;
  for (int i = 0; i < 5000 && d.scheduler().has_unfinished(); ++i) {
    d.step();
    most = std::max(most, d.scheduler().num_running());
  }
  EXPECT_FALSE(d.scheduler().has_unfinished());
  for (auto& [id, r] : d.records()) {
    EXPECT_EQ(r.generated, d.reference(id)) << id;
    outputs[id] = r.generated;
  }
  EXPECT_EQ(d.scheduler().capacity_stats().preempted, 0u);
  d.expect_all_released();
  return most;
}

TEST(SlidingWindowScheduler, GuaranteedAdmissionRunsMoreLongSequencesInTheSameBytes) {
  std::map<SeqId, std::vector<TokenId>> one_group, hybrid;
  EXPECT_EQ(most_running({}, 42, one_group), 2);  // 42 pages of both groups' layers
  EXPECT_EQ(most_running(kFullAndSliding8, 84, hybrid), 4);
  EXPECT_EQ(hybrid, one_group);
}

TEST(SlidingWindowScheduler, APrefixHitSharesOnlyTheWindowOfTheSlidingGroup) {
  Driver d(chunks_of(8), 64, 4, FakeModel{}, {}, default_prefix_hash, kFullAndSliding8);
  SequenceRequest first = make_request(1, 40, 2);
  d.submit(first);
  Pages first_group0, first_sliding;  // as the first sequence last held them
  while (d.scheduler().has_unfinished()) {
    first_group0 = pages_of(d.kv(), 1, 0);
    first_sliding = pages_of(d.kv(), 1, 1);
    d.step();
  }
  ASSERT_EQ(first_sliding.size(), 10u);  // 40 tokens before its last step
  first_group0.resize(10);
  // The same 40 tokens and 4 more: a hit of 10 pages; resuming at 40, the sliding group needs
  // what 40 sees (33..40): pages 8 and 9 (32..39) of the first sequence's.
  SequenceRequest second = make_request(2, 44, 2);
  std::copy(first.prompt.begin(), first.prompt.end(), second.prompt.begin());
  d.submit(second);
  const StepPlan& p = d.scheduler().schedule_step();  // admitted, not yet run
  ASSERT_EQ(p.items.size(), 1u);
  EXPECT_EQ(p.items[0].start_position, 40);
  const Pages g0 = pages_of(d.kv(), 2, 0), g1 = pages_of(d.kv(), 2, 1);
  EXPECT_EQ(Pages(g0.begin(), g0.begin() + 10), first_group0);
  EXPECT_EQ(Pages(g1.begin(), g1.begin() + 10),
            (Pages{X, X, X, X, X, X, X, X, first_sliding[8], first_sliding[9]}));
  d.step();  // runs it: the fake executor reads 33..39 through them
  EXPECT_EQ(d.prefix_cache()->stats().hit_tokens, 40u);
  ASSERT_TRUE(d.run_to_completion());
  EXPECT_EQ(d.records().at(2).generated, d.reference(2));
  d.expect_all_released();
}

// A request joining the step in which a running prefill writes its prefix (EngineScheduler::
// try_admit) holds in each group what it would had it computed that prefix: in the full group
// every page, in the sliding group only the window of its first query — not the cached hit's
// window pages that fall below it — and the writer's pages of this step, which the writer drops
// after the step and the joiner keeps (and then pays for).
TEST(SlidingWindowScheduler, ARequestJoiningTheStepThatWritesItsPrefixSharesEachGroupsWindow) {
  SchedulerConfig c = chunks_of(8);
  c.max_num_partial_prefills = 2;
  Driver d(c, 64, 4, FakeModel{}, {}, default_prefix_hash, kFullAndSliding8);
  const SequenceRequest writer = make_request(1, 40, 2);
  d.submit(writer);
  d.step();  // 0-7
  d.step();  // 8-15; its next query (16) sees 9..16: its sliding pages 0 and 1 go
  KVCacheManager& kv = d.kv();
  ASSERT_EQ(pages_of(kv, 1, 1), (Pages{X, X, 6, 7}));
  // The writer's first 24 tokens and 4 of its own: pages 0-3 are a hit (the sliding group's
  // window at 16 is pages 2 and 3), pages 4 and 5 the writer computes in the next step.
  SequenceRequest joiner = make_request(2, 28, 8);
  std::copy(writer.prompt.begin(), writer.prompt.begin() + 24, joiner.prompt.begin());
  d.submit(joiner);
  const StepPlan p = d.step();
  EXPECT_EQ(testing::items_of(p), (std::vector<testing::ItemView>{{1, testing::P, 16, 8, false},
                                                                  {2, testing::P, 24, 4, true}}));
  EXPECT_EQ(d.scheduler().stats().prefix_shared_in_step, 1u);
  EXPECT_EQ(d.scheduler().stats().prefix_waits, 0u);
  // [group][page]: the writer's as it held them in the step.
  EXPECT_EQ(testing::pages_of(p, 0), (Pages{0, 1, 4, 5, 8, 9, X, X, 6, 7, 10, 11}));
  // Resuming at 24, the joiner sees 17..24: of the sliding group only the writer's pages 4 and
  // 5 (16..23), not 2 and 3 (8..15), which the hit alone would have given.
  EXPECT_EQ(testing::pages_of(p, 1), (Pages{0, 1, 4, 5, 8, 9, 12, X, X, X, X, 10, 11, 13}));
  // After the step the writer (next query at 24) drops its sliding pages 2 and 3; the joiner
  // (at 28: 21..28) drops page 4, which the writer keeps.
  EXPECT_EQ(pages_of(kv, 1, 1), (Pages{X, X, X, X, 10, 11}));
  EXPECT_EQ(pages_of(kv, 2, 1), (Pages{X, X, X, X, X, 11, 13}));
  EXPECT_EQ(kv.refcount(11), 2);
  EXPECT_EQ(kv.payer(11), SeqId{1});
  const int64_t promised = kv.promised_pages(2);
  d.step();  // the writer, 24-31, drops page 5 (11): the joiner, which still reads it, keeps it
  EXPECT_EQ(pages_of(kv, 1, 1).size(), 8u);
  EXPECT_EQ(pages_of(kv, 1, 1)[5], X);
  EXPECT_EQ(pages_of(kv, 2, 1), (Pages{X, X, X, X, X, 11, 13, 15}));  // decoding 28
  EXPECT_EQ(kv.refcount(11), 1);
  EXPECT_EQ(kv.payer(11), SeqId{2}) << "the payment moved to the holder that stays";
  EXPECT_EQ(kv.promised_pages(2), promised) << "paid from its reservation";
  ASSERT_TRUE(d.run_to_completion());
  EXPECT_EQ(d.records().at(1).generated, d.reference(1));
  EXPECT_EQ(d.records().at(2).generated, d.reference(2));
  EXPECT_EQ(d.scheduler().stats().prefill_tokens, 40u + 4u);
  d.expect_all_released();
}

// While nothing decodes, a joiner's suffix goes past the step's prefill budget, but not past a
// chunk (long_prefill_token_threshold): that bounds what a sliding group holds beside its window
// (SchedulerConfig::max_step_tokens), which guaranteed admission promised.
TEST(SlidingWindowScheduler, AJoinerGoesPastThePrefillBudgetButNotPastAChunk) {
  SchedulerConfig c = chunks_of(8);
  c.max_num_partial_prefills = 2;
  Driver d(c, 64, 4, FakeModel{}, {}, default_prefix_hash, kFullAndSliding8);
  const SequenceRequest writer = make_request(1, 40, 2);
  d.submit(writer);
  d.step();                                         // 0-7
  d.step();                                         // 8-15
  SequenceRequest joiner = make_request(2, 48, 2);  // 24 of the writer's tokens, 24 of its own
  std::copy(writer.prompt.begin(), writer.prompt.begin() + 24, joiner.prompt.begin());
  d.submit(joiner);
  d.scheduler().set_prefill_token_budget(8);  // the writer's chunk takes it all
  EXPECT_EQ(testing::items_of(d.step()),
            (std::vector<testing::ItemView>{{1, testing::P, 16, 8, false},
                                            {2, testing::P, 24, 8, false}}));
  EXPECT_EQ(d.scheduler().stats().prefix_shared_in_step, 1u);
  ASSERT_TRUE(d.run_to_completion());
  EXPECT_EQ(d.records().at(1).generated, d.reference(1));
  EXPECT_EQ(d.records().at(2).generated, d.reference(2));
  d.expect_all_released();
}

TEST(SlidingWindowScheduler, KvCompressCompactsEveryGroupAlikeAndFreesNothingByWindow) {
  SchedulerConfig c = chunks_of(8);
  c.kv_compress.keep = 0.5;
  c.kv_compress.policy = KvEvictPolicy::kWindow;
  c.kv_compress.min_tokens = 16;
  c.kv_compress.sink_tokens = 2;
  c.kv_compress.recent_tokens = 8;
  c.kv_compress.metric_window = 4;
  c.max_num_partial_prefills = 2;
  Driver d(c, 64, 4, FakeModel{}, {}, std::nullopt, kFullAndSliding8);
  for (SeqId id : {1, 2}) {
    SequenceRequest r = make_request(id, 40, 8);
    r.kv_keep = c.kv_compress.keep;  // as the engine's judge resolves a request that gives none
    d.submit(r);
  }
  for (int i = 0; i < 3; ++i) d.step();  // 24 positions each: compressed to 12 after the step
  for (SeqId id : {1, 2}) {
    EXPECT_EQ(pages_of(d.kv(), id, 0).size(), 3u);
    EXPECT_EQ(pages_of(d.kv(), id, 1).size(), 3u);
    EXPECT_NE(pages_of(d.kv(), id, 1)[0], X) << "a compressed sequence frees nothing by window";
  }
  ASSERT_TRUE(d.run_to_completion());
  EXPECT_GT(d.executor().compressions_run(), 4);
  for (SeqId id : {1, 2}) EXPECT_EQ(d.records().at(id).generated, d.reference(id));
  d.expect_all_released();
}

}  // namespace
}  // namespace drift
