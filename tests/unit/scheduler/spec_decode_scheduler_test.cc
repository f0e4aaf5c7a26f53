// Speculative decoding in the scheduler, on the fake executor (which verifies drafts against its
// model one position at a time, fails any read of a slot that does not hold the reader's own
// token, and checks the KV invariants after every step): the output is exactly what decoding one
// token a step gives, alone, batched, under preemption, with a prefix cache and with sliding
// groups, while drafts are both accepted and rejected; rejected drafts' pages go back to the
// pool; drafts shrink as the batch grows; and the n-gram drafter and the adaptive draft length.
#include <gtest/gtest.h>

#include <vector>

#include "fake_executor.h"
#include "kv/prefix_cache.h"
#include "scheduler/adaptive_draft_length.h"
#include "scheduler/engine_scheduler.h"
#include "scheduler/ngram_drafter.h"

namespace drift {
namespace {

using testing::Driver;
using testing::FakeModel;
using testing::make_request;

// A model whose output soon repeats (the next token depends on the last three), so that n-gram
// drafts (from two tokens) are often right and sometimes wrong.
FakeModel repetitive_model() { return FakeModel{.vocab = 12, .eos = 0, .order = 3}; }

SchedulerConfig spec_config(SpecMode mode = SpecMode::kNgram) {
  SchedulerConfig c;
  c.max_num_batched_tokens = 64;
  c.max_num_seqs = 8;
  c.max_model_len = 256;
  c.spec.mode = mode;
  return c;
}

// Runs the requests to completion and checks every output against the model's one-at-a-time
// reference and every page back in the pool.
void expect_outputs_match_reference(Driver& d, SeqId first, SeqId last) {
  ASSERT_TRUE(d.run_to_completion());
  for (SeqId id = first; id <= last; ++id) {
    const testing::RequestRecord& r = d.records().at(id);
    EXPECT_NE(r.finish, FinishReason::kError) << r.message;
    EXPECT_EQ(r.generated, d.reference(id)) << "sequence " << id;
  }
  d.expect_all_released();
}

TEST(SpecDecodeScheduler, OutputOfOneSequenceIsThatOfOneTokenAStep) {
  Driver d(spec_config(), 64, 4, repetitive_model(), {});
  d.submit(make_request(1, 10, 120));
  expect_outputs_match_reference(d, 1, 1);
  const SchedulerStats& s = d.scheduler().stats();
  EXPECT_GT(s.spec_accepted_tokens, 0u) << "drafts were accepted";
  EXPECT_GT(s.spec_draft_tokens, s.spec_accepted_tokens) << "and some rejected (rolled back)";
  EXPECT_EQ(s.spec_accepted_by_position[0] >= s.spec_accepted_by_position[1], true);
  // Fewer steps than tokens: each accepted draft saved one.
  EXPECT_LT(d.executor().steps_run(), 120u);
}

TEST(SpecDecodeScheduler, WithSpeculationOffDecodesCarryNoDrafts) {
  Driver d(spec_config(SpecMode::kNone), 64, 4, repetitive_model(), {});
  d.submit(make_request(1, 10, 60));
  expect_outputs_match_reference(d, 1, 1);
  EXPECT_EQ(d.scheduler().stats().spec_draft_tokens, 0u);
}

TEST(SpecDecodeScheduler, BatchedOptimisticUnderPreemptionWithPrefixCache) {
  SchedulerConfig c = spec_config();
  c.admission = AdmissionMode::kOptimistic;
  // 40 pages of 4 tokens for six sequences of up to 100 tokens: preemption is certain.
  Driver d(c, 40, 4, repetitive_model(), {}, default_prefix_hash);
  for (SeqId id = 1; id <= 6; ++id) {
    SequenceRequest r = make_request(id, 8 + int32_t(id) * 3, 80);
    // Two share a prompt, so their pages meet in the prefix cache.
    if (id == 4) r.prompt = d.records().at(3).request.prompt;
    d.submit(std::move(r));
  }
  expect_outputs_match_reference(d, 1, 6);
  EXPECT_GT(d.scheduler().capacity_stats().preempted, 0u);
  EXPECT_GT(d.scheduler().stats().spec_accepted_tokens, 0u);
}

TEST(SpecDecodeScheduler, GuaranteedSequencesKeepTheirPromiseThroughRollbacks) {
  Driver d(spec_config(), 64, 4, repetitive_model(), {});
  for (SeqId id = 1; id <= 3; ++id) d.submit(make_request(id, 9, 70));
  // check_invariants (after every step) fails if a guaranteed sequence's promise shrank.
  expect_outputs_match_reference(d, 1, 3);
  EXPECT_GT(d.scheduler().stats().spec_draft_tokens, d.scheduler().stats().spec_accepted_tokens);
}

TEST(SpecDecodeScheduler, SlidingGroupsFreeByCommittedPositionsOnly) {
  const std::vector<KVGroup> full_and_sliding8 = {{0}, {8}};
  Driver d(spec_config(), 96, 4, repetitive_model(), {}, default_prefix_hash, full_and_sliding8);
  for (SeqId id = 1; id <= 2; ++id) d.submit(make_request(id, 12, 90));
  expect_outputs_match_reference(d, 1, 2);
  EXPECT_GT(d.scheduler().stats().spec_accepted_tokens, 0u);
}

TEST(SpecDecodeScheduler, RejectedDraftsReturnTheirPagesAfterTheStep) {
  Driver d(spec_config(), 64, 4, repetitive_model(), {});
  d.submit(make_request(1, 10, 200));
  KVCacheManager& kv = d.kv();
  bool saw_rollback = false;
  for (int i = 0; i < 300 && d.scheduler().has_unfinished(); ++i) {
    const StepPlan plan = d.step();
    const SequenceState* seq = d.scheduler().find(1);
    if (plan.items.empty() || seq == nullptr || plan.items[0].num_drafts == 0) continue;
    // After the step the sequence holds exactly the K/V of its committed tokens but the last,
    // in the pages those need: none of a rejected draft's.
    EXPECT_EQ(kv.num_tokens(1), seq->total_len() - 1);
    EXPECT_EQ(int64_t(kv.pages(1).size()), kv.layout().pages_for_tokens(seq->total_len() - 1));
    saw_rollback |= plan.items[0].context_len() > seq->total_len() - 1;
  }
  EXPECT_TRUE(saw_rollback) << "a draft was rejected at least once";
}

TEST(SpecDecodeScheduler, DraftsShrinkAsTheBatchGrowsAndVanishWhenItIsLarge) {
  SchedulerConfig c = spec_config();
  c.max_num_batched_tokens = 256;
  c.max_num_seqs = 40;
  c.spec.max_step_draft_tokens = 32;
  Driver d(c, 1024, 4, repetitive_model(), {});
  // 36 sequences whose prompts repeat themselves, so every one has a draft to offer.
  for (SeqId id = 1; id <= 36; ++id) {
    SequenceRequest r = make_request(id, 4, 60);
    const std::vector<TokenId> head = r.prompt;
    for (int k = 0; k < 3; ++k) r.prompt.insert(r.prompt.end(), head.begin(), head.end());
    d.submit(std::move(r));
  }
  for (int i = 0; i < 12; ++i) {
    const StepPlan plan = d.step();
    const int32_t decoding = plan.num_decode_tokens;
    EXPECT_LE(plan.num_draft_tokens, std::max(0, c.spec.max_step_draft_tokens - decoding))
        << "step " << plan.step << " with " << decoding << " decodes";
    if (decoding >= c.spec.max_step_draft_tokens) EXPECT_EQ(plan.num_draft_tokens, 0);
  }
  EXPECT_EQ(d.scheduler().stats().spec_draft_tokens, 0u) << "36 decoding: no step was spare";
  ASSERT_TRUE(d.run_to_completion());
  EXPECT_GT(d.scheduler().stats().spec_draft_tokens, 0u) << "once few remain, they draft";
  for (SeqId id = 1; id <= 36; ++id) EXPECT_EQ(d.records().at(id).generated, d.reference(id));
}

TEST(SpecDecodeScheduler, KvCompressedSequencesDoNotSpeculate) {
  SchedulerConfig c = spec_config();
  c.kv_compress.min_tokens = 16;
  c.kv_compress.recent_tokens = 8;
  c.kv_compress.metric_window = 8;
  Driver d(c, 64, 4, repetitive_model(), {});
  SequenceRequest r = make_request(1, 10, 80);
  r.kv_keep = 0.5;
  d.submit(std::move(r));
  ASSERT_TRUE(d.run_to_completion());
  EXPECT_EQ(d.scheduler().stats().spec_draft_tokens, 0u);
}

TEST(SpecDecodeScheduler, NoDraftPastTheTokenLimit) {
  Driver d(spec_config(), 64, 4, repetitive_model(), {});
  d.submit(make_request(1, 10, 37));
  expect_outputs_match_reference(d, 1, 1);
  EXPECT_EQ(d.records().at(1).generated.size(), 37u);
  EXPECT_EQ(d.records().at(1).finish, FinishReason::kLength);
}

TEST(NgramDrafter, ProposesWhatFollowedTheLongestMostRecentMatch) {
  const NgramDraftConfig config{.min_ngram = 2, .max_ngram = 4, .lookback = 100};
  std::vector<TokenId> out(4);
  // Suffix "7 8" occurred at 1-2 (followed by 9 1) and at 5-6 (followed by 3): the longer match
  // "2 7 8" (at 4-6) wins over the older.
  const std::vector<TokenId> tokens = {5, 7, 8, 9, 2, 7, 8, 3, 4, 2, 7, 8};
  ASSERT_EQ(propose_ngram_draft(tokens, config, out), 4);
  EXPECT_EQ(out, (std::vector<TokenId>{3, 4, 2, 7}));
  // Shorter room: shorter draft.
  std::vector<TokenId> two(2);
  ASSERT_EQ(propose_ngram_draft(tokens, config, two), 2);
  EXPECT_EQ(two, (std::vector<TokenId>{3, 4}));
  // A single repeated token is not enough (min_ngram 2).
  EXPECT_EQ(propose_ngram_draft(std::vector<TokenId>{1, 2, 3, 4, 2}, config, out), 0);
  // Outside the lookback window: no match.
  const NgramDraftConfig near{.min_ngram = 2, .max_ngram = 4, .lookback = 3};
  EXPECT_EQ(propose_ngram_draft(std::vector<TokenId>{1, 2, 9, 9, 9, 9, 5, 1, 2}, near, out), 0);
  // The continuation may run into the suffix itself (a periodic text).
  const std::vector<TokenId> periodic = {1, 2, 1, 2, 1, 2};
  ASSERT_EQ(propose_ngram_draft(periodic, config, out), 2);
  EXPECT_EQ(std::vector<TokenId>(out.begin(), out.begin() + 2), (std::vector<TokenId>{1, 2}));
}

TEST(AdaptiveDraftLength, GrowsOnSuccessShrinksOnMissesAndCoolsDown) {
  AdaptiveDraftLength a(8);
  EXPECT_EQ(a.limit(), AdaptiveDraftLength::kInitial);
  a.on_verified(4, 4);
  EXPECT_EQ(a.limit(), 8);
  a.on_verified(8, 8);
  EXPECT_EQ(a.limit(), 8) << "capped at the maximum";
  a.on_verified(8, 2);
  EXPECT_EQ(a.limit(), 3);
  for (int i = 0; i < AdaptiveDraftLength::kMaxMisses; ++i) a.on_verified(a.limit(), 0);
  EXPECT_EQ(a.limit(), 0) << "cooling down after repeated misses";
  for (int i = 0; i < AdaptiveDraftLength::kFirstCooldown; ++i) a.on_step_without_draft();
  EXPECT_EQ(a.limit(), 1) << "then it tries again";
  for (int i = 0; i < AdaptiveDraftLength::kMaxMisses; ++i) a.on_verified(1, 0);
  for (int i = 0; i < AdaptiveDraftLength::kFirstCooldown; ++i) a.on_step_without_draft();
  EXPECT_EQ(a.limit(), 0) << "a second cool-down is longer";
  EXPECT_EQ(AdaptiveDraftLength(0).limit(), 0);
}

}  // namespace
}  // namespace drift
