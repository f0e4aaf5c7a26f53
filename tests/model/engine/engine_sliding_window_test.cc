// Sliding-window KV groups through the whole engine on Gemma 3 (window 512): four requests that
// share a ~1,550-token document (three windows), run at once with chunked prefill and the prefix
// cache, get bitwise the same tokens and top-5 log-probabilities with their sliding layers freeing
// pages as with every layer kept (`kv.hybrid` off), and the hybrid engine reports its groups and
// frees.
#include <gtest/gtest.h>

#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "runtime/load_engine.h"
#include "test_models.h"

namespace drift {
namespace {

struct Output {
  std::vector<TokenId> tokens;
  std::vector<TokenLogprobs> logprobs;
};

std::string document() {
  std::string text;
  for (int part = 1; part <= 18; ++part)
    text += "Section " + std::to_string(part) +
            ". The library opens at nine on weekdays and at ten on Saturdays; it is closed on "
            "Sundays and public holidays. Members may borrow up to twelve items for three weeks "
            "and renew them twice unless another member has reserved them. Late fees are twenty "
            "cents per item per day, capped at five dollars. Study rooms can be booked for two "
            "hours a day, and the events calendar lists readings, workshops and film nights.\n";
  return text;
}

struct EngineRun {
  std::vector<Output> outputs;
  EngineMetrics metrics;
  EngineSetup setup;
};

EngineRun run(bool hybrid) {
  EngineRun result;
  const auto path = test::model_path(test::kGemma3File);
  EXPECT_TRUE(test::model_available(path));
  EngineConfig c;
  c.threads = 2;
  c.max_model_len = 2048;
  c.kv.budget = KVMemoryBudget::of_bytes(uint64_t{48} << 20);
  c.kv.hybrid = hybrid;
  c.scheduler.max_num_batched_tokens = 256;
  c.scheduler.max_num_seqs = 4;
  c.scheduler.max_num_partial_prefills = 4;
  auto engine = load_engine(path.string(), c);
  EXPECT_TRUE(engine.ok()) << (engine.ok() ? "" : engine.error().message);
  if (!engine.ok()) return result;
  result.setup = (*engine)->setup();
  const std::vector<std::string> questions = {
      "When does it open on Saturday?", "How many items can I borrow?",
      "What is the largest late fee?", "How long can I keep a study room?"};
  result.outputs.resize(questions.size());
  std::mutex mutex;
  std::condition_variable done;
  size_t finished = 0;
  std::vector<RequestHandle> handles;
  for (size_t i = 0; i < questions.size(); ++i) {
    Request r;
    r.prompt = TextPrompt{document() + "Question: " + questions[i] + "\nAnswer:", true, false};
    r.max_tokens = 12;
    r.sampling.temperature = 0;
    r.sampling.ignore_eos = true;
    r.sampling.logprobs = 5;
    handles.push_back((*engine)->submit(std::move(r), [&, i](TokenEvent e) {
      std::lock_guard lock(mutex);
      if (e.token) result.outputs[i].tokens.push_back(*e.token);
      if (e.logprobs) result.outputs[i].logprobs.push_back(*e.logprobs);
      if (e.finish) {
        EXPECT_EQ(e.finish->reason, FinishReason::kLength) << e.finish->message;
        ++finished;
        done.notify_one();
      }
    }));
  }
  std::unique_lock lock(mutex);
  done.wait(lock, [&] { return finished == questions.size(); });
  result.metrics = (*engine)->metrics();
  return result;
}

TEST(EngineSlidingWindow, Gemma3FreeingPagesChangesNoTokenNorLogprob) {
  const EngineRun plain = run(/*hybrid=*/false);
  const EngineRun hybrid = run(/*hybrid=*/true);
  EXPECT_EQ(plain.setup.kv_layout.num_groups(), 1);
  EXPECT_EQ(hybrid.setup.kv_layout.num_groups(), 6);
  EXPECT_EQ(hybrid.setup.kv_layout.num_layers, 3);
  // The same bytes hold six times the (smaller) pages, give or take the last.
  EXPECT_GE(hybrid.setup.num_kv_pages, 6 * plain.setup.num_kv_pages);
  EXPECT_LT(hybrid.setup.num_kv_pages, 6 * (plain.setup.num_kv_pages + 1));
  EXPECT_GT(hybrid.setup.kv_tokens, plain.setup.kv_tokens);
  ASSERT_EQ(hybrid.outputs.size(), plain.outputs.size());
  for (size_t i = 0; i < plain.outputs.size(); ++i) {
    SCOPED_TRACE("request " + std::to_string(i));
    EXPECT_EQ(hybrid.outputs[i].tokens, plain.outputs[i].tokens);
    ASSERT_EQ(hybrid.outputs[i].logprobs.size(), plain.outputs[i].logprobs.size());
    for (size_t k = 0; k < plain.outputs[i].logprobs.size(); ++k)
      EXPECT_EQ(std::memcmp(&hybrid.outputs[i].logprobs[k], &plain.outputs[i].logprobs[k],
                            sizeof(TokenLogprobs)),
                0)
          << "token " << k;
  }
  // The document is computed once, shared by the others (its sliding windows included).
  EXPECT_GT(hybrid.metrics.prefix_cache.hit_tokens, 3u * 1500);
  EXPECT_EQ(hybrid.metrics.prefix_cache.hit_tokens, plain.metrics.prefix_cache.hit_tokens);
}

}  // namespace
}  // namespace drift
