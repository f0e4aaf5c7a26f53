// Llama 3.1-style per-dimension RoPE frequency factors (rope_freqs.weight) on a synthetic llama
// model (scripts/fixtures/make_llama_rope_freqs.py), against llama.cpp's logit vectors for 64
// positions. The fixture also holds llama.cpp's logits for the same weights without the factors,
// so the test can tell "applies them as llama.cpp does" from "ignores or misapplies them".
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

TEST(LlamaRopeFreqs, LogitsMatchLlamaCppWithTheFactorsApplied) {
  std::ifstream meta_in(kFixtures / "llama_rope_freqs_logits.json");
  ASSERT_TRUE(meta_in.good());
  const nlohmann::json meta = nlohmann::json::parse(meta_in);
  const std::vector<int32_t> tokens = meta["tokens"].get<std::vector<int32_t>>();
  const int64_t n = static_cast<int64_t>(tokens.size());
  const int64_t n_vocab = meta["n_vocab"];
  const std::vector<float> want =
      read_f32_fixture(kFixtures / meta["logits_file"].get<std::string>(), n * n_vocab);
  const std::vector<float> without =
      read_f32_fixture(kFixtures / meta["logits_no_factors_file"].get<std::string>(), n * n_vocab);

  auto runner = ModelRunner::load((kFixtures / "llama-rope-freqs.gguf").string(), n);
  ASSERT_NE(runner, nullptr);
  std::span<const float> got = runner->run(tokens, 0, /*all_logits=*/true);

  // Ignoring the factors (or dividing the wrong pairs) moves the logits by about the whole
  // with/without gap (10.35 here); rounding differences between two faithful implementations
  // of these formats are ~0.1 (the qwen2 synthetic fixture: 0.07). 5% of the gap separates
  // the two cases with room on both sides.
  const double gap = meta["max_abs_diff_with_vs_without_factors"];
  const double tolerance = 0.05 * gap;
  const std::vector<double> top2_gap = meta["top2_gap"].get<std::vector<double>>();
  const LogitAgreement with = compare_logits(got, want, n_vocab, top2_gap, 2 * tolerance);
  const double max_diff_without =
      compare_logits(got, without, n_vocab, std::vector<double>(top2_gap.size(), 0.0), INFINITY)
          .max_abs_diff;  // no position is decisive: only the distance is wanted
  EXPECT_LE(with.max_abs_diff, tolerance);
  EXPECT_GT(max_diff_without, 10 * tolerance) << "drift's logits are as close to the model "
                                                 "without factors as to the one with them";
  std::printf(
      "llama rope_freqs: max |drift - llama.cpp| = %.4f (tolerance %.4f; %.2f to the "
      "logits without factors), argmax %d/%lld\n",
      with.max_abs_diff, tolerance, max_diff_without, with.argmax_agree, static_cast<long long>(n));
}

}  // namespace
}  // namespace drift::test
