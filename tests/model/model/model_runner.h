// A single-sequence harness around ForwardPass for the model tests: run tokens at positions,
// get logits.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "model/forward_pass.h"
#include "util/cpu_features.h"

namespace drift::test {

class ModelRunner {
 public:
  // Loads `path` for the ISA DRIFT_ISA selects (or the best one) with room for `context` tokens.
  static std::unique_ptr<ModelRunner> load(const std::string& path, int64_t context) {
    auto isa = select_isa(detect_cpu_features());
    EXPECT_TRUE(isa.ok()) << isa.error().message;
    if (!isa.ok()) return nullptr;
    auto model = Model::load(path, *isa);
    EXPECT_TRUE(model.ok()) << model.error().message;
    if (!model.ok()) return nullptr;
    auto runner = std::unique_ptr<ModelRunner>(new ModelRunner(std::move(*model), context));
    return runner->forward_ ? std::move(runner) : nullptr;
  }

  const ModelConfig& config() const { return model_->config(); }

  // Runs `tokens` at positions [start, start + n) of the one sequence and returns logits rows
  // [n][n_vocab] (all_logits) or [1][n_vocab] (the last token's).
  std::span<const float> run(std::span<const int32_t> tokens, int64_t start, bool all_logits) {
    ForwardSequence s;
    s.n_tokens = static_cast<int64_t>(tokens.size());
    s.start_pos = start;
    s.page_table = pages_;
    s.want_logits = !all_logits;
    s.all_logits = all_logits;
    Status status = forward_->run(ForwardBatch{tokens, std::span<const ForwardSequence>(&s, 1)},
                                  *kv_, pool_, logits_);
    EXPECT_TRUE(status.ok()) << status.message();
    const size_t rows = all_logits ? tokens.size() : 1;
    return {logits_.data(), rows * static_cast<size_t>(config().n_vocab)};
  }

 private:
  static constexpr int64_t kPageSize = 16;

  ModelRunner(std::unique_ptr<Model> model, int64_t context) : model_(std::move(model)), pool_(2) {
    const int64_t n_pages = (context + kPageSize - 1) / kPageSize;
    auto kv = KvPages::create(model_->config(), n_pages, kPageSize);
    EXPECT_TRUE(kv.ok()) << kv.error().message;
    if (!kv.ok()) return;
    kv_ = std::make_unique<KvPages>(std::move(*kv));
    for (int64_t i = 0; i < n_pages; ++i) pages_.push_back(static_cast<int32_t>(i));
    auto forward = ForwardPass::create(*model_, ForwardLimits{context, 1, context, 2});
    EXPECT_TRUE(forward.ok()) << forward.error().message;
    if (!forward.ok()) return;
    forward_ = std::move(*forward);
    logits_.resize(static_cast<size_t>(context) * model_->config().n_vocab);
  }

  std::unique_ptr<Model> model_;
  ThreadPool pool_;
  std::unique_ptr<KvPages> kv_;
  std::vector<int32_t> pages_;
  std::unique_ptr<ForwardPass> forward_;
  std::vector<float> logits_;
};

inline int32_t argmax_of(const float* row, int64_t n) {
  int32_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (row[i] > row[best]) best = static_cast<int32_t>(i);
  return best;
}

// A float32 little-endian fixture of `count` values (llama.cpp's logits); fails the test if short.
inline std::vector<float> read_f32_fixture(const std::filesystem::path& path, int64_t count) {
  std::ifstream in(path, std::ios::binary);
  std::vector<float> v(static_cast<size_t>(count));
  in.read(reinterpret_cast<char*>(v.data()), count * static_cast<std::streamsize>(sizeof(float)));
  EXPECT_EQ(in.gcount(), count * static_cast<std::streamsize>(sizeof(float))) << path;
  return v;
}

// How close drift's logit rows are to a fixture's: the largest |difference| over every
// position and token, and at how many positions the argmax agrees. Each position whose
// fixture top-2 gap exceeds `decisive_gap` must agree (an expectation failure names it).
struct LogitAgreement {
  double max_abs_diff = 0.0;
  int argmax_agree = 0;
};
inline LogitAgreement compare_logits(std::span<const float> got, std::span<const float> want,
                                     int64_t n_vocab, const std::vector<double>& top2_gap,
                                     double decisive_gap) {
  LogitAgreement a;
  const int64_t n = static_cast<int64_t>(top2_gap.size());
  for (int64_t t = 0; t < n; ++t) {
    const float* g = got.data() + t * n_vocab;
    const float* w = want.data() + t * n_vocab;
    for (int64_t v = 0; v < n_vocab; ++v)
      a.max_abs_diff = std::max(a.max_abs_diff, static_cast<double>(std::fabs(g[v] - w[v])));
    const bool agree = argmax_of(g, n_vocab) == argmax_of(w, n_vocab);
    a.argmax_agree += agree;
    if (top2_gap[t] > decisive_gap) EXPECT_TRUE(agree) << "position " << t;
  }
  return a;
}

}  // namespace drift::test
