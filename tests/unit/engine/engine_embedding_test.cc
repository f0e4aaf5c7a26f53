// Embedding requests through the engine: one event with the pooled vector and the prompt's usage,
// run beside generation in the same steps, refused at once when they ask for what an embedding
// cannot do, counted in the metrics.
#include <gtest/gtest.h>

#include "engine/engine.h"
#include "engine_fakes.h"

namespace drift {
namespace {

using namespace testing;

Request embedding_request(RequestId id, int32_t prompt_len) {
  Request r;
  r.id = id;
  r.prompt = fake_prompt(id, prompt_len);
  r.pooling = PoolingMode::kMean;
  return r;
}

TEST(EngineEmbedding, ARequestEndsWithOneEventCarryingItsVector) {
  FakeEngine fake = make_fake_engine(small_config());
  Request r = embedding_request(3, 50);  // longer than a step's 32 tokens: chunked
  const std::vector<TokenId> prompt = std::get<std::vector<TokenId>>(r.prompt);
  RequestHandle h = fake.engine->submit(std::move(r));
  std::optional<TokenEvent> event = h.next();
  ASSERT_TRUE(event && event->finish);
  EXPECT_EQ(event->finish->reason, FinishReason::kStop) << event->finish->message;
  EXPECT_FALSE(event->token);
  EXPECT_EQ(event->embedding, fake_embedding(prompt));
  EXPECT_EQ(event->finish->usage.prompt_tokens, 50);
  EXPECT_EQ(event->finish->usage.completion_tokens, 0);
  EXPECT_FALSE(h.next());
}

TEST(EngineEmbedding, TextIsTokenizedAsForGenerationAndTheInputMayFillTheContext) {
  FakeEngine fake = make_fake_engine(small_config());  // max_model_len 128
  Request text;
  text.prompt = TextPrompt{"hello", /*add_special=*/true};
  text.pooling = PoolingMode::kMean;
  RequestHandle h = fake.engine->submit(std::move(text));
  Completion c = finish_within(h);
  EXPECT_EQ(c.embedding, fake_embedding(FakeCodec().encode(TextPrompt{"hello", true})));

  RequestHandle full_handle = fake.engine->submit(embedding_request(4, 128));
  Completion full = finish_within(full_handle);
  EXPECT_EQ(full.finish.reason, FinishReason::kStop) << full.finish.message;
  RequestHandle over_handle = fake.engine->submit(embedding_request(5, 129));
  Completion over = finish_within(over_handle);
  EXPECT_EQ(over.finish.reason, FinishReason::kRejected);
  EXPECT_EQ(over.finish.reject_reason, RejectReason::kPromptTooLong);
  EXPECT_TRUE(over.embedding.empty());
}

TEST(EngineEmbedding, GenerationFieldsAreRefused) {
  FakeEngine fake = make_fake_engine(small_config());
  Request with_max_tokens = embedding_request(1, 5);
  with_max_tokens.max_tokens = 4;
  RequestHandle ha = fake.engine->submit(std::move(with_max_tokens));
  Completion a = finish_within(ha);
  EXPECT_EQ(a.finish.reject_reason, RejectReason::kInvalidRequest);
  EXPECT_NE(a.finish.message.find("max_tokens"), std::string::npos) << a.finish.message;
  Request in_session = embedding_request(2, 5);
  in_session.session_id = "s1";
  RequestHandle hb = fake.engine->submit(std::move(in_session));
  Completion b = finish_within(hb);
  EXPECT_EQ(b.finish.reject_reason, RejectReason::kInvalidRequest);
  EXPECT_FALSE(fake.engine->session_history("s1")) << "no session was opened";
}

TEST(EngineEmbedding, EmbeddingsAndGenerationsRunTogetherWithUnchangedResults) {
  FakeModel model;
  FakeEngine fake = make_fake_engine(small_config(), model);
  std::vector<RequestHandle> generations, embeddings;
  for (RequestId id = 1; id <= 6; ++id) {
    generations.push_back(fake.engine->submit(token_request(id, 10 + int32_t(id), 8)));
    embeddings.push_back(fake.engine->submit(embedding_request(100 + id, 20 + 7 * int32_t(id))));
  }
  for (RequestId id = 1; id <= 6; ++id) {
    Completion g = finish_within(generations[id - 1]);
    EXPECT_EQ(g.tokens, model.reference(id, fake_prompt(id, 10 + int32_t(id)), 8)) << id;
    Completion e = finish_within(embeddings[id - 1]);
    EXPECT_EQ(e.embedding, fake_embedding(fake_prompt(100 + id, 20 + 7 * int32_t(id)))) << id;
  }
  const EngineMetrics m = fake.engine->metrics();
  EXPECT_EQ(m.embeddings_total, 6u);
  EXPECT_EQ(m.embedding_prompt_tokens_total, uint64_t(6 * 20 + 7 * 21));
  EXPECT_EQ(m.generation_tokens_total, 6u * 8u) << "embeddings generate nothing";
}

}  // namespace
}  // namespace drift
