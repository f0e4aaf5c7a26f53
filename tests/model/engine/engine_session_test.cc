// Conversation sessions on SmolLM2: each turn of a chat, continued from the session (its KV
// reused through the prefix cache), gives exactly the greedy tokens of its full history
// submitted fresh to an engine without the prefix cache.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "runtime/load_engine.h"
#include "test_models.h"

namespace drift {
namespace {

EngineConfig config(bool prefix_caching) {
  EngineConfig c;
  c.threads = 1;
  c.max_model_len = 512;
  c.kv.budget = KVMemoryBudget::of_bytes(uint64_t{64} << 20);
  c.kv.enable_prefix_caching = prefix_caching;
  return c;
}

std::unique_ptr<Engine> load(const EngineConfig& c) {
  const auto path = test::model_path(test::kSmolLm2File);
  EXPECT_TRUE(test::model_available(path));
  auto engine = load_engine(path.string(), c);
  EXPECT_TRUE(engine.ok()) << (engine.ok() ? "" : engine.error().message);
  return engine.ok() ? std::move(engine).value() : nullptr;
}

Request greedy(Prompt prompt, int32_t max_tokens) {
  Request r;
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0;
  return r;
}

TEST(EngineSessionModel, EachTurnEqualsItsFullHistorySubmittedFreshWithoutTheCache) {
  std::unique_ptr<Engine> chat = load(config(true));
  std::unique_ptr<Engine> fresh = load(config(false));
  ASSERT_TRUE(chat && fresh);
  const std::vector<std::string> user = {
      "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nName a "
      "large animal that lives in the sea.<|im_end|>\n<|im_start|>assistant\n",
      "\n<|im_start|>user\nHow big can it get?<|im_end|>\n<|im_start|>assistant\n",
      "\n<|im_start|>user\nWhat does it eat?<|im_end|>\n<|im_start|>assistant\n",
  };
  uint64_t hit_before = 0;
  for (size_t t = 0; t < user.size(); ++t) {
    SCOPED_TRACE("turn " + std::to_string(t + 1));
    const std::optional<std::vector<TokenId>> history = chat->session_history("sea");
    ASSERT_EQ(history.has_value(), t > 0);
    Request r = greedy(TextPrompt{user[t], /*add_special=*/true, /*parse_special=*/true}, 24);
    r.session_id = "sea";
    RequestHandle h = chat->submit(std::move(r));
    Expected<Completion> turn = h.wait();
    ASSERT_TRUE(turn.ok());
    ASSERT_NE(turn->finish.reason, FinishReason::kRejected) << turn->finish.message;
    std::printf("turn %zu (%d prompt tokens): %s\n", t + 1, turn->finish.usage.prompt_tokens,
                turn->text.c_str());

    // The same prompt, built by hand: the history, then the input without BOS.
    std::vector<TokenId> full = history.value_or(std::vector<TokenId>{});
    const std::vector<TokenId> input =
        chat->codec().encode(TextPrompt{user[t], /*add_special=*/t == 0, /*parse_special=*/true});
    full.insert(full.end(), input.begin(), input.end());
    EXPECT_EQ(turn->finish.usage.prompt_tokens, int32_t(full.size()));
    RequestHandle f = fresh->submit(greedy(full, 24));
    Expected<Completion> reference = f.wait();
    ASSERT_TRUE(reference.ok());
    EXPECT_EQ(turn->tokens, reference->tokens);
    EXPECT_EQ(turn->text, reference->text);

    const uint64_t hit = chat->metrics().prefix_cache.hit_tokens;
    if (t > 0) EXPECT_GT(hit, hit_before) << "a later turn reuses the session's KV";
    hit_before = hit;
  }
  EXPECT_TRUE(chat->end_session("sea").ok());
}

}  // namespace
}  // namespace drift
