// Speculative decoding under a grammar, on SmolLM2: the tokens a JSON schema forces (its keys,
// quotes and separators) ride as drafts, verified under the mask of each position, and the output
// — tokens and logprobs, greedy or seeded sampling — is exactly that of one token a step with
// speculation off. The test asserts that forced drafts were proposed and accepted, so that it
// exercises them rather than passing with speculation idle.
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
  FinishReason finish = FinishReason::kError;
  std::string text;
};

struct GrammarRun {
  std::vector<Output> outputs;
  EngineMetrics metrics;
};

const char* kPersonSchema = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "maxLength": 20},
    "occupation": {"type": "string", "maxLength": 20},
    "age": {"type": "integer"},
    "languages": {"type": "array", "items": {"type": "string", "maxLength": 12}, "maxItems": 3}
  },
  "required": ["name", "occupation", "age", "languages"],
  "additionalProperties": false
})";

Request make_request(const std::string& prompt, bool sampled, uint64_t seed) {
  Request r;
  r.prompt = TextPrompt{prompt, /*add_special=*/true, /*parse_special=*/false};
  r.max_tokens = 96;
  r.sampling.logprobs = 2;
  r.grammar = GrammarSpec{GrammarKind::kJsonSchema, kPersonSchema};
  if (sampled) {
    r.sampling.temperature = 0.7f;
    r.sampling.top_k = 40;
    r.sampling.seed = seed;
  } else {
    r.sampling.temperature = 0;
  }
  return r;
}

GrammarRun run(SpecMode mode, bool sampled) {
  GrammarRun result;
  const auto path = test::model_path(test::kSmolLm2File);
  EXPECT_TRUE(test::model_available(path));
  EngineConfig c;
  c.threads = 1;
  c.max_model_len = 512;
  c.kv.budget = KVMemoryBudget::of_bytes(uint64_t{32} << 20);
  c.scheduler.max_num_batched_tokens = 256;
  c.scheduler.max_num_seqs = 4;
  c.scheduler.spec.mode = mode;
  auto engine = load_engine(path.string(), c);
  EXPECT_TRUE(engine.ok()) << (engine.ok() ? "" : engine.error().message);
  if (!engine.ok()) return result;
  const std::vector<std::string> prompts = {
      "Describe Ada Lovelace as JSON.",
      "A person record for a Dutch baker named Sanne, 41, who speaks Dutch and English:",
      "JSON for a retired pilot:",
  };
  result.outputs.resize(prompts.size());
  std::mutex mutex;
  std::condition_variable done;
  size_t finished = 0;
  std::vector<RequestHandle> handles;
  for (size_t i = 0; i < prompts.size(); ++i)
    handles.push_back(
        (*engine)->submit(make_request(prompts[i], sampled, 500 + i), [&, i](TokenEvent e) {
          std::lock_guard lock(mutex);
          Output& o = result.outputs[i];
          if (e.token) o.tokens.push_back(*e.token);
          if (e.logprobs) o.logprobs.push_back(*e.logprobs);
          o.text += e.text;
          if (e.finish) {
            o.finish = e.finish->reason;
            EXPECT_NE(e.finish->reason, FinishReason::kError) << e.finish->message;
            ++finished;
            done.notify_one();
          }
        }));
  std::unique_lock lock(mutex);
  done.wait(lock, [&] { return finished == prompts.size(); });
  result.metrics = (*engine)->metrics();
  return result;
}

void expect_same_outputs(const GrammarRun& spec, const GrammarRun& plain) {
  ASSERT_EQ(spec.outputs.size(), plain.outputs.size());
  for (size_t i = 0; i < plain.outputs.size(); ++i) {
    SCOPED_TRACE("prompt " + std::to_string(i) + ": " + plain.outputs[i].text);
    EXPECT_EQ(spec.outputs[i].tokens, plain.outputs[i].tokens);
    EXPECT_EQ(spec.outputs[i].finish, plain.outputs[i].finish);
    ASSERT_EQ(spec.outputs[i].logprobs.size(), plain.outputs[i].logprobs.size());
    for (size_t k = 0; k < plain.outputs[i].logprobs.size(); ++k)
      EXPECT_EQ(std::memcmp(&spec.outputs[i].logprobs[k], &plain.outputs[i].logprobs[k],
                            sizeof(TokenLogprobs)),
                0)
          << "token " << k;
  }
}

void expect_forced_drafts_accepted(const GrammarRun& spec, const GrammarRun& plain) {
  EXPECT_GT(spec.metrics.spec_forced_draft_tokens, 0u);
  EXPECT_GT(spec.metrics.spec_forced_accepted_tokens, 0u);
  EXPECT_LE(spec.metrics.spec_forced_accepted_tokens, spec.metrics.spec_forced_draft_tokens);
  EXPECT_EQ(plain.metrics.spec_draft_tokens, 0u);
  EXPECT_LT(spec.metrics.steps, plain.metrics.steps);
  std::printf(
      "forced drafts: %llu tokens, %llu accepted; all drafts %llu, %llu accepted; "
      "%llu steps (%llu without)\n",
      (unsigned long long)spec.metrics.spec_forced_draft_tokens,
      (unsigned long long)spec.metrics.spec_forced_accepted_tokens,
      (unsigned long long)spec.metrics.spec_draft_tokens,
      (unsigned long long)spec.metrics.spec_accepted_tokens, (unsigned long long)spec.metrics.steps,
      (unsigned long long)plain.metrics.steps);
}

TEST(EngineSpecGrammar, ForcedTokensAreAcceptedAndGreedyOutputIsUnchanged) {
  const GrammarRun plain = run(SpecMode::kNone, /*sampled=*/false);
  const GrammarRun spec = run(SpecMode::kNgram, /*sampled=*/false);
  expect_same_outputs(spec, plain);
  expect_forced_drafts_accepted(spec, plain);
  for (const Output& o : plain.outputs) EXPECT_EQ(o.text.rfind('{', 0), 0u) << o.text;
}

TEST(EngineSpecGrammar, SeededSamplingGivesTheSameTokens) {
  const GrammarRun plain = run(SpecMode::kNone, /*sampled=*/true);
  const GrammarRun spec = run(SpecMode::kNgram, /*sampled=*/true);
  expect_same_outputs(spec, plain);
  expect_forced_drafts_accepted(spec, plain);
}

}  // namespace
}  // namespace drift
