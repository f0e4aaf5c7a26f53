// A sequence with a grammar matcher: the scheduler hands the matcher to the executor in each
// sampling item, advances it with every committed token (never a stop token), and ends the
// sequence "stop" when the grammar is complete or "error" when the grammar refuses a token.
#include <gtest/gtest.h>

#include <memory>

#include "fake_executor.h"
#include "scheduler/engine_scheduler.h"

namespace drift {
namespace {

using testing::Driver;
using testing::FakeModel;
using testing::make_request;

// Completes after `length` tokens; refuses `refused` when given.
class FakeConstraint final : public TokenConstraint {
 public:
  FakeConstraint(size_t length, std::optional<int32_t> refused = std::nullopt)
      : length_(length), refused_(refused) {}
  Status fill_mask(std::span<uint32_t> mask) override {
    std::fill(mask.begin(), mask.end(), ~0u);
    return Status::Ok();
  }
  Status accept(int32_t token) override {
    if (refused_ && token == *refused_) return make_error("token {} breaks the grammar", token);
    accepted.push_back(token);
    return Status::Ok();
  }
  bool complete() const override { return accepted.size() >= length_; }
  std::unique_ptr<TokenConstraint> clone() const override {
    return std::make_unique<FakeConstraint>(*this);
  }
  // Forces the tokens of `forced` from the current position on (as a grammar whose next text is
  // fixed does), up to out.size().
  int32_t forced_tokens(std::span<int32_t> out) override {
    ++forced_asked;
    int32_t n = 0;
    for (size_t k = accepted.size(); k < forced.size() && size_t(n) < out.size(); ++k)
      out[size_t(n++)] = forced[k];
    return n;
  }

  std::vector<int32_t> accepted;
  std::vector<int32_t> forced;
  int forced_asked = 0;

 private:
  size_t length_;
  std::optional<int32_t> refused_;
};

SchedulerConfig config() {
  SchedulerConfig c;
  c.max_num_batched_tokens = 16;
  c.max_num_seqs = 4;
  c.max_model_len = 64;
  return c;
}

TEST(ConstrainedSequence, StopsWhenTheGrammarIsCompleteAndSawEveryToken) {
  Driver d(config(), 16, 4, FakeModel{}, {});
  auto grammar = std::make_shared<FakeConstraint>(3);
  SequenceRequest constrained = make_request(1, 5, 10);
  constrained.constraint = grammar;
  d.submit(std::move(constrained));
  d.submit(make_request(2, 5, 6));  // a free neighbour is not affected

  const StepPlan first = d.step();
  ASSERT_EQ(first.items.size(), 2u);
  EXPECT_EQ(first.items[0].constraint, grammar.get());
  EXPECT_EQ(first.items[1].constraint, nullptr);
  ASSERT_TRUE(d.run_to_completion());

  EXPECT_EQ(d.records()[1].finish, FinishReason::kStop);
  EXPECT_EQ(d.records()[1].generated.size(), 3u);
  EXPECT_EQ(grammar->accepted, d.records()[1].generated);
  EXPECT_FALSE(d.records()[1].ended_on_stop_token);  // the last token is text of the output
  EXPECT_EQ(d.records()[2].finish, FinishReason::kLength);
  EXPECT_EQ(d.records()[2].generated.size(), 6u);
  d.expect_all_released();
}

TEST(ConstrainedSequence, ARefusedTokenEndsTheSequenceWithTheGrammarsMessage) {
  FakeModel model;
  Driver d(config(), 16, 4, model, {});
  SequenceRequest request = make_request(1, 5, 10);
  // The second token the fake model generates for this sequence is refused.
  std::vector<TokenId> expected = model.reference(1, request.prompt, 10);
  auto grammar = std::make_shared<FakeConstraint>(100, expected[1]);
  request.constraint = grammar;
  d.submit(std::move(request));
  ASSERT_TRUE(d.run_to_completion());
  EXPECT_EQ(d.records()[1].finish, FinishReason::kError);
  EXPECT_NE(d.records()[1].message.find("breaks the grammar"), std::string::npos);
  EXPECT_EQ(grammar->accepted, (std::vector<int32_t>{expected[0]}));
  d.expect_all_released();
}

TEST(ConstrainedSequence, AStopTokenEndsTheOutputWithoutReachingTheGrammar) {
  FakeModel model;
  SequenceRequest request = make_request(1, 5, 10);
  std::vector<TokenId> expected = model.reference(1, request.prompt, 10);
  request.sampling.stop_token_ids = {expected[2]};
  auto grammar = std::make_shared<FakeConstraint>(100);
  request.constraint = grammar;
  Driver d(config(), 16, 4, model, {});
  d.submit(std::move(request));
  ASSERT_TRUE(d.run_to_completion());
  EXPECT_EQ(d.records()[1].finish, FinishReason::kStop);
  EXPECT_EQ(d.records()[1].generated.size(), 3u);
  EXPECT_TRUE(d.records()[1].ended_on_stop_token);
  EXPECT_EQ(grammar->accepted, (std::vector<int32_t>{expected[0], expected[1]}));
}

// With speculation on, the tokens a grammar forces are the sequence's drafts: the executor
// accepts those the model samples, the scheduler commits them, advancing the grammar once per
// token, and the output is the model's.
TEST(ConstrainedSequence, ForcedTokensRideAsDraftsAndAreAccepted) {
  const FakeModel model{.vocab = 50, .eos = 0};
  SchedulerConfig c = config();
  c.spec.mode = SpecMode::kNgram;
  Driver d(c, 16, 4, model, {});
  SequenceRequest request = make_request(1, 5, 12);
  const std::vector<TokenId> expected = model.reference(1, request.prompt, 12);
  auto grammar = std::make_shared<FakeConstraint>(100);
  // The grammar forces the model's own next tokens, but one that differs at position 6.
  grammar->forced.assign(expected.begin(), expected.end());
  grammar->forced[6] = expected[6] == 7 ? 8 : 7;
  request.constraint = grammar;
  d.submit(std::move(request));
  int32_t drafts_seen = 0;
  for (int i = 0; i < 40 && d.scheduler().has_unfinished(); ++i)
    for (const StepItem& item : d.step().items) drafts_seen += item.num_drafts;
  EXPECT_FALSE(d.scheduler().has_unfinished());
  EXPECT_EQ(d.records()[1].generated, expected);
  EXPECT_EQ(grammar->accepted, expected) << "the grammar saw every committed token once";
  EXPECT_GT(drafts_seen, 0);
  const SchedulerStats& s = d.scheduler().stats();
  EXPECT_GT(s.spec_forced_accepted_tokens, 0u);
  EXPECT_LT(s.spec_forced_accepted_tokens, s.spec_forced_draft_tokens) << "position 6 rejected";
  EXPECT_GT(grammar->forced_asked, 0);
  d.expect_all_released();
}

}  // namespace
}  // namespace drift
