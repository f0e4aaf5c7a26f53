// The gpt-oss architecture (attention with q/k/v/output biases and a sink logit per head,
// sliding-window layers 0 and 2 and full layers 1 and 3, YaRN RoPE, 8 biased experts with top-4
// routing and the clamped SwiGLU) on a synthetic model whose experts llama-quantize wrote in MXFP4
// (MXFP4_MOE; scripts/fixtures/make_gpt_oss_synthetic.py), against llama.cpp on the same file: the
// logits of 64 positions, a greedy continuation of 64 tokens and the perplexity of a text.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model_runner.h"

namespace drift::test {
namespace {

const std::filesystem::path kFixtures = std::filesystem::path(DRIFT_TEST_DATA_DIR) / "model";
const std::string kModel = (kFixtures / "gpt-oss-synthetic.gguf").string();

nlohmann::json meta() {
  std::ifstream in(kFixtures / "gpt_oss_synthetic.json");
  EXPECT_TRUE(in.good());
  return nlohmann::json::parse(in);
}

// -log softmax(row)[target], in double.
double nll(const float* row, int64_t n_vocab, int32_t target) {
  double max = row[0];
  for (int64_t v = 1; v < n_vocab; ++v) max = std::max(max, static_cast<double>(row[v]));
  double sum = 0.0;
  for (int64_t v = 0; v < n_vocab; ++v) sum += std::exp(row[v] - max);
  return -(row[target] - max - std::log(sum));
}

// llama.cpp's logits differ from a float64 forward of the file's weights (with llama.cpp's own
// expert choices) by its rounding: the activations it quantizes to Q8_0 (for the Q8_0 attention
// and MXFP4 expert matrices), fp16 K/V. drift
// rounds the same quantities and may land as far on the other side, so the two may differ by
// twice that. Every position must also route as llama.cpp did, or it would land much further.
TEST(GptOssSynthetic, LogitsMatchLlamaCppWithinTwiceItsOwnError) {
  const nlohmann::json m = meta();
  const std::vector<int32_t> tokens = m["tokens"].get<std::vector<int32_t>>();
  const int64_t n = static_cast<int64_t>(tokens.size());
  const int64_t n_vocab = m["n_vocab"];
  const std::vector<float> expected =
      read_f32_fixture(kFixtures / m["logits_file"].get<std::string>(), n * n_vocab);
  auto runner = ModelRunner::load(kModel, n);
  ASSERT_NE(runner, nullptr);
  ASSERT_EQ(runner->config().arch, Architecture::kGptOss);
  ASSERT_EQ(runner->config().n_expert, 5);
  ASSERT_EQ(runner->config().n_expert_used, 4);
  ASSERT_TRUE(runner->config().layers[0].sliding_window);
  ASSERT_FALSE(runner->config().layers[1].sliding_window);
  ASSERT_EQ(runner->config().sliding_window, 16);
  std::span<const float> logits = runner->run(tokens, 0, /*all_logits=*/true);

  const double tolerance = 2.0 * m["vs_float64_reference"]["max_abs_diff"].get<double>();
  const LogitAgreement a = compare_logits(logits, expected, n_vocab,
                                          m["top2_gap"].get<std::vector<double>>(), tolerance);
  EXPECT_LE(a.max_abs_diff, tolerance);
  std::printf("gpt-oss: max |drift - llama.cpp| = %.4f (tolerance %.4f), argmax %d/%lld\n",
              a.max_abs_diff, tolerance, a.argmax_agree, static_cast<long long>(n));
}

// The prompt in one step, then one token per step, each the argmax of the last: as llama.cpp's
// greedy decode of the fixture.
TEST(GptOssSynthetic, GreedyContinuationIsLlamaCpps) {
  const nlohmann::json g = meta()["greedy"];
  const std::vector<int32_t> prompt = g["prompt"].get<std::vector<int32_t>>();
  const std::vector<int32_t> expected = g["tokens"].get<std::vector<int32_t>>();
  const int64_t total = static_cast<int64_t>(prompt.size() + expected.size());
  auto runner = ModelRunner::load(kModel, total);
  ASSERT_NE(runner, nullptr);
  const int64_t n_vocab = runner->config().n_vocab;
  std::span<const float> last = runner->run(prompt, 0, /*all_logits=*/false);
  std::vector<int32_t> got;
  int64_t pos = static_cast<int64_t>(prompt.size());
  while (got.size() < expected.size()) {
    const int32_t next = argmax_of(last.data(), n_vocab);
    got.push_back(next);
    last = runner->run({&got.back(), 1}, pos++, false);
  }
  const auto first_difference = std::mismatch(got.begin(), got.end(), expected.begin()).first;
  EXPECT_EQ(got, expected) << "first difference at step " << first_difference - got.begin();
}

// llama-perplexity's computation: chunks of n_ctx tokens from position 0, each scoring the
// predictions of tokens [n_ctx / 2 + 1, n_ctx).
TEST(GptOssSynthetic, PerplexityWithinOnePercentOfLlamaCpp) {
  const nlohmann::json p = meta()["perplexity"];
  const std::vector<int32_t> ids = p["tokens"].get<std::vector<int32_t>>();
  const int64_t n_ctx = p["n_ctx"];
  auto runner = ModelRunner::load(kModel, n_ctx);
  ASSERT_NE(runner, nullptr);
  const int64_t n_vocab = runner->config().n_vocab;
  double total = 0.0;
  int64_t scored = 0;
  for (size_t c = 0; c + n_ctx <= ids.size(); c += n_ctx) {
    const std::vector<int32_t> chunk(ids.begin() + c, ids.begin() + c + n_ctx);
    std::span<const float> logits = runner->run(chunk, 0, /*all_logits=*/true);
    for (int64_t j = n_ctx / 2; j + 1 < n_ctx; ++j) {
      total += nll(logits.data() + j * n_vocab, n_vocab, chunk[j + 1]);
      ++scored;
    }
  }
  ASSERT_GT(scored, 0);
  const double ppl = std::exp(total / scored);
  const double reference = p["ppl"];
  EXPECT_NEAR(ppl, reference, 0.01 * reference);
  std::printf("gpt-oss: perplexity %.4f, llama.cpp %.4f (%+.3f%%)\n", ppl, reference,
              100.0 * (ppl / reference - 1.0));
}

// Grouping a step's tokens by expert must not change any token's result: the 64 positions in
// one step (each expert serving many tokens at once) give the same bits as 64 steps of one.
TEST(GptOssSynthetic, ExpertGroupingLeavesEveryTokensLogitsBitwiseEqual) {
  const std::vector<int32_t> tokens = meta()["tokens"].get<std::vector<int32_t>>();
  const int64_t n = static_cast<int64_t>(tokens.size());
  auto runner = ModelRunner::load(kModel, n);
  ASSERT_NE(runner, nullptr);
  const int64_t n_vocab = runner->config().n_vocab;
  std::span<const float> all = runner->run(tokens, 0, /*all_logits=*/true);
  const std::vector<float> batched(all.begin(), all.end());
  for (int64_t t = 0; t < n; ++t) {
    std::span<const float> one = runner->run({&tokens[t], 1}, t, /*all_logits=*/true);
    ASSERT_EQ(0, std::memcmp(one.data(), &batched[t * n_vocab], n_vocab * sizeof(float)))
        << "position " << t;
  }
}

}  // namespace
}  // namespace drift::test
