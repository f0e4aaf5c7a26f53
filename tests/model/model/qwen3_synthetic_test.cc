// The qwen3 architecture (qwen2 without biases, RMSNorm over each q and k head before NEOX RoPE)
// on a synthetic model (scripts/fixtures/make_qwen3_synthetic.py) with the qwen2 synthetic
// model's geometry and formats, against llama.cpp's logit vectors for 64 positions.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
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

TEST(Qwen3Synthetic, LogitsMatchLlamaCppWithinTheFormatsPrecision) {
  const nlohmann::json meta = read_json("qwen3_synthetic_logits.json");
  const std::vector<int32_t> tokens = meta["tokens"].get<std::vector<int32_t>>();
  const int64_t n = static_cast<int64_t>(tokens.size());
  const int64_t n_vocab = meta["n_vocab"];
  const std::vector<float> expected =
      read_f32_fixture(kFixtures / "qwen3_synthetic_logits.f32", n * n_vocab);

  auto runner = ModelRunner::load((kFixtures / "qwen3-synthetic.gguf").string(), n);
  ASSERT_NE(runner, nullptr);
  ASSERT_EQ(runner->config().arch, Architecture::kQwen3);
  ASSERT_TRUE(runner->config().qk_norm);
  ASSERT_FALSE(runner->config().qkv_bias);
  std::span<const float> logits = runner->run(tokens, 0, /*all_logits=*/true);

  // The same formats and geometry as the qwen2 synthetic model, whose fixture measured how far
  // llama.cpp's logits are from an exact float64 forward; drift may be as far on the other side,
  // so the two may differ by twice that (the reasoning of qwen2_synthetic_test.cc).
  const double tolerance =
      2.0 * read_json("qwen2_synthetic_logits.json")["vs_float64_reference"]["max_abs_diff"]
                .get<double>();
  const LogitAgreement a = compare_logits(logits, expected, n_vocab,
                                          meta["top2_gap"].get<std::vector<double>>(), tolerance);
  EXPECT_LE(a.max_abs_diff, tolerance);
  std::printf("qwen3 synthetic: max |drift - llama.cpp| = %.4f (tolerance %.4f), argmax %d/%lld\n",
              a.max_abs_diff, tolerance, a.argmax_agree, static_cast<long long>(n));
}

}  // namespace
}  // namespace drift::test
