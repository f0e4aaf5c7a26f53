// A lone sequence's decode over a long context runs its attention in parts on every thread
// (model/forward_decode_attention.cc); the same token decoded beside another sequence (a batch
// of two, whose attention blocks go whole to the threads) must give bitwise the same logits, as
// every token's do in any batch. SmolLM2 (3 KV heads) and Gemma 3 (1 KV head, sliding layers),
// in bf16 and int8 KV, on every SIMD path the CPU has.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "kernels/kv_format.h"
#include "model/forward_pass.h"
#include "test_models.h"
#include "util/cpu_features.h"

namespace drift {
namespace {

constexpr int64_t kPageSize = 16;
constexpr int64_t kContext = 640;
constexpr int64_t kChunk = 256;

std::vector<int32_t> tokens_from(int32_t first, int64_t n, int64_t n_vocab) {
  std::vector<int32_t> t;
  for (int64_t i = 0; i < n; ++i)
    t.push_back(static_cast<int32_t>((first + 37 * i) % std::min<int64_t>(n_vocab, 30000)));
  return t;
}

class TwoLongSequences {
 public:
  TwoLongSequences(const std::string& path, Isa isa, kernels::KvFormat format) : pool_(2) {
    auto model = Model::load(path, isa);
    EXPECT_TRUE(model.ok()) << model.error().message;
    if (!model.ok()) return;
    model_ = std::move(*model);
    const int64_t pages = kContext / kPageSize;
    auto kv = KvPages::create(model_->config(), 2 * pages, kPageSize, format);
    EXPECT_TRUE(kv.ok());
    kv_ = std::make_unique<KvPages>(std::move(*kv));
    for (int s = 0; s < 2; ++s)
      for (int64_t i = 0; i < pages; ++i) pages_[s].push_back(static_cast<int32_t>(s * pages + i));
    auto forward = ForwardPass::create(*model_, ForwardLimits{kChunk, 2, kContext, 2});
    EXPECT_TRUE(forward.ok());
    if (forward.ok()) forward_ = std::move(*forward);
    logits_.resize(static_cast<size_t>(2 * n_vocab()));
  }
  bool ok() const { return forward_ != nullptr; }
  int64_t n_vocab() const { return model_->config().n_vocab; }

  // The prompt of sequence `seq` in chunks, logits of none.
  void prefill(int seq, const std::vector<int32_t>& tokens) {
    for (size_t b = 0; b < tokens.size(); b += kChunk) {
      const size_t e = std::min(tokens.size(), b + kChunk);
      run({{seq, {tokens.begin() + b, tokens.begin() + e}, static_cast<int64_t>(b)}}, false);
    }
  }
  struct Step {
    int seq;
    std::vector<int32_t> tokens;
    int64_t start;
  };
  // One batch of the steps; the logits of each step's last token, in order.
  std::vector<float> run(const std::vector<Step>& steps, bool want_logits = true) {
    std::vector<int32_t> tokens;
    std::vector<ForwardSequence> sequences;
    for (const Step& st : steps) {
      ForwardSequence s;
      s.token_begin = static_cast<int64_t>(tokens.size());
      s.n_tokens = static_cast<int64_t>(st.tokens.size());
      s.start_pos = st.start;
      s.page_table = pages_[st.seq];
      s.want_logits = want_logits;
      tokens.insert(tokens.end(), st.tokens.begin(), st.tokens.end());
      sequences.push_back(s);
    }
    Status status = forward_->run(ForwardBatch{tokens, sequences}, *kv_, pool_, logits_);
    EXPECT_TRUE(status.ok()) << status.message();
    const int64_t rows = want_logits ? static_cast<int64_t>(steps.size()) : 0;
    return {logits_.begin(), logits_.begin() + rows * n_vocab()};
  }

 private:
  std::unique_ptr<Model> model_;
  ThreadPool pool_;
  std::unique_ptr<KvPages> kv_;
  std::vector<int32_t> pages_[2];
  std::unique_ptr<ForwardPass> forward_;
  std::vector<float> logits_;
};

void check(std::string_view file) {
  const std::filesystem::path path = test::model_path(file);
  ASSERT_TRUE(test::model_available(path));
  const CpuFeatures cpu = detect_cpu_features();
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512}) {
    if (!isa_supported(isa, cpu)) continue;
    for (kernels::KvFormat format :
         {kernels::KvFormat::kBF16, kernels::KvFormat::kF16, kernels::KvFormat::kInt8}) {
      TwoLongSequences runs(path.string(), isa, format);
      ASSERT_TRUE(runs.ok());
      // A's 600 positions and B's 530 are past the split's threshold (and Gemma 3's window).
      const std::vector<int32_t> a = tokens_from(11, 601, runs.n_vocab());
      const std::vector<int32_t> b = tokens_from(500, 531, runs.n_vocab());
      runs.prefill(0, {a.begin(), a.end() - 1});
      runs.prefill(1, {b.begin(), b.end() - 1});
      const std::vector<float> alone = runs.run({{0, {a.back()}, 600}});
      const std::vector<float> batched = runs.run({{0, {a.back()}, 600}, {1, {b.back()}, 530}});
      const std::vector<float> a_batched(batched.begin(), batched.begin() + runs.n_vocab());
      ASSERT_EQ(alone, a_batched) << isa_name(isa) << " KV format " << static_cast<int>(format)
                                  << ": a lone decode's logits differ from the same token's in "
                                     "a batch";
      const std::vector<float> b_alone = runs.run({{1, {b.back()}, 530}});
      const std::vector<float> b_batched(batched.begin() + runs.n_vocab(), batched.end());
      EXPECT_EQ(b_alone, b_batched) << isa_name(isa) << " KV format " << static_cast<int>(format);
    }
  }
}

TEST(DecodeInParts, SmolLm2LoneDecodeEqualsItsBatchedLogits) { check(test::kSmolLm2File); }

TEST(DecodeInParts, Gemma3LoneDecodeEqualsItsBatchedLogits) { check(test::kGemma3File); }

}  // namespace
}  // namespace drift
