// Speculative decoding with a draft model (--spec draft) on SmolLM2, whose draft is SmolLM2
// itself: its greedy drafts are the target's own argmax, so nearly every draft is accepted (the
// test asserts it, so that the draft path is exercised, not idle), and every request's tokens and
// logprobs are exactly those of --spec none — greedy alone and batched, and a seeded sampled
// request. A draft model with another vocabulary (Gemma 3) is refused, naming both files.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/engine.h"
#include "runtime/load_engine.h"
#include "spec_runs.h"
#include "test_models.h"

namespace drift {
namespace {

struct DraftRun {
  std::vector<test::SpecOutput> outputs;
  EngineMetrics metrics;
};

// Ordinary prompts: little to copy, so n-grams rarely match and the draft model drafts.
const std::vector<std::string> kPrompts = {
    "What is the capital of France? Answer in one sentence.",
    "Write a short poem about the sea.",
    "Explain in two sentences why the sky is blue.",
};

EngineConfig config(SpecMode mode, bool with_draft) {
  EngineConfig c;
  c.threads = 1;
  c.max_model_len = 512;
  c.kv.budget = KVMemoryBudget::of_bytes(uint64_t{32} << 20);
  c.kv.dtype = KVDtype::kF16;
  c.scheduler.max_num_batched_tokens = 256;
  c.scheduler.max_num_seqs = 4;
  c.scheduler.spec.mode = mode;
  if (with_draft) c.spec_draft.model_path = test::model_path(test::kSmolLm2File).string();
  return c;
}

DraftRun run(SpecMode mode, bool with_draft, bool concurrent, bool sampled) {
  DraftRun result;
  const auto path = test::model_path(test::kSmolLm2File);
  EXPECT_TRUE(test::model_available(path));
  auto engine = load_engine(path.string(), config(mode, with_draft));
  EXPECT_TRUE(engine.ok()) << (engine.ok() ? "" : engine.error().message);
  if (!engine.ok()) return result;
  std::vector<Request> requests;
  for (size_t i = 0; i < kPrompts.size(); ++i) {
    Request r;
    r.prompt = TextPrompt{kPrompts[i], /*add_special=*/true, /*parse_special=*/false};
    r.max_tokens = 40;
    r.sampling.ignore_eos = true;
    r.sampling.logprobs = 3;
    r.sampling.temperature = 0;
    if (sampled) {
      r.sampling.temperature = 0.8f;
      r.sampling.top_k = 40;
      r.sampling.top_p = 0.95f;
      r.sampling.seed = 7 + i;
    }
    requests.push_back(std::move(r));
  }
  result.outputs = test::run_requests(**engine, std::move(requests), concurrent);
  result.metrics = (*engine)->metrics();
  return result;
}

void expect_same_outputs(const DraftRun& spec, const DraftRun& plain) {
  test::expect_same_outputs(spec.outputs, plain.outputs);
}

// Its own draft: the argmax of the same logits, so (nearly) every draft token is accepted.
void expect_draft_model_accepted_nearly_all(const EngineMetrics& m) {
  EXPECT_GT(m.spec_draft_model_draft_tokens, 40u);
  EXPECT_GE(double(m.spec_draft_model_accepted_tokens),
            0.95 * double(m.spec_draft_model_draft_tokens));
  EXPECT_GT(m.spec_draft_model_steps, 0u);
  EXPECT_GT(m.spec_draft_model_seconds, 0.0);
  EXPECT_GT(m.spec_draft_model_kv_bytes, 0u);
}

TEST(EngineSpecDraftModel, GreedyAloneGivesTheTokensOfSpecNone) {
  const DraftRun plain = run(SpecMode::kNone, false, /*concurrent=*/false, /*sampled=*/false);
  const DraftRun draft = run(SpecMode::kDraft, true, /*concurrent=*/false, /*sampled=*/false);
  expect_same_outputs(draft, plain);
  expect_draft_model_accepted_nearly_all(draft.metrics);
}

TEST(EngineSpecDraftModel, GreedyBatchedGivesTheTokensOfSpecNone) {
  const DraftRun plain = run(SpecMode::kNone, false, /*concurrent=*/true, /*sampled=*/false);
  const DraftRun draft = run(SpecMode::kDraft, true, /*concurrent=*/true, /*sampled=*/false);
  expect_same_outputs(draft, plain);
  expect_draft_model_accepted_nearly_all(draft.metrics);
}

TEST(EngineSpecDraftModel, SeededSampledRequestsGiveTheTokensOfSpecNone) {
  const DraftRun plain = run(SpecMode::kNone, false, /*concurrent=*/true, /*sampled=*/true);
  const DraftRun draft = run(SpecMode::kDraft, true, /*concurrent=*/true, /*sampled=*/true);
  expect_same_outputs(draft, plain);
  EXPECT_GT(draft.metrics.spec_draft_model_draft_tokens, 0u);
  EXPECT_GT(draft.metrics.spec_draft_model_accepted_tokens, 0u);
}

TEST(EngineSpecDraftModel, ADraftModelWithAnotherVocabularyIsRefused) {
  const auto path = test::model_path(test::kSmolLm2File);
  const auto gemma = test::model_path(test::kGemma3File);
  ASSERT_TRUE(test::model_available(path));
  ASSERT_TRUE(test::model_available(gemma));
  EngineConfig c = config(SpecMode::kDraft, false);
  c.spec_draft.model_path = gemma.string();
  auto engine = load_engine(path.string(), c);
  ASSERT_FALSE(engine.ok());
  const std::string& message = engine.error().message;
  EXPECT_NE(message.find(gemma.string()), std::string::npos) << message;
  EXPECT_NE(message.find(path.string()), std::string::npos) << message;
  EXPECT_NE(message.find("vocabulary"), std::string::npos) << message;
}

TEST(EngineSpecDraftModel, SpecDraftWithoutADraftModelIsRefused) {
  auto engine =
      load_engine(test::model_path(test::kSmolLm2File).string(), config(SpecMode::kDraft, false));
  ASSERT_FALSE(engine.ok());
  EXPECT_NE(engine.error().message.find("--spec-draft-model"), std::string::npos)
      << engine.error().message;
}

}  // namespace
}  // namespace drift
