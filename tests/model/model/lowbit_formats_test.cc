// The low-bit weight formats on files llama-quantize wrote (Q2_K, Q3_K_M, IQ4_NL, IQ4_XS mixes of
// a synthetic qwen2 model, scripts/fixtures/make_lowbit_synthetic.py), against llama.cpp on the
// same files: the logits of 64 positions and the perplexity of a text.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model_runner.h"

namespace drift::test {
namespace {

const std::filesystem::path kFixtures = std::filesystem::path(DRIFT_TEST_DATA_DIR) / "model";

nlohmann::json read_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
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

class LowBitFormats : public ::testing::TestWithParam<std::string> {
 protected:
  nlohmann::json meta() const {
    return read_json(kFixtures / ("lowbit_" + GetParam() + "_logits.json"));
  }
  std::string model_path() const {
    return (kFixtures / ("lowbit-" + GetParam() + ".gguf")).string();
  }
};

// llama.cpp's logits differ from an exact float64 forward of the file's weights by its own
// rounding (the activations it quantizes to Q8_K/Q8_0, fp16 K/V); drift rounds the same
// quantities, and may land as far on the other side, so the two may differ by twice that.
TEST_P(LowBitFormats, LogitsMatchLlamaCppWithinTwiceItsOwnError) {
  const nlohmann::json m = meta();
  const std::vector<int32_t> tokens = m["tokens"].get<std::vector<int32_t>>();
  const int64_t n = static_cast<int64_t>(tokens.size());
  const int64_t n_vocab = m["n_vocab"];
  const std::vector<float> expected =
      read_f32_fixture(kFixtures / m["logits_file"].get<std::string>(), n * n_vocab);
  auto runner = ModelRunner::load(model_path(), n);
  ASSERT_NE(runner, nullptr);
  std::span<const float> logits = runner->run(tokens, 0, /*all_logits=*/true);

  const double tolerance = 2.0 * m["vs_float64_reference"]["max_abs_diff"].get<double>();
  const LogitAgreement a = compare_logits(logits, expected, n_vocab,
                                          m["top2_gap"].get<std::vector<double>>(), tolerance);
  EXPECT_LE(a.max_abs_diff, tolerance);
  std::printf("%s: max |drift - llama.cpp| = %.4f (tolerance %.4f), argmax %d/%lld\n",
              GetParam().c_str(), a.max_abs_diff, tolerance, a.argmax_agree,
              static_cast<long long>(n));
}

// llama-perplexity's computation: chunks of n_ctx tokens from position 0, each scoring the
// predictions of tokens [n_ctx / 2 + 1, n_ctx).
TEST_P(LowBitFormats, PerplexityWithinOnePercentOfLlamaCpp) {
  const nlohmann::json p = meta()["perplexity"];
  const std::vector<int32_t> ids = p["tokens"].get<std::vector<int32_t>>();
  const int64_t n_ctx = p["n_ctx"];
  auto runner = ModelRunner::load(model_path(), n_ctx);
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
  std::printf("%s: perplexity %.4f, llama.cpp %.4f (%+.3f%%)\n", GetParam().c_str(), ppl, reference,
              100.0 * (ppl / reference - 1.0));
}

INSTANTIATE_TEST_SUITE_P(LlamaQuantizeFiles, LowBitFormats,
                         ::testing::Values("q2_k", "q3_k_m", "iq4_nl", "iq4_xs"));

}  // namespace
}  // namespace drift::test
