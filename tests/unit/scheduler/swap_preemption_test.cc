// Tiered preemption (scheduler/preemption_cost.h): the cost model's choice between swapping a
// preempted sequence's pages to the disk tier and recomputing them, and the scheduler over the
// fake executor (tiered_driver.h), whose reads check every page against the reader's history: a
// swapped sequence's pages come back from disk and its output equals a solo run's.
#include <gtest/gtest.h>

#include "scheduler/preemption_cost.h"
#include "tiered_driver.h"

namespace drift {
namespace {

using testing::prompt_of;
using testing::TempDir;
using testing::TieredDriver;

PreemptionCostInputs inputs(double seconds_per_token) {
  PreemptionCostInputs in;
  in.tokens = 1000;
  in.pages = 62;
  in.pages_to_write = 40;
  in.file_bytes = 1'000'000;
  in.disk = {.write_bytes_per_second = 1e9, .read_bytes_per_second = 2e9};
  in.recompute = {.per_prefill_token = seconds_per_token, .per_attended_position = 0};
  return in;
}

TEST(PreemptionCost, PredictsBothWaysFromTheMeasuredFigures) {
  const PreemptionChoice c = choose_preemption(PreemptionPolicy::kAuto, inputs(0.001));
  // 40 MB written at 1 GB/s + 62 MB read at 2 GB/s; 1000 tokens at 1 ms.
  EXPECT_DOUBLE_EQ(c.swap_seconds, 0.04 + 0.031);
  EXPECT_DOUBLE_EQ(c.recompute_seconds, 1.0);
  EXPECT_EQ(c.mode, PreemptionMode::kSwap);
}

TEST(PreemptionCost, RecomputesWhenThatIsFasterOrNotMeasured) {
  EXPECT_EQ(choose_preemption(PreemptionPolicy::kAuto, inputs(0.00001)).mode,
            PreemptionMode::kRecompute)
      << "10 ms of prefill beats 71 ms of disk";
  EXPECT_EQ(choose_preemption(PreemptionPolicy::kAuto, inputs(0)).mode, PreemptionMode::kRecompute)
      << "prefill not measured yet";
  PreemptionCostInputs attention = inputs(0);
  attention.recompute = {.per_prefill_token = 1e-6, .per_attended_position = 2e-7};
  const PreemptionChoice c = choose_preemption(PreemptionPolicy::kAuto, attention);
  EXPECT_DOUBLE_EQ(c.recompute_seconds, 1000 * 1e-6 + 2e-7 * 1000 * 1001 / 2);
  EXPECT_EQ(c.mode, PreemptionMode::kSwap) << "attention's quadratic part makes it 101 ms";
}

TEST(PreemptionCost, AssumesADiskSpeedUntilMeasuredAndObeysThePolicy) {
  PreemptionCostInputs in = inputs(0.001);
  in.disk = {};
  EXPECT_DOUBLE_EQ(choose_preemption(PreemptionPolicy::kAuto, in).swap_seconds,
                   102e6 / kAssumedDiskBytesPerSecond);
  EXPECT_EQ(choose_preemption(PreemptionPolicy::kRecompute, in).mode, PreemptionMode::kRecompute);
  EXPECT_EQ(choose_preemption(PreemptionPolicy::kSwap, inputs(0)).mode, PreemptionMode::kSwap);
  in.pages = 0;
  EXPECT_EQ(choose_preemption(PreemptionPolicy::kSwap, in).mode, PreemptionMode::kRecompute)
      << "no full page: nothing to swap";
  EXPECT_EQ(parse_preemption_policy("swap"), PreemptionPolicy::kSwap);
  EXPECT_EQ(parse_preemption_policy("sometimes"), std::nullopt);
}

SchedulerConfig optimistic(PreemptionPolicy policy) {
  SchedulerConfig c = testing::config();
  c.admission = AdmissionMode::kOptimistic;
  c.preemption = policy;
  return c;
}

std::vector<SequenceRequest> two_long_decodes() {
  // 20 + 24 tokens each, 11 pages of 4: together more than the pool's 16, so the later one is
  // preempted mid-decode when the earlier needs a page.
  std::vector<SequenceRequest> requests(2);
  for (int i = 0; i < 2; ++i) {
    requests[size_t(i)].id = SeqId(i + 1);
    requests[size_t(i)].prompt = prompt_of(20, 100 + 200 * i);
    requests[size_t(i)].max_new_tokens = 24;
  }
  return requests;
}

TEST(SwapPreemption, ASwappedSequenceReadsItsPagesBackAndAnswersAsAlone) {
  TempDir dir;
  TieredDriver d(dir.path, KVDigest{11, 22}, 1 << 20, 16, optimistic(PreemptionPolicy::kSwap));
  std::map<SeqId, std::vector<TokenId>> out = d.run_together(two_long_decodes());
  EXPECT_EQ(out[1], d.reference(1, prompt_of(20, 100), 24));
  EXPECT_EQ(out[2], d.reference(2, prompt_of(20, 300), 24));
  const SchedulerStats& s = d.scheduler().stats();
  ASSERT_GE(d.scheduler().capacity_stats().preempted, 1u);
  EXPECT_EQ(s.preemptions_swapped, d.scheduler().capacity_stats().preempted);
  EXPECT_EQ(s.preemptions_recomputed, 0u);
  ASSERT_TRUE(s.last_preemption.has_value());
  EXPECT_GT(s.last_preemption->swap_seconds, 0);
  EXPECT_GT(d.tier().stats().pages_swapped_out, 0u);
  EXPECT_GT(d.tier().stats().pages_loaded, 0u) << "pages the other sequence took came from disk";
  EXPECT_EQ(d.tier().stats().pages_load_failed, 0u);
  EXPECT_EQ(d.store().stats().writes_dropped, 0u);
  // Its partial last page came back too: re-admitted, it computed only its pending token.
  EXPECT_EQ(d.tier().stats().tails_swapped_out, 1u);
  EXPECT_EQ(d.tier().stats().tails_loaded, 1u);
  EXPECT_EQ(s.swapped_tails_restored, 1u);
  // Each computed its 20 prompt tokens and 23 of its 24 generated ones once: nothing recomputed.
  EXPECT_EQ(s.prefill_tokens + s.decode_tokens, 2 * (20u + 23));
}

TEST(SwapPreemption, RecomputingRedoesThePreemptedSequencesTokens) {
  TempDir dir;
  TieredDriver d(dir.path, KVDigest{11, 22}, 1 << 20, 16, optimistic(PreemptionPolicy::kRecompute));
  std::map<SeqId, std::vector<TokenId>> out = d.run_together(two_long_decodes());
  EXPECT_EQ(out[2], d.reference(2, prompt_of(20, 300), 24));
  const SchedulerStats& s = d.scheduler().stats();
  EXPECT_EQ(s.preemptions_recomputed, 1u);
  EXPECT_EQ(d.tier().stats().swaps, 0u);
  EXPECT_EQ(s.swapped_tails_restored, 0u);
  EXPECT_GT(s.prefill_tokens + s.decode_tokens, 2 * (20u + 23));
}

TEST(SwapPreemption, ASwappedSequenceCancelledWhileItsPagesAreReadLetsGoOfThem) {
  TempDir dir;
  TieredDriver d(dir.path, KVDigest{11, 22}, 1 << 20, 16, optimistic(PreemptionPolicy::kSwap));
  for (SequenceRequest& r : two_long_decodes()) d.scheduler().add(testing::admitted(std::move(r)));
  for (int i = 0; i < 200 && !d.tier().loading_for(2); ++i) d.step();
  ASSERT_TRUE(d.tier().loading_for(2)) << "request 2 swapped out, its pages being read back";
  ASSERT_TRUE(d.scheduler().cancel(2).has_value());
  for (int i = 0; i < 200 && d.scheduler().has_unfinished(); ++i) d.step();
  d.step();  // the last loads complete at a step boundary
  EXPECT_EQ(d.tier().tail_for(2), nullptr);
  EXPECT_EQ(d.tier().num_sequences_held(), 0);
  EXPECT_EQ(d.kv().num_sequences(), 0) << "the partial page's holder let go";
  EXPECT_TRUE(d.kv().check_invariants().ok());
}

TEST(SwapPreemption, TheCostModelChoosesByTheMeasuredPrefillCost) {
  TempDir dir;
  {
    TieredDriver slow_prefill(dir.path, KVDigest{1, 1}, 1 << 20, 16,
                              optimistic(PreemptionPolicy::kAuto));
    slow_prefill.scheduler().set_recompute_costs({.per_prefill_token = 1.0});
    slow_prefill.run_together(two_long_decodes());
    EXPECT_GE(slow_prefill.scheduler().stats().preemptions_swapped, 1u);
    EXPECT_EQ(slow_prefill.scheduler().stats().preemptions_recomputed, 0u);
  }
  TieredDriver fast_prefill(dir.path, KVDigest{2, 2}, 1 << 20, 16,
                            optimistic(PreemptionPolicy::kAuto));
  fast_prefill.scheduler().set_recompute_costs({.per_prefill_token = 1e-12});
  std::map<SeqId, std::vector<TokenId>> out = fast_prefill.run_together(two_long_decodes());
  EXPECT_EQ(out[2], fast_prefill.reference(2, prompt_of(20, 300), 24));
  const SchedulerStats& s = fast_prefill.scheduler().stats();
  EXPECT_EQ(s.preemptions_swapped, 0u);
  EXPECT_GE(s.preemptions_recomputed, 1u);
  EXPECT_GT(s.predicted_swap_seconds, s.predicted_recompute_seconds);
  EXPECT_EQ(fast_prefill.tier().stats().pages_swapped_out, 0u);
}

}  // namespace
}  // namespace drift
