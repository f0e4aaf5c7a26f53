// Embeddings on SmolLM2 through the engine: a text's vector is the same, bit for bit, alone (its
// prompt prefilled in one step) and among 32 requests — embeddings of other texts and greedy
// generations — whose prompts are chunked into 48-token steps; for every pooling mode. The
// vectors have unit norm, and a related text is closer than an unrelated one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "runtime/load_engine.h"
#include "test_models.h"

namespace drift {
namespace {

std::vector<std::string> texts() {
  const std::string filler =
      " The committee met on Tuesday to discuss the new library budget, and the members agreed "
      "that the reading room needed new chairs, better lighting and longer opening hours.";
  std::vector<std::string> out = {
      "The cat sat on the mat.",
      "A cat was sitting on the rug.",
      "Quarterly revenue rose by eight percent, driven by strong sales in Asia.",
      "def add(a, b):\n    return a + b",
  };
  for (int i = 0; out.size() < 16; ++i) {
    std::string text = "Note " + std::to_string(i) + ":";
    for (int k = 0; k <= i % 4; ++k) text += filler;  // 25 to 130 tokens
    out.push_back(text);
  }
  return out;
}

EngineConfig config(int32_t batch_tokens, int32_t max_seqs) {
  EngineConfig c;
  c.threads = 1;  // see engine_batching_test.cc: a descheduled second thread only slows steps
  c.max_model_len = 512;
  c.kv.budget = KVMemoryBudget::of_bytes(uint64_t{64} << 20);
  c.max_queued_requests = 64;
  c.scheduler.max_num_batched_tokens = batch_tokens;
  c.scheduler.max_num_seqs = max_seqs;
  c.scheduler.max_num_partial_prefills = std::min(4, max_seqs);
  return c;
}

std::unique_ptr<Engine> load(const EngineConfig& c) {
  const auto path = test::model_path(test::kSmolLm2File);
  EXPECT_TRUE(test::model_available(path));
  auto engine = load_engine(path.string(), c);
  EXPECT_TRUE(engine.ok()) << (engine.ok() ? "" : engine.error().message);
  return engine.ok() ? std::move(engine).value() : nullptr;
}

Request embedding_request(const std::string& text, PoolingMode pooling) {
  Request r;
  r.prompt = TextPrompt{text, /*add_special=*/true, /*parse_special=*/true};
  r.pooling = pooling;
  return r;
}

std::vector<float> wait_embedding(RequestHandle& h) {
  Expected<Completion> c = h.wait();
  EXPECT_TRUE(c.ok()) << c.error().message;
  if (!c.ok()) return {};
  EXPECT_EQ(c->finish.reason, FinishReason::kStop) << c->finish.message;
  return c->embedding;
}

double dot(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += double(a[i]) * b[i];
  return s;
}

TEST(EngineEmbedding, AVectorIsTheSameAloneAndAmongThirtyTwoChunkedRequests) {
  const std::vector<std::string> t = texts();
  for (PoolingMode mode : {PoolingMode::kMean, PoolingMode::kLast, PoolingMode::kCls}) {
    SCOPED_TRACE(std::string(pooling_mode_name(mode)));
    // Alone: each text's prompt in one step, nothing else in the engine.
    std::vector<std::vector<float>> solo;
    {
      std::unique_ptr<Engine> engine = load(config(512, 1));
      ASSERT_TRUE(engine);
      for (const std::string& text : t) {
        RequestHandle h = engine->submit(embedding_request(text, mode));
        solo.push_back(wait_embedding(h));
        ASSERT_EQ(solo.back().size(), 576u) << "SmolLM2's hidden size";
        EXPECT_NEAR(dot(solo.back(), solo.back()), 1.0, 1e-5) << "unit L2 norm";
      }
    }
    // Batched: the 16 embeddings and 16 greedy generations at once, in 48-token steps.
    std::unique_ptr<Engine> engine = load(config(48, 32));
    ASSERT_TRUE(engine);
    std::vector<RequestHandle> embeddings, generations;
    for (size_t i = 0; i < t.size(); ++i) {
      Request g;
      g.prompt = TextPrompt{t[(i + 5) % t.size()], true, true};
      g.max_tokens = 8;
      g.sampling.temperature = 0;
      generations.push_back(engine->submit(std::move(g)));
      embeddings.push_back(engine->submit(embedding_request(t[i], mode)));
    }
    for (size_t i = 0; i < t.size(); ++i)
      EXPECT_EQ(wait_embedding(embeddings[i]), solo[i]) << "text " << i;
    for (RequestHandle& g : generations) {
      Expected<Completion> c = g.wait();
      ASSERT_TRUE(c.ok());
      EXPECT_EQ(c->finish.reason, FinishReason::kLength) << c->finish.message;
    }
    const EngineMetrics m = engine->metrics();
    EXPECT_EQ(m.embeddings_total, t.size());
    EXPECT_GT(m.steps, 10u) << "prompts were chunked over many steps";
    EXPECT_EQ(m.kv_pages_used, 0);
  }
}

TEST(EngineEmbedding, ARelatedTextIsCloserThanAnUnrelatedOneAndModesDiffer) {
  std::unique_ptr<Engine> engine = load(config(512, 4));
  ASSERT_TRUE(engine);
  auto embed = [&](const std::string& text, PoolingMode mode) {
    RequestHandle h = engine->submit(embedding_request(text, mode));
    return wait_embedding(h);
  };
  const std::vector<float> cat = embed("The cat sat on the mat.", PoolingMode::kMean);
  const std::vector<float> cat2 = embed("A cat was sitting on the rug.", PoolingMode::kMean);
  const std::vector<float> revenue =
      embed("Quarterly revenue rose by eight percent, driven by strong sales in Asia.",
            PoolingMode::kMean);
  EXPECT_GT(dot(cat, cat2), dot(cat, revenue));
  EXPECT_LT(dot(cat, cat2), 0.99999) << "different texts, different vectors";
  EXPECT_NE(embed("The cat sat on the mat.", PoolingMode::kLast), cat);
  EXPECT_NE(embed("The cat sat on the mat.", PoolingMode::kCls), cat);
}

}  // namespace
}  // namespace drift
