// int4 caches store keys minus the model's mean key (ForwardPass::key_offsets_). Attention must
// read the same distribution as without them, and closer to the exact one: on SmolLM2 over
// GPL-3 (the tokens of the llama.cpp teacher fixture), the logits' divergence from an f32 cache's
// is compared with and without the offsets.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/forward_pass.h"
#include "test_models.h"
#include "util/cpu_features.h"

namespace drift::test {
namespace {

constexpr int64_t kPageSize = 16;
constexpr int kChunks = 2;  // of 512 tokens

// log-softmax of a row of logits, in double.
std::vector<double> log_softmax(const float* logits, int64_t n) {
  const double max_logit = *std::max_element(logits, logits + n);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(logits[i] - max_logit);
  std::vector<double> out(n);
  for (int64_t i = 0; i < n; ++i) out[i] = logits[i] - max_logit - std::log(sum);
  return out;
}

// All-position logits [chunks][n_ctx][n_vocab] of the chunks, each from position 0, with the cache
// in `format` (int4 with or without its key offsets).
std::vector<float> chunk_logits(const Model& model, const std::vector<std::vector<int32_t>>& chunks,
                                kernels::KvFormat format, bool offsets) {
  const int64_t n_ctx = static_cast<int64_t>(chunks[0].size());
  const int64_t n_vocab = model.config().n_vocab;
  const int64_t n_pages = n_ctx / kPageSize;
  auto kv = KvPages::create(model.config(), n_pages, kPageSize, format);
  EXPECT_TRUE(kv.ok());
  auto forward = ForwardPass::create(model, ForwardLimits{n_ctx, 1, n_ctx, 2});
  EXPECT_TRUE(forward.ok());
  if (!kv.ok() || !forward.ok()) return {};
  if (!offsets) (*forward)->disable_int4_key_offsets();
  ThreadPool pool(2);
  std::vector<int32_t> pages(n_pages);
  for (int64_t i = 0; i < n_pages; ++i) pages[i] = static_cast<int32_t>(i);
  std::vector<float> logits(chunks.size() * n_ctx * n_vocab);
  for (size_t c = 0; c < chunks.size(); ++c) {
    ForwardSequence s;
    s.n_tokens = n_ctx;
    s.page_table = pages;
    s.all_logits = true;
    Status status =
        (*forward)->run(ForwardBatch{chunks[c], std::span<const ForwardSequence>(&s, 1)}, *kv, pool,
                        std::span<float>(logits).subspan(c * n_ctx * n_vocab, n_ctx * n_vocab));
    EXPECT_TRUE(status.ok()) << status.message();
  }
  return logits;
}

// Mean KL(exact || quantized) over every position.
double mean_kl(const std::vector<float>& exact, const std::vector<float>& quantized,
               int64_t n_vocab) {
  const int64_t rows = static_cast<int64_t>(exact.size()) / n_vocab;
  double total = 0.0;
  for (int64_t r = 0; r < rows; ++r) {
    const std::vector<double> p = log_softmax(&exact[r * n_vocab], n_vocab);
    const std::vector<double> q = log_softmax(&quantized[r * n_vocab], n_vocab);
    for (int64_t i = 0; i < n_vocab; ++i) total += std::exp(p[i]) * (p[i] - q[i]);
  }
  return total / static_cast<double>(rows);
}

TEST(Int4KeyOffsets, BringSmolLm2LogitsCloserToAnExactCache) {
  ASSERT_TRUE(model_available(model_path(kSmolLm2File)));
  auto isa = select_isa(detect_cpu_features());
  ASSERT_TRUE(isa.ok());
  auto model = Model::load(model_path(kSmolLm2File).string(), *isa);
  ASSERT_TRUE(model.ok()) << model.error().message;
  std::ifstream in(std::filesystem::path(DRIFT_TEST_DATA_DIR) / "model" /
                   "teacher_SmolLM2-135M-Instruct.Q4_1.json");
  ASSERT_TRUE(in.good());
  const nlohmann::json teacher = nlohmann::json::parse(in);
  std::vector<std::vector<int32_t>> chunks;
  for (int c = 0; c < kChunks; ++c)
    chunks.push_back(teacher["chunks"][c]["tokens"].get<std::vector<int32_t>>());
  const int64_t n_vocab = (*model)->config().n_vocab;

  const std::vector<float> exact = chunk_logits(**model, chunks, kernels::KvFormat::kF32, true);
  const std::vector<float> with = chunk_logits(**model, chunks, kernels::KvFormat::kInt4, true);
  const std::vector<float> without = chunk_logits(**model, chunks, kernels::KvFormat::kInt4, false);
  ASSERT_FALSE(exact.empty() || with.empty() || without.empty());
  const double kl_with = mean_kl(exact, with, n_vocab);
  const double kl_without = mean_kl(exact, without, n_vocab);
  std::printf(
      "SmolLM2, int4 against f32, mean KL over %d x 512 positions: %.5f with the key "
      "offsets, %.5f without\n",
      kChunks, kl_with, kl_without);
  EXPECT_GT(kl_with, 0.0);
  EXPECT_LT(kl_with, 0.8 * kl_without);
}

}  // namespace
}  // namespace drift::test
