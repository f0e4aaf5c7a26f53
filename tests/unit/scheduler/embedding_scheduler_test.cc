// Embedding requests in the scheduler: prefill-only sequences that share steps and budgets with
// generation, carry their pooled vector in the last chunk's outcome, and release their pages like
// any other sequence. The fake executor pools a weighted sum of the prompt's tokens chunk by chunk
// (fake_executor.h), so a lost, repeated or restarted-without-reset chunk shows in the vector.
#include <gtest/gtest.h>

#include "fake_executor.h"
#include "plan_views.h"
#include "scheduler/engine_scheduler.h"

namespace drift {
namespace {

using testing::Driver;
using testing::FakeModel;
using testing::items_of;
using testing::ItemView;
using testing::make_request;
using testing::P;
using Items = std::vector<ItemView>;

constexpr size_t kDim = 4;
constexpr std::optional<PrefixHashFn> kCache = default_prefix_hash;

SchedulerConfig config(int32_t budget, int32_t max_model_len = 64) {
  SchedulerConfig c;
  c.max_num_batched_tokens = budget;
  c.max_num_seqs = 4;
  c.max_model_len = max_model_len;
  return c;
}

SequenceRequest embedding_request(SeqId id, std::vector<TokenId> prompt,
                                  PoolingMode pooling = PoolingMode::kMean) {
  SequenceRequest r;
  r.id = id;
  r.prompt = std::move(prompt);
  r.max_new_tokens = 0;
  r.pooling = pooling;
  r.embedding.resize(kDim);
  return r;
}

std::vector<TokenId> tokens(int32_t n, TokenId first = 100) {
  std::vector<TokenId> t;
  for (int32_t i = 0; i < n; ++i) t.push_back(first + i);
  return t;
}

TEST(EmbeddingScheduler, APromptIsPrefilledInChunksAndFinishesWithItsVector) {
  Driver d(config(8), 32, 4);
  d.submit(embedding_request(1, tokens(20)));
  EXPECT_EQ(items_of(d.step()), (Items{{1, P, 0, 8, false}}));
  EXPECT_EQ(items_of(d.step()), (Items{{1, P, 8, 8, false}}));
  EXPECT_FALSE(d.records()[1].finish);
  EXPECT_EQ(items_of(d.step()), (Items{{1, P, 16, 4, false}})) << "nothing is sampled";
  const testing::RequestRecord& r = d.records()[1];
  ASSERT_EQ(r.finish, FinishReason::kStop);
  EXPECT_TRUE(r.generated.empty());
  EXPECT_EQ(r.embedding, FakeModel::embedding(tokens(20), kDim)) << "every chunk folded once";
  EXPECT_FALSE(d.scheduler().has_unfinished());
  d.expect_all_released();
}

TEST(EmbeddingScheduler, EmbeddingsShareStepsWithGenerationWhichIsUnchanged) {
  Driver d(config(16), 64, 4);
  d.submit(make_request(1, 6, 5));
  d.submit(embedding_request(2, tokens(30, 200)));
  d.submit(make_request(3, 9, 4));
  EXPECT_EQ(items_of(d.step()), (Items{{1, P, 0, 6, true}, {2, P, 0, 10, false}}));
  ASSERT_TRUE(d.run_to_completion());
  EXPECT_EQ(d.records()[1].generated, d.reference(1));
  EXPECT_EQ(d.records()[3].generated, d.reference(3));
  EXPECT_EQ(d.records()[2].embedding, FakeModel::embedding(tokens(30, 200), kDim));
  EXPECT_EQ(d.records()[2].finish, FinishReason::kStop);
  d.expect_all_released();
}

// (What is longer, or generates, is refused by the engine's judge: EngineEmbedding.*.)
TEST(EmbeddingScheduler, AnInputMayFillTheWholeContext) {
  Driver d(config(64, 32), 16, 4);
  d.submit(embedding_request(1, tokens(32)));
  ASSERT_TRUE(d.run_to_completion());
  EXPECT_EQ(d.records()[1].embedding, FakeModel::embedding(tokens(32), kDim));
}

TEST(EmbeddingScheduler, AnExecutorThatReportsNoVectorEndsTheRequestWithAnError) {
  Driver d(config(16), 16, 4);
  d.executor().report_embeddings(false);
  d.submit(embedding_request(1, tokens(5)));
  d.submit(make_request(2, 5, 2));
  ASSERT_TRUE(d.run_to_completion());
  EXPECT_EQ(d.records()[1].finish, FinishReason::kError);
  EXPECT_NE(d.records()[1].message.find("embedding"), std::string::npos);
  EXPECT_EQ(d.records()[2].generated, d.reference(2)) << "the other sequence goes on";
  d.expect_all_released();
}

TEST(EmbeddingScheduler, MeanAndClsPoolingPrefillThePromptsCachedPagesAgainButLastSkipsThem) {
  // Request 1 leaves pages of tokens [0, 8) cached; each embedding then has the same prompt.
  Driver d(config(16), 32, 4, FakeModel{}, {}, kCache);
  SequenceRequest first;
  first.id = 1;
  first.prompt = tokens(10);
  first.max_new_tokens = 1;
  d.submit(std::move(first));
  ASSERT_TRUE(d.run_to_completion());

  d.submit(embedding_request(2, tokens(10), PoolingMode::kMean));
  EXPECT_EQ(items_of(d.step()), (Items{{2, P, 0, 10, false}})) << "mean needs every hidden state";
  d.submit(embedding_request(3, tokens(10), PoolingMode::kCls));
  EXPECT_EQ(items_of(d.step()), (Items{{3, P, 0, 10, false}})) << "cls needs the first";
  d.submit(embedding_request(4, tokens(10), PoolingMode::kLast));
  EXPECT_EQ(items_of(d.step()), (Items{{4, P, 8, 2, false}})) << "last needs only the last";
  EXPECT_EQ(d.records()[2].embedding, FakeModel::embedding(tokens(10), kDim));
  EXPECT_EQ(d.records()[4].finish, FinishReason::kStop);
  d.expect_all_released();
}

TEST(EmbeddingScheduler, APreemptedEmbeddingStartsItsVectorAfresh) {
  // Optimistic admission over 6 pages of 4 tokens, 4 tokens a step: the protected generation's
  // decodes soon need a page that the embedding's prefill holds, so the embedding is preempted
  // and prefilled again from position 0.
  SchedulerConfig c = config(4);
  c.admission = AdmissionMode::kOptimistic;
  Driver d(c, 6, 4);
  d.submit(make_request(1, 4, 12, /*priority=*/1));
  d.submit(embedding_request(2, tokens(16, 500)));
  ASSERT_TRUE(d.run_to_completion());
  EXPECT_GE(d.scheduler().capacity_stats().preempted, 1u) << "the case this test is about";
  EXPECT_EQ(d.records()[2].finish, FinishReason::kStop);
  EXPECT_EQ(d.records()[2].embedding, FakeModel::embedding(tokens(16, 500), kDim));
  EXPECT_EQ(d.records()[1].generated, d.reference(1));
  d.expect_all_released();
}

}  // namespace
}  // namespace drift
