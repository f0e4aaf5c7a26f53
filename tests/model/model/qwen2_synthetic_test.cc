// The qwen2 architecture (llama with q/k/v biases, NEOX RoPE) on a synthetic model with Qwen2's
// geometry scaled down (scripts/fixtures/make_qwen2_synthetic.py), against llama.cpp's full logit
// vectors for 64 positions.
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

TEST(Qwen2Synthetic, LogitsMatchLlamaCppWithinTheFormatsPrecision) {
  std::ifstream meta_in(kFixtures / "qwen2_synthetic_logits.json");
  ASSERT_TRUE(meta_in.good());
  nlohmann::json meta = nlohmann::json::parse(meta_in);
  std::vector<int32_t> tokens = meta["tokens"].get<std::vector<int32_t>>();
  const int64_t n = static_cast<int64_t>(tokens.size());
  const int64_t n_vocab = meta["n_vocab"];

  std::ifstream logits_in(kFixtures / "qwen2_synthetic_logits.f32", std::ios::binary);
  std::vector<float> expected(n * n_vocab);
  logits_in.read(reinterpret_cast<char*>(expected.data()), expected.size() * sizeof(float));
  ASSERT_EQ(logits_in.gcount(), static_cast<std::streamsize>(expected.size() * sizeof(float)));

  auto runner = ModelRunner::load((kFixtures / "qwen2-synthetic.gguf").string(), n);
  ASSERT_NE(runner, nullptr);
  ASSERT_EQ(runner->config().arch, Architecture::kQwen2);
  ASSERT_TRUE(runner->config().qkv_bias);
  std::span<const float> logits = runner->run(tokens, 0, /*all_logits=*/true);

  // Tolerance: llama.cpp's own logits differ from an exact float64 forward of the same
  // (dequantized) weights by at most `vs_float64_reference.max_abs_diff` — the error that 8-bit
  // activations, fp16 K/V and fp16 weights introduce. drift rounds the same quantities, so its
  // error against the exact forward is of the same size, and the two implementations can differ
  // by at most the sum of both errors: twice llama.cpp's.
  const double tolerance = 2.0 * meta["vs_float64_reference"]["max_abs_diff"].get<double>();
  double max_diff = 0.0;
  int argmax_agree = 0;
  for (int64_t t = 0; t < n; ++t) {
    const float* got = logits.data() + t * n_vocab;
    const float* want = expected.data() + t * n_vocab;
    for (int64_t v = 0; v < n_vocab; ++v)
      max_diff = std::max(max_diff, static_cast<double>(std::fabs(got[v] - want[v])));
    const double gap = meta["stats"]["top2_gap"][t];
    const bool agree = argmax_of(got, n_vocab) == argmax_of(want, n_vocab);
    argmax_agree += agree;
    if (gap > tolerance) EXPECT_TRUE(agree) << "position " << t << " (llama.cpp gap " << gap << ")";
  }
  EXPECT_LE(max_diff, tolerance);
  std::printf("qwen2 synthetic: max |drift - llama.cpp| = %.4f (tolerance %.4f), argmax %d/%lld\n",
              max_diff, tolerance, argmax_agree, static_cast<long long>(n));
}

}  // namespace
}  // namespace drift::test
