// Speculative decoding on SmolLM2: with n-gram drafts on, every request's tokens and logprobs
// are exactly those of decoding one token a step — greedy or sampled (with penalties and
// filters), alone or batched with other sequences, with an f16 or an int8 KV cache — on prompts
// that repeat themselves, where drafts are accepted (the test asserts they are, so that it
// exercises speculation rather than passing with it idle).
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "runtime/load_engine.h"
#include "scheduler/ngram_pool.h"
#include "spec_runs.h"
#include "test_models.h"

namespace drift {
namespace {

struct SpecRun {
  std::vector<test::SpecOutput> outputs;
  EngineMetrics metrics;
};

// Prompts whose continuations copy earlier text: a list that repeats, code to re-emit, JSON
// re-emitted with one change, and one ordinary question (little to copy).
std::vector<std::string> prompts() {
  return {
      "Count with me: 1, 2, 3, 4, 5, 6, 7, 8, 9, 10. Again: 1, 2, 3, 4, 5, 6, 7, 8, 9, 10. "
      "Again: 1, 2, 3,",
      "Copy this code exactly.\ndef add(a, b):\n    return a + b\n\ndef sub(a, b):\n    return "
      "a - b\n\nCopy:\ndef add(a, b):\n",
      "Repeat the JSON: {\"name\": \"Ada\", \"age\": 36, \"city\": \"London\", \"tags\": "
      "[\"math\", \"code\"]}\nRepeated: {\"name\": \"Ada\",",
      "What is the capital of France? Answer in one sentence.",
      "The cat sat on the mat. The dog sat on the log. The cat sat on the mat. The dog sat",
  };
}

enum class Sampling { kGreedy, kSampled };

Request make_request(const std::string& prompt, Sampling sampling, uint64_t seed) {
  Request r;
  r.prompt = TextPrompt{prompt, /*add_special=*/true, /*parse_special=*/false};
  r.max_tokens = 48;
  r.sampling.ignore_eos = true;  // every request runs its full length
  r.sampling.logprobs = 3;
  if (sampling == Sampling::kGreedy) {
    r.sampling.temperature = 0;
  } else {
    r.sampling.temperature = 0.8f;
    r.sampling.top_k = 40;
    r.sampling.top_p = 0.95f;
    r.sampling.min_p = 0.02f;
    r.sampling.repetition_penalty = 1.05f;
    r.sampling.frequency_penalty = 0.1f;
    r.sampling.seed = seed;
  }
  return r;
}

// A Gemma 3 run: its sliding layers (window 512) in KV groups of their own, whose pages leave
// the window as the sequences pass it.
struct Gemma3 {
  std::vector<std::string> texts;
};

// Runs the prompts through an engine with speculation `mode`, concurrently (batched) or one
// after the other (alone); on SmolLM2, or on Gemma 3 with `gemma3`'s prompts.
// `pool_entries`: the n-gram pool shared across requests (0: none); `texts`: other prompts.
SpecRun run(SpecMode mode, Sampling sampling, bool concurrent, KVDtype dtype = KVDtype::kF16,
            const std::optional<Gemma3>& gemma3 = std::nullopt, int64_t pool_entries = 0,
            const std::vector<std::string>* texts_given = nullptr) {
  SpecRun result;
  const auto path = test::model_path(gemma3 ? test::kGemma3File : test::kSmolLm2File);
  EXPECT_TRUE(test::model_available(path));
  EngineConfig c;
  c.threads = 1;  // outputs do not depend on it; a busy 2-core machine runs one faster
  c.max_model_len = gemma3 ? 1024 : 512;
  c.kv.budget = KVMemoryBudget::of_bytes(uint64_t{32} << 20);
  c.kv.dtype = dtype;
  c.scheduler.max_num_batched_tokens = 256;
  c.scheduler.max_num_seqs = 8;
  c.scheduler.spec.mode = mode;
  c.scheduler.spec.pool_entries = pool_entries;
  auto engine = load_engine(path.string(), c);
  EXPECT_TRUE(engine.ok()) << (engine.ok() ? "" : engine.error().message);
  if (!engine.ok()) return result;
  const std::vector<std::string> texts =
      texts_given ? *texts_given : (gemma3 ? gemma3->texts : prompts());
  std::vector<Request> requests;
  for (size_t i = 0; i < texts.size(); ++i)
    requests.push_back(make_request(texts[i], sampling, 1000 + i));
  result.outputs = test::run_requests(**engine, std::move(requests), concurrent);
  result.metrics = (*engine)->metrics();
  return result;
}

void expect_same_outputs(const SpecRun& spec, const SpecRun& plain) {
  test::expect_same_outputs(spec.outputs, plain.outputs);
}

// Drafts were verified and some accepted, and fewer steps ran than tokens were generated alone.
void expect_speculated(const SpecRun& spec, const SpecRun& plain) {
  EXPECT_GT(spec.metrics.spec_drafts, 0u);
  EXPECT_GT(spec.metrics.spec_accepted_tokens, 0u);
  EXPECT_LE(spec.metrics.spec_accepted_tokens, spec.metrics.spec_draft_tokens);
  EXPECT_EQ(plain.metrics.spec_draft_tokens, 0u);
  EXPECT_LT(spec.metrics.steps, plain.metrics.steps);
  std::printf("spec: %llu drafts, %llu draft tokens, %llu accepted; %llu steps (%llu without)\n",
              (unsigned long long)spec.metrics.spec_drafts,
              (unsigned long long)spec.metrics.spec_draft_tokens,
              (unsigned long long)spec.metrics.spec_accepted_tokens,
              (unsigned long long)spec.metrics.steps, (unsigned long long)plain.metrics.steps);
}

TEST(EngineSpecDecode, GreedyAloneGivesTheTokensAndLogprobsOfOneTokenAStep) {
  const SpecRun plain = run(SpecMode::kNone, Sampling::kGreedy, /*concurrent=*/false);
  const SpecRun spec = run(SpecMode::kNgram, Sampling::kGreedy, /*concurrent=*/false);
  expect_same_outputs(spec, plain);
  expect_speculated(spec, plain);
}

TEST(EngineSpecDecode, GreedyBatchedGivesTheSoloTokens) {
  const SpecRun plain = run(SpecMode::kNone, Sampling::kGreedy, /*concurrent=*/false);
  const SpecRun spec = run(SpecMode::kNgram, Sampling::kGreedy, /*concurrent=*/true);
  expect_same_outputs(spec, plain);
  expect_speculated(spec, plain);
}

// The random draw of each verified position is the one decoding would make there, so a seeded
// sampled request gives the same text with speculation on: the output distribution is exactly
// the model's (standard speculative sampling with a point-mass draft).
TEST(EngineSpecDecode, SampledWithPenaltiesAndFiltersGivesTheSameTokens) {
  const SpecRun plain = run(SpecMode::kNone, Sampling::kSampled, /*concurrent=*/true);
  const SpecRun spec = run(SpecMode::kNgram, Sampling::kSampled, /*concurrent=*/true);
  expect_same_outputs(spec, plain);
  EXPECT_GT(spec.metrics.spec_accepted_tokens, 0u);
}

TEST(EngineSpecDecode, Int8KvCacheGivesTheSameTokens) {
  const SpecRun plain =
      run(SpecMode::kNone, Sampling::kGreedy, /*concurrent=*/true, KVDtype::kInt8);
  const SpecRun spec =
      run(SpecMode::kNgram, Sampling::kGreedy, /*concurrent=*/true, KVDtype::kInt8);
  expect_same_outputs(spec, plain);
  EXPECT_GT(spec.metrics.spec_accepted_tokens, 0u);
}

// Sliding-window KV groups: the drafts' slots and pages in every group are rolled back, and the
// sliding groups free pages by committed positions only. Prompts past the 512-token window.
TEST(EngineSpecDecode, Gemma3SlidingGroupsGiveTheSameTokens) {
  std::string notes;
  for (int part = 1; part <= 20; ++part)
    notes += "Item " + std::to_string(part) +
             ": the pump is checked every morning, the filter every week, and the valve every "
             "month; record the date, the reading and your initials in the log.\n";
  const Gemma3 gemma3{{notes + "Repeat item 3 exactly:\nItem 3:", notes + "Repeat item 9:\n"}};
  const SpecRun plain =
      run(SpecMode::kNone, Sampling::kGreedy, /*concurrent=*/true, KVDtype::kF16, gemma3);
  const SpecRun spec =
      run(SpecMode::kNgram, Sampling::kGreedy, /*concurrent=*/true, KVDtype::kF16, gemma3);
  expect_same_outputs(spec, plain);
  EXPECT_GT(spec.metrics.spec_accepted_tokens, 0u);
}

// The shared pool: a question asked again, after an unrelated request, is answered with the
// text of the first answer, which the second request's own prompt cannot draft (there is little
// to copy in it) but the pool, which recorded the first answer, can. The tokens and logprobs stay
// those of one token a step; the pool's drafts are accepted.
TEST(EngineSpecDecode, SharedPoolDraftsAnAnswerGivenBeforeAndKeepsTheTokens) {
  const std::vector<std::string> texts = {
      "What is the capital of France? Answer in one sentence.",
      "Write a short poem about the sea.",
      "What is the capital of France? Answer in one sentence.",
  };
  const SpecRun plain = run(SpecMode::kNone, Sampling::kGreedy, /*concurrent=*/false, KVDtype::kF16,
                            std::nullopt, 0, &texts);
  const SpecRun own = run(SpecMode::kNgram, Sampling::kGreedy, /*concurrent=*/false, KVDtype::kF16,
                          std::nullopt, 0, &texts);
  const SpecRun pooled = run(SpecMode::kNgram, Sampling::kGreedy, /*concurrent=*/false,
                             KVDtype::kF16, std::nullopt, 1 << 16, &texts);
  expect_same_outputs(pooled, plain);
  expect_same_outputs(own, plain);
  EXPECT_EQ(plain.outputs[0].tokens, plain.outputs[2].tokens) << "the test's premise";
  EXPECT_GT(pooled.metrics.spec_pool_accepted_tokens, 0u);
  EXPECT_LE(pooled.metrics.spec_pool_accepted_tokens, pooled.metrics.spec_pool_draft_tokens);
  EXPECT_EQ(own.metrics.spec_pool_draft_tokens, 0u);
  EXPECT_EQ(pooled.metrics.spec_pool_bytes, (uint64_t{1} << 16) * NgramPool::kEntryBytes);
  EXPECT_GT(pooled.metrics.spec_accepted_tokens, own.metrics.spec_accepted_tokens);
  EXPECT_LT(pooled.metrics.steps, own.metrics.steps);
}

}  // namespace
}  // namespace drift
