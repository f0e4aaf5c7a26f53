// The n-gram pool shared across requests: what it proposes after a recorded context (a chain of
// lookups), that namespaces never meet, that its memory is fixed whatever it records, and, in the
// scheduler over the fake executor, that it drafts for a sequence what that sequence's own history
// cannot — a continuation another request wrote — while the output stays that of one token a
// step.
#include "scheduler/ngram_pool.h"

#include <gtest/gtest.h>

#include <vector>

#include "fake_executor.h"
#include "scheduler/engine_scheduler.h"
#include "scheduler/ngram_drafter.h"

namespace drift {
namespace {

using testing::Driver;
using testing::FakeModel;
using testing::make_request;

TEST(NgramPool, ProposesTheChainOfTokensThatFollowedTheContext) {
  NgramPool pool(1024, 3);
  pool.record(std::vector<TokenId>{1, 2, 3, 4, 5, 6, 7}, 0, 0);
  std::vector<TokenId> out(8, -9);
  // "2 3 4" was followed by 5; then "3 4 5" by 6, "4 5 6" by 7, and nothing followed "5 6 7".
  ASSERT_EQ(pool.propose(std::vector<TokenId>{9, 9, 2, 3, 4}, 0, out), 3);
  EXPECT_EQ(std::vector<TokenId>(out.begin(), out.begin() + 3), (std::vector<TokenId>{5, 6, 7}));
  std::vector<TokenId> two(2);
  ASSERT_EQ(pool.propose(std::vector<TokenId>{2, 3, 4}, 0, two), 2);
  EXPECT_EQ(two, (std::vector<TokenId>{5, 6}));
  // An unrecorded context proposes nothing and leaves `out` alone; so does a too-short history.
  std::vector<TokenId> untouched(4, -9);
  EXPECT_EQ(pool.propose(std::vector<TokenId>{3, 2, 1}, 0, untouched), 0);
  EXPECT_EQ(pool.propose(std::vector<TokenId>{3, 4}, 0, untouched), 0);
  EXPECT_EQ(untouched, std::vector<TokenId>(4, -9));
}

TEST(NgramPool, RecordsFromAPositionAndTheLatestContinuationWins) {
  NgramPool pool(1024, 2);
  std::vector<TokenId> tokens = {1, 2, 3};
  pool.record(tokens, 0, 0);
  tokens.push_back(8);  // a token appended, recorded alone: "2 3" was then followed by 8
  pool.record(tokens, tokens.size() - 1, 0);
  std::vector<TokenId> out(1);
  ASSERT_EQ(pool.propose(std::vector<TokenId>{2, 3}, 0, out), 1);
  EXPECT_EQ(out[0], 8);
  ASSERT_EQ(pool.propose(std::vector<TokenId>{1, 2}, 0, out), 1);
  EXPECT_EQ(out[0], 3);
}

TEST(NgramPool, NamespacesNeverMeet) {
  NgramPool pool(1024, 2);
  pool.record(std::vector<TokenId>{4, 5, 6}, 0, /*cache_namespace=*/7);
  std::vector<TokenId> out(2);
  EXPECT_EQ(pool.propose(std::vector<TokenId>{4, 5}, 8, out), 0);
  EXPECT_EQ(pool.propose(std::vector<TokenId>{4, 5}, 7, out), 1);
}

TEST(NgramPool, MemoryIsFixedAtConstruction) {
  NgramPool pool(1000, 4);  // rounded down to 512 slots
  EXPECT_EQ(pool.bytes(), 512 * NgramPool::kEntryBytes);
  std::vector<TokenId> text;
  for (int i = 0; i < 100000; ++i) text.push_back(TokenId((i * 7919) % 5003));
  pool.record(text, 0, 0);
  EXPECT_EQ(pool.bytes(), 512 * NgramPool::kEntryBytes);
  // The most recent text still drafts (its slots were written last).
  std::vector<TokenId> out(1);
  ASSERT_EQ(pool.propose(std::span<const TokenId>(text).first(text.size() - 1), 0, out), 1);
  EXPECT_EQ(out[0], text.back());

  NgramPool none;
  EXPECT_FALSE(none.enabled());
  EXPECT_EQ(none.bytes(), 0u);
  none.record(text, 0, 0);
  EXPECT_EQ(none.propose(text, 0, out), 0);
}

// Two sequences of a model whose next token depends on the last three tokens only: the second's
// prompt ends as the first's does, so it writes the same output — which its own prompt (no token
// pair repeats in it) cannot draft, but the first sequence's recorded output can.
struct PoolRun {
  std::vector<TokenId> second_output;
  int32_t first_decode_drafts = -1;  // the second sequence's first decode step's draft
  SchedulerStats stats;
};

PoolRun run_two_sequences(int64_t pool_entries) {
  SchedulerConfig c;
  c.max_num_batched_tokens = 64;
  c.max_num_seqs = 8;
  c.max_model_len = 256;
  c.spec.mode = SpecMode::kNgram;
  c.spec.pool_entries = pool_entries;
  const FakeModel model{.vocab = 12, .eos = 0, .order = 3, .same_for_every_sequence = true};
  Driver d(c, 64, 4, model, {});
  PoolRun run;
  d.submit(make_request(1, 10, 60));
  EXPECT_TRUE(d.run_to_completion());
  SequenceRequest second = make_request(2, 10, 60);
  const std::vector<TokenId>& first_prompt = d.records().at(1).request.prompt;
  std::copy(first_prompt.end() - 3, first_prompt.end(), second.prompt.end() - 3);
  std::vector<TokenId> out(4);
  EXPECT_EQ(propose_ngram_draft(second.prompt, NgramDraftConfig{}, out), 0)
      << "the second prompt has nothing of its own to draft from";
  d.submit(std::move(second));
  for (int i = 0; i < 200 && d.scheduler().has_unfinished(); ++i) {
    const StepPlan plan = d.step();
    for (const StepItem& item : plan.items)
      if (item.seq_id == 2 && item.kind == StepItemKind::kDecode && run.first_decode_drafts < 0)
        run.first_decode_drafts = item.num_drafts;
  }
  EXPECT_FALSE(d.scheduler().has_unfinished());
  EXPECT_EQ(d.records().at(2).generated, d.reference(2));
  EXPECT_EQ(d.records().at(2).generated, d.records().at(1).generated) << "the model's premise";
  run.second_output = d.records().at(2).generated;
  run.stats = d.scheduler().stats();
  d.expect_all_released();
  return run;
}

TEST(SpecDecodeScheduler, SharedPoolDraftsWhatTheSequencesOwnHistoryCannot) {
  const PoolRun pooled = run_two_sequences(1 << 12);
  const PoolRun own_only = run_two_sequences(0);
  EXPECT_EQ(pooled.second_output, own_only.second_output);
  EXPECT_GT(pooled.first_decode_drafts, 0) << "the pool drafted the first decode";
  EXPECT_EQ(own_only.first_decode_drafts, 0) << "its own history had nothing";
  EXPECT_GT(pooled.stats.spec_pool_accepted_tokens, 0u);
  EXPECT_LE(pooled.stats.spec_pool_accepted_tokens, pooled.stats.spec_pool_draft_tokens);
  EXPECT_EQ(own_only.stats.spec_pool_draft_tokens, 0u);
  EXPECT_GT(pooled.stats.spec_accepted_tokens, own_only.stats.spec_accepted_tokens);
}

}  // namespace
}  // namespace drift
