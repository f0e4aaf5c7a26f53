// YaRN RoPE scaling (rope.scaling.type "yarn") on the synthetic qwen3 model
// (scripts/fixtures/make_qwen3_yarn_synthetic.py: factor 4 over an original context of 512),
// against llama.cpp's logits for 64 positions.
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

nlohmann::json read_json(const char* name) {
  std::ifstream in(kFixtures / name);
  EXPECT_TRUE(in.good()) << name;
  return nlohmann::json::parse(in);
}

TEST(Qwen3Yarn, LogitsMatchLlamaCppWithinTheFormatsPrecision) {
  const nlohmann::json meta = read_json("qwen3_yarn_synthetic_logits.json");
  const std::vector<int32_t> tokens = meta["tokens"].get<std::vector<int32_t>>();
  const int64_t n = static_cast<int64_t>(tokens.size());
  const int64_t n_vocab = meta["n_vocab"];
  const std::vector<float> expected =
      read_f32_fixture(kFixtures / meta["logits_file"].get<std::string>(), n * n_vocab);
  auto runner = ModelRunner::load((kFixtures / "qwen3-yarn-synthetic.gguf").string(), n);
  ASSERT_NE(runner, nullptr);
  EXPECT_EQ(runner->config().rope_ext_factor, 1.0f);
  EXPECT_EQ(runner->config().rope_freq_scale, 0.25f);
  EXPECT_EQ(runner->config().rope_n_ctx_orig, 512);
  std::span<const float> logits = runner->run(tokens, 0, /*all_logits=*/true);

  // The qwen3 synthetic model's weights and formats, so its tolerance (twice llama.cpp's own
  // error on them, see qwen3_synthetic_test.cc); the scaling itself moves the logits by far more
  // than that, so a reader that ignored it could not pass.
  const double tolerance =
      2.0 * read_json("qwen2_synthetic_logits.json")["vs_float64_reference"]["max_abs_diff"]
                .get<double>();
  ASSERT_GT(meta["max_abs_diff_from_unscaled"].get<double>(), 4 * tolerance);
  const LogitAgreement a = compare_logits(logits, expected, n_vocab,
                                          meta["top2_gap"].get<std::vector<double>>(), tolerance);
  EXPECT_LE(a.max_abs_diff, tolerance);
  std::printf(
      "qwen3 yarn: max |drift - llama.cpp| = %.4f (tolerance %.4f, unscaled model %.4f "
      "away), argmax %d/%lld\n",
      a.max_abs_diff, tolerance, meta["max_abs_diff_from_unscaled"].get<double>(), a.argmax_agree,
      static_cast<long long>(n));
}

}  // namespace
}  // namespace drift::test
