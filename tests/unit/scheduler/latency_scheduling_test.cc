// Scheduling for latency: the prefill token budget the engine sets from its targets, room for a
// short prompt beside a long prefill, small requests passing a large one blocked on KV, and
// bounded waits under a flood of small requests.
#include <gtest/gtest.h>

#include "fake_executor.h"
#include "plan_views.h"
#include "scheduler/engine_scheduler.h"

namespace drift {
namespace {

using testing::D;
using testing::Driver;
using testing::FakeModel;
using testing::items_of;
using testing::ItemView;
using testing::make_request;
using testing::P;

SchedulerConfig config(int32_t batched_tokens, int32_t seqs, int32_t max_model_len) {
  SchedulerConfig c;
  c.max_num_batched_tokens = batched_tokens;
  c.max_num_seqs = seqs;
  c.max_model_len = max_model_len;
  return c;
}

TEST(LatencyScheduling, APrefillBudgetCutsTheChunkButNotTheDecodes) {
  Driver d(config(64, 4, 256), 64, 4, FakeModel{}, {});
  d.submit(make_request(1, 6, 20));
  d.step();  // request 1 prefilled whole, decodes from now on
  d.submit(make_request(2, 100, 2));
  d.scheduler().set_prefill_token_budget(10);
  EXPECT_EQ(items_of(d.step()), (std::vector<ItemView>{{1, D, 6, 1, true}, {2, P, 0, 10, false}}));
  EXPECT_EQ(items_of(d.step()), (std::vector<ItemView>{{1, D, 7, 1, true}, {2, P, 10, 10, false}}));
  d.scheduler().set_prefill_token_budget(1000);  // clamped to the step budget
  EXPECT_EQ(d.scheduler().prefill_token_budget(), 64);
  EXPECT_EQ(items_of(d.step()), (std::vector<ItemView>{{1, D, 8, 1, true}, {2, P, 20, 63, false}}));
  d.scheduler().set_prefill_token_budget(0);  // clamped to 1: prefill never stops
  EXPECT_EQ(items_of(d.step()), (std::vector<ItemView>{{1, D, 9, 1, true}, {2, P, 83, 1, false}}));
  ASSERT_TRUE(d.run_to_completion());
  EXPECT_EQ(d.records()[2].generated, d.reference(2));
  d.expect_all_released();
}

TEST(LatencyScheduling, TheLoadNamesWhatTheNextStepWillCost) {
  Driver d(config(64, 4, 256), 64, 4, FakeModel{}, {});
  d.submit(make_request(1, 6, 20));
  d.step();
  d.submit(make_request(2, 100, 2));
  d.scheduler().set_prefill_token_budget(10);
  d.step();  // 1 decodes (now 8 tokens long), 2 has 10 of 100 computed
  d.submit(make_request(3, 30, 2));
  const StepLoad load = d.scheduler().load();
  EXPECT_EQ(load.decoding, 1);
  EXPECT_EQ(load.decode_context, 8);
  EXPECT_EQ(load.prefill_start, 10);
  EXPECT_EQ(load.pending_prefill_tokens, 90 + 30);
  EXPECT_EQ(load.waiting, 1);
}

TEST(LatencyScheduling, AShortPromptIsNotQueuedBehindALongPrefill) {
  SchedulerConfig c = config(64, 4, 256);
  Driver d(c, 64, 4, FakeModel{}, {});
  d.scheduler().set_prefill_token_budget(16);
  d.submit(make_request(1, 100, 2));
  EXPECT_EQ(items_of(d.step()), (std::vector<ItemView>{{1, P, 0, 16, false}}));
  d.submit(make_request(2, 4, 3));
  // The running prefill leaves room for the 4-token prompt (at most half the prefill budget),
  // which starts and samples in this step instead of after the long prompt's 5 more steps.
  EXPECT_EQ(items_of(d.step()), (std::vector<ItemView>{{1, P, 16, 12, false}, {2, P, 0, 4, true}}));
  EXPECT_EQ(items_of(d.step()), (std::vector<ItemView>{{2, D, 4, 1, true}, {1, P, 28, 16, false}}));
  // A prompt longer than half the budget gets no room held: it waits while the long prefill
  // takes the budget.
  d.submit(make_request(3, 9, 3));
  EXPECT_EQ(items_of(d.step()), (std::vector<ItemView>{{2, D, 5, 1, true}, {1, P, 44, 16, false}}));
  ASSERT_TRUE(d.run_to_completion());
  for (SeqId id : {1, 2, 3}) EXPECT_EQ(d.records()[id].generated, d.reference(id));
  d.expect_all_released();
}

// Hardening: with guaranteed admission and a small KV cache, a long request that cannot be
// reserved yet blocked every request behind it, a 4-token one for 30 s and more.
TEST(LatencyScheduling, ASmallRequestPassesALongOneBlockedOnKv) {
  for (int32_t max_overtakes : {32, 0}) {
    SCOPED_TRACE(max_overtakes);
    SchedulerConfig c = config(64, 4, 64);
    c.max_overtakes = max_overtakes;
    // 16 pages of 4 tokens. Request 1 reserves 40 tokens = 10 pages; request 2 needs 10 more and
    // waits for request 1 to finish; request 3 needs 2.
    Driver d(c, 16, 4, FakeModel{}, {});
    d.submit(make_request(1, 30, 10));
    d.submit(make_request(2, 30, 10));
    d.submit(make_request(3, 4, 4));
    const StepPlan s0 = d.step();
    EXPECT_EQ(d.scheduler().find(2)->phase, SequencePhase::kWaiting);
    if (max_overtakes > 0) {
      EXPECT_EQ(items_of(s0), (std::vector<ItemView>{{1, P, 0, 30, true}, {3, P, 0, 4, true}}));
      EXPECT_EQ(d.scheduler().find(2)->times_overtaken, 1);
    } else {
      EXPECT_EQ(items_of(s0), (std::vector<ItemView>{{1, P, 0, 30, true}}));
      EXPECT_EQ(d.scheduler().find(3)->phase, SequencePhase::kWaiting) << "strict order";
    }
    ASSERT_TRUE(d.run_to_completion());
    for (SeqId id : {1, 2, 3}) EXPECT_EQ(d.records()[id].generated, d.reference(id));
    const uint64_t small_wait = *d.records()[3].first_scheduled_step;
    EXPECT_EQ(small_wait, max_overtakes > 0 ? 0u : *d.records()[2].first_scheduled_step);
    d.expect_all_released();
  }
}

// A request blocked on KV under a flood of small requests that fit: they pass it at most
// max_overtakes times, then queue behind it, so it is admitted once running requests release
// their pages — a bounded wait, with and without priorities (the flood ranking higher).
TEST(LatencyScheduling, NoStarvationOfALargeRequestUnderAFloodOfSmallOnes) {
  for (SchedulerPolicy policy : {SchedulerPolicy::kFcfs, SchedulerPolicy::kPriority}) {
    SCOPED_TRACE(scheduler_policy_name(policy));
    SchedulerConfig c = config(64, 8, 64);
    c.policy = policy;
    c.max_overtakes = 8;
    // Under priority the flood ranks first, but aging puts the large request ahead of small ones
    // that arrive more than 4 steps after it.
    c.priority_steps_per_level = 4;
    Driver d(c, 16, 4, FakeModel{}, {});
    SeqId next = 10;
    auto flood = [&](int n) {
      for (int k = 0; k < n; ++k) d.submit(make_request(next++, 4, 4, /*priority=*/1));
    };
    // A steady stream: 2 small requests (2 pages, 4 steps each) arrive every step, so about 8
    // run at any time and they finish 2 a step — never 12 pages free for the large request.
    for (int k = 0; k < 4; ++k) {
      flood(2);
      d.step();
    }
    const SeqId large = 1;
    d.submit(make_request(large, 40, 8, /*priority=*/0));
    int steps = 0;
    for (; steps < 200 && d.scheduler().find(large)->phase == SequencePhase::kWaiting; ++steps) {
      flood(2);  // more than the seats serve: a standing queue of small requests
      d.step();
    }
    EXPECT_LE(d.scheduler().find(large)->times_overtaken, c.max_overtakes);
    // The 8 passes take at most 8 steps (at least one each); after them no small request is
    // admitted, the running ones finish within 4 steps (4 new tokens each), and the large one is
    // admitted. Without the bound it waits as long as the flood lasts (200 steps here).
    EXPECT_LE(steps, c.max_overtakes + 4) << "the large request waited too long";
    EXPECT_NE(d.scheduler().find(large)->phase, SequencePhase::kWaiting);
    ASSERT_TRUE(d.run_to_completion());
    EXPECT_EQ(d.records()[large].generated, d.reference(large));
    d.expect_all_released();
  }
}

}  // namespace
}  // namespace drift
