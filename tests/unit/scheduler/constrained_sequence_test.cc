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

  std::vector<int32_t> accepted;

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
  ASSERT_TRUE(d.submit(std::move(constrained)));
  ASSERT_TRUE(d.submit(make_request(2, 5, 6)));  // a free neighbour is not affected

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
  ASSERT_TRUE(d.submit(std::move(request)));
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
  ASSERT_TRUE(d.submit(std::move(request)));
  ASSERT_TRUE(d.run_to_completion());
  EXPECT_EQ(d.records()[1].finish, FinishReason::kStop);
  EXPECT_EQ(d.records()[1].generated.size(), 3u);
  EXPECT_TRUE(d.records()[1].ended_on_stop_token);
  EXPECT_EQ(grammar->accepted, (std::vector<int32_t>{expected[0], expected[1]}));
}

}  // namespace
}  // namespace drift
