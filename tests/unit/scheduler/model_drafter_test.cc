// The draft model of speculative decoding on fake executors: ModelDrafter runs a fake "draft
// model" through a FakeExecutor of its own over a KV cache of its own, whose reads fail unless
// every slot holds the reader's own token (so a draft KV not rolled back after rejected drafts,
// or a catch-up that skips a token, fails the test). A draft model equal to the target is always
// right, one with another vocabulary always wrong; either way the output is exactly that of one
// token a step, and every page of both caches comes back.
#include "scheduler/model_drafter.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "fake_executor.h"
#include "scheduler/engine_scheduler.h"

namespace drift {
namespace {

using testing::Driver;
using testing::FakeExecutor;
using testing::FakeModel;
using testing::make_request;

// A model whose text does not repeat (so n-gram drafts rarely match and the draft model drafts).
FakeModel target_model() { return FakeModel{.vocab = 1000, .eos = 0}; }
// Another model: its tokens almost never equal the target's.
FakeModel wrong_model() { return FakeModel{.vocab = 997, .eos = 0}; }
// The target's tokens but about one in four: drafts partly accepted, the rest rolled back.
FakeModel partly_right_model() { return FakeModel{.vocab = 1000, .eos = 0, .differ_one_in = 4}; }

SchedulerConfig draft_config(int32_t max_num_seqs = 8) {
  SchedulerConfig c;
  c.max_num_batched_tokens = 64;
  c.max_num_seqs = max_num_seqs;
  c.max_model_len = 256;
  c.spec.mode = SpecMode::kDraft;
  return c;
}

// The draft model's side: its KV cache, its executor and the drafter over them.
struct DraftSide {
  DraftSide(FakeModel model, int32_t num_pages, int32_t page_size, const SchedulerConfig& c,
            int32_t catch_up_tokens = 256)
      : kv(make_kv(num_pages, page_size)),
        executor(kv, model),
        drafter(executor, kv,
                ModelDrafterConfig{.max_sequences = c.max_num_seqs,
                                   .max_context = c.max_model_len,
                                   .max_draft_tokens = c.spec.max_draft_tokens,
                                   .catch_up_tokens = catch_up_tokens}) {}
  static KVCacheManager make_kv(int32_t num_pages, int32_t page_size) {
    // Another geometry than the target's: the drafter never assumes the target's layout.
    KVLayout layout{.num_layers = 1, .num_kv_heads = 1, .head_dim = 4, .page_size = page_size};
    return std::move(KVCacheManager::create(layout, num_pages)).value();
  }
  void expect_all_released() {
    EXPECT_EQ(kv.num_sequences(), 0);
    EXPECT_EQ(kv.num_free_pages(), kv.num_pages());
    Status s = kv.check_invariants();
    EXPECT_TRUE(s.ok()) << s.message();
  }
  KVCacheManager kv;
  FakeExecutor executor;
  ModelDrafter drafter;
};

void expect_outputs_match_reference(Driver& d, SeqId first, SeqId last) {
  ASSERT_TRUE(d.run_to_completion());
  for (SeqId id = first; id <= last; ++id) {
    const testing::RequestRecord& r = d.records().at(id);
    EXPECT_NE(r.finish, FinishReason::kError) << r.message;
    EXPECT_EQ(r.generated, d.reference(id)) << "sequence " << id;
  }
  d.expect_all_released();
}

// The draft model's greedy continuation of `tokens`, `k` tokens.
std::vector<TokenId> continuation(const FakeModel& model, SeqId id, std::vector<TokenId> tokens,
                                  int32_t k) {
  return model.reference(id, std::move(tokens), k, SamplingParams{.ignore_eos = true});
}

TEST(ModelDrafter, KeepsWhatItsCacheSharesWithTheTokensAndFeedsTheRest) {
  const SchedulerConfig c = draft_config();
  DraftSide draft(target_model(), 64, 4, c);
  std::vector<TokenId> tokens = make_request(7, 10, 1).prompt;
  std::vector<TokenId> out(4);
  DraftAsk ask{7, tokens, out};
  draft.drafter.propose({&ask, 1});
  ASSERT_EQ(ask.proposed, 4);
  EXPECT_EQ(out, continuation(target_model(), 7, tokens, 4));
  EXPECT_EQ(draft.drafter.stats().catch_up_tokens, 10u);
  EXPECT_EQ(draft.drafter.stats().passes, 4u);  // one per draft token
  // The target accepted the first draft token and sampled another than the second: the cache
  // keeps the accepted one (fed as a draft) and the third's slot is rolled back.
  const std::vector<TokenId> first = out;
  tokens.push_back(first[0]);
  tokens.push_back(first[1] == 1 ? 2 : 1);
  ask = DraftAsk{7, tokens, out};
  draft.drafter.propose({&ask, 1});
  ASSERT_EQ(ask.proposed, 4);
  EXPECT_EQ(out, continuation(target_model(), 7, tokens, 4));
  EXPECT_EQ(draft.drafter.stats().catch_up_tokens, 11u);  // only the sampled token
  EXPECT_EQ(draft.drafter.cached_tokens(7), 12);
  // Tokens it never proposed (an n-gram draft's): all of them are fed.
  tokens.push_back(out[0] == 1 ? 2 : 1);
  tokens.push_back(3);
  tokens.push_back(4);
  ask = DraftAsk{7, tokens, out};
  draft.drafter.propose({&ask, 1});
  EXPECT_EQ(out, continuation(target_model(), 7, tokens, 4));
  EXPECT_EQ(draft.drafter.stats().catch_up_tokens, 14u);
  draft.drafter.release(7);
  draft.expect_all_released();
}

TEST(ModelDrafter, DraftModelDrafterNeedsADraftModel) {
  KVCacheManager kv = DraftSide::make_kv(16, 4);
  ProgressLog log;
  auto s = EngineScheduler::create(draft_config(), {0}, kv, log);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("draft model"), std::string::npos) << s.error().message;
}

TEST(ModelDrafter, AnAlwaysRightDraftModelHasEveryDraftAccepted) {
  const SchedulerConfig c = draft_config();
  DraftSide draft(target_model(), 64, 4, c);
  Driver d(c, 64, 4, target_model(), {0}, std::nullopt, {}, &draft.drafter);
  d.submit(make_request(1, 10, 120));
  expect_outputs_match_reference(d, 1, 1);
  const SchedulerStats& s = d.scheduler().stats();
  EXPECT_GT(s.spec_draft_model_draft_tokens, 60u);
  EXPECT_EQ(s.spec_draft_model_accepted_tokens, s.spec_draft_model_draft_tokens);
  // Drafts grow to the maximum (8): 120 tokens in far fewer steps.
  EXPECT_LT(d.executor().steps_run(), 30u);
  // k draft tokens cost k draft passes a step; the catch-up rides in the first.
  EXPECT_GT(draft.drafter.stats().passes, d.executor().steps_run());
  draft.expect_all_released();
}

TEST(ModelDrafter, AnAlwaysWrongDraftModelChangesNothingButTheSteps) {
  const SchedulerConfig c = draft_config();
  DraftSide draft(wrong_model(), 64, 4, c);
  Driver d(c, 64, 4, target_model(), {0}, std::nullopt, {}, &draft.drafter);
  d.submit(make_request(1, 10, 100));
  expect_outputs_match_reference(d, 1, 1);
  const SchedulerStats& s = d.scheduler().stats();
  EXPECT_GT(s.spec_draft_model_draft_tokens, 0u);
  EXPECT_LE(s.spec_draft_model_accepted_tokens, 2u);
  // The rejected drafts were rolled back in the draft KV too (a stale slot fails a read), and
  // the adaptive length cooled drafting down.
  EXPECT_LT(s.spec_draft_model_draft_tokens, 100u);
  draft.expect_all_released();
}

TEST(ModelDrafter, APartlyRightDraftModelKeepsTheAcceptedDraftsInItsCache) {
  const SchedulerConfig c = draft_config();
  DraftSide draft(partly_right_model(), 64, 4, c);
  Driver d(c, 64, 4, target_model(), {0}, std::nullopt, {}, &draft.drafter);
  for (SeqId id = 1; id <= 2; ++id) d.submit(make_request(id, 10, 120));
  expect_outputs_match_reference(d, 1, 2);
  const SchedulerStats& s = d.scheduler().stats();
  // Accepted and rejected drafts both: the draft KV keeps the accepted ones (a rejected one left
  // in it fails the fake's read of that position) and feeds only what it lacks.
  EXPECT_GT(s.spec_draft_model_accepted_tokens, 60u);
  EXPECT_LT(s.spec_draft_model_accepted_tokens, s.spec_draft_model_draft_tokens);
  EXPECT_LT(draft.drafter.stats().catch_up_tokens, 2u * (10 + 120));
  draft.expect_all_released();
}

TEST(ModelDrafter, BatchedUnderPreemptionOutputsEqualOneTokenAStep) {
  SchedulerConfig c = draft_config();
  c.admission = AdmissionMode::kOptimistic;
  DraftSide draft(target_model(), 256, 4, c);
  // 40 target pages of 4 tokens for six sequences of up to 100 tokens: preemption is certain.
  Driver d(c, 40, 4, target_model(), {0}, default_prefix_hash, {}, &draft.drafter);
  for (SeqId id = 1; id <= 6; ++id) d.submit(make_request(id, 8 + int32_t(id) * 3, 80));
  expect_outputs_match_reference(d, 1, 6);
  EXPECT_GT(d.scheduler().capacity_stats().preempted, 0u);
  EXPECT_GT(d.scheduler().stats().spec_draft_model_accepted_tokens, 100u);
  draft.expect_all_released();
}

TEST(ModelDrafter, AFullDraftPoolMeansNoDraftModelDraftsNeverAnError) {
  const SchedulerConfig c = draft_config();
  // 6 draft pages of 4 tokens: the first sequence's 20-token prompt fits, the others' do not
  // while it runs.
  DraftSide draft(target_model(), 6, 4, c);
  Driver d(c, 128, 4, target_model(), {0}, std::nullopt, {}, &draft.drafter);
  for (SeqId id = 1; id <= 3; ++id) d.submit(make_request(id, 20, 60));
  expect_outputs_match_reference(d, 1, 3);
  EXPECT_GT(draft.drafter.stats().no_room, 0u);
  EXPECT_GT(d.scheduler().stats().spec_draft_model_accepted_tokens, 0u);
  draft.expect_all_released();
}

TEST(ModelDrafter, ALongPromptIsCaughtUpInChunksBeforeItsFirstDraft) {
  const SchedulerConfig c = draft_config();
  DraftSide draft(target_model(), 64, 4, c, /*catch_up_tokens=*/8);
  Driver d(c, 64, 4, target_model(), {0}, std::nullopt, {}, &draft.drafter);
  d.submit(make_request(1, 30, 40));
  std::vector<int32_t> cached;
  for (int i = 0; i < 8 && d.scheduler().has_unfinished(); ++i) {
    d.step();
    cached.push_back(draft.drafter.cached_tokens(1));
  }
  // The prompt is prefilled by the target in one step; the draft KV follows 8 tokens a step.
  ASSERT_GE(cached.size(), 5u);
  EXPECT_EQ(cached[1], 8);
  EXPECT_EQ(cached[2], 16);
  EXPECT_EQ(cached[3], 24);
  expect_outputs_match_reference(d, 1, 1);
  EXPECT_GT(d.scheduler().stats().spec_draft_model_accepted_tokens, 0u);
  draft.expect_all_released();
}

TEST(ModelDrafter, NgramAndModelDraftsInTurnKeepTheDraftCacheTrue) {
  // Steps drafted by n-grams commit tokens the draft model did not propose: its cache must keep
  // only what equals the sequence's tokens (a stale slot fails the fake's read).
  const FakeModel repetitive{.vocab = 12, .eos = 0, .order = 3};
  FakeModel partly = repetitive;
  partly.differ_one_in = 3;
  SchedulerConfig c = draft_config();
  DraftSide draft(partly, 64, 4, c);
  Driver d(c, 64, 4, repetitive, {0}, std::nullopt, {}, &draft.drafter);
  for (SeqId id = 1; id <= 3; ++id) d.submit(make_request(id, 6, 150));
  expect_outputs_match_reference(d, 1, 3);
  const SchedulerStats& s = d.scheduler().stats();
  EXPECT_GT(s.spec_draft_model_accepted_tokens, 0u);
  EXPECT_GT(s.spec_accepted_tokens - s.spec_draft_model_accepted_tokens, 0u);
  draft.expect_all_released();
}

TEST(ModelDrafter, LongNgramMatchesDraftInsteadOfTheModel) {
  // A repetitive target: its own history soon matches 4+ tokens, which then draft; the draft
  // model (always wrong here) only where the match is short.
  SchedulerConfig c = draft_config();
  DraftSide draft(wrong_model(), 64, 4, c);
  Driver d(c, 64, 4, FakeModel{.vocab = 12, .eos = 0, .order = 3}, {0}, std::nullopt, {},
           &draft.drafter);
  d.submit(make_request(1, 10, 150));
  expect_outputs_match_reference(d, 1, 1);
  const SchedulerStats& s = d.scheduler().stats();
  EXPECT_GT(s.spec_accepted_tokens - s.spec_draft_model_accepted_tokens, 50u);
  draft.expect_all_released();
}

}  // namespace
}  // namespace drift
