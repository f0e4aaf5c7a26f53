// What a batch of several sequences must give, bitwise, since a token's result does not depend on
// its batch (forward_pass.h):
// - The last layer runs only for the tokens whose final state is read (ForwardPass::last_layer):
//   in a batch that mixes a mid-prompt chunk (no output) with a sequence that wants logits, the
//   wanted logits are those of the sequence run alone, and the chunk's last-layer K/V (stored
//   though its attention is skipped) is what later tokens attend to.
// - A sequence may attend over pages another sequence of the same batch writes (a request
//   joining the step that computes its prefix, scheduler/executor.h): every token's K/V of a
//   layer is stored before any token of it attends.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "model/forward_pass.h"
#include "util/cpu_features.h"

namespace drift::test {
namespace {

constexpr int64_t kPageSize = 16;
constexpr int64_t kContext = 128;

// Two sequences, each with its own half of one KV pool.
class TwoSequences {
 public:
  explicit TwoSequences(const std::string& path) : pool_(2) {
    auto isa = select_isa(detect_cpu_features());
    EXPECT_TRUE(isa.ok());
    auto model = Model::load(path, *isa);
    EXPECT_TRUE(model.ok()) << model.error().message;
    model_ = std::move(*model);
    const int64_t pages_per_sequence = kContext / kPageSize;
    auto kv = KvPages::create(model_->config(), 2 * pages_per_sequence, kPageSize);
    EXPECT_TRUE(kv.ok());
    kv_ = std::make_unique<KvPages>(std::move(*kv));
    for (int s = 0; s < 2; ++s)
      for (int64_t i = 0; i < pages_per_sequence; ++i)
        pages_[s].push_back(static_cast<int32_t>(s * pages_per_sequence + i));
    auto forward = ForwardPass::create(*model_, ForwardLimits{2 * kContext, 2, kContext, 2});
    EXPECT_TRUE(forward.ok());
    forward_ = std::move(*forward);
    logits_.resize(static_cast<size_t>(2 * kContext) * n_vocab());
  }

  int64_t n_vocab() const { return model_->config().n_vocab; }

  // One part of a batch: `tokens` of sequence `seq` from position `start`.
  struct Part {
    int seq;
    std::vector<int32_t> tokens;
    int64_t start;
    bool want_logits;
    bool all_logits;
    int64_t pages_of_first = 0;  // its page table starts with this many of sequence 0's pages
  };

  // Runs the parts as one batch; returns the logits rows in sequence order.
  std::vector<float> run(const std::vector<Part>& parts) {
    std::vector<int32_t> tokens;
    std::vector<ForwardSequence> sequences;
    int64_t rows = 0;
    for (const Part& p : parts) {
      ForwardSequence s;
      s.token_begin = static_cast<int64_t>(tokens.size());
      s.n_tokens = static_cast<int64_t>(p.tokens.size());
      s.start_pos = p.start;
      tables_[sequences.size()] = pages_[p.seq];
      std::copy_n(pages_[0].begin(), p.pages_of_first, tables_[sequences.size()].begin());
      s.page_table = tables_[sequences.size()];
      s.want_logits = p.want_logits;
      s.all_logits = p.all_logits;
      tokens.insert(tokens.end(), p.tokens.begin(), p.tokens.end());
      sequences.push_back(s);
      rows += p.all_logits ? s.n_tokens : p.want_logits ? 1 : 0;
    }
    Status status = forward_->run(ForwardBatch{tokens, sequences}, *kv_, pool_, logits_);
    EXPECT_TRUE(status.ok()) << status.message();
    return {logits_.begin(), logits_.begin() + rows * n_vocab()};
  }

 private:
  std::unique_ptr<Model> model_;
  ThreadPool pool_;
  std::unique_ptr<KvPages> kv_;
  std::vector<int32_t> pages_[2];
  std::vector<int32_t> tables_[2];  // the page tables of a batch's parts
  std::unique_ptr<ForwardPass> forward_;
  std::vector<float> logits_;
};

std::vector<int32_t> tokens_from(int32_t first, int64_t n, int32_t n_vocab) {
  std::vector<int32_t> t;
  for (int64_t i = 0; i < n; ++i) t.push_back(static_cast<int32_t>((first + 37 * i) % n_vocab));
  return t;
}

void check_model(const std::string& path) {
  const int64_t n_a = 40, split = 24, n_b = 19;
  std::vector<float> a_whole, b_alone;
  {
    TwoSequences solo(path);
    const auto n_vocab = static_cast<int32_t>(solo.n_vocab());
    a_whole = solo.run({{0, tokens_from(11, n_a, n_vocab), 0, false, true}});
    b_alone = solo.run({{1, tokens_from(500, n_b, n_vocab), 0, true, false}});
  }
  TwoSequences mixed(path);
  const auto n_vocab = static_cast<int32_t>(mixed.n_vocab());
  const std::vector<int32_t> a = tokens_from(11, n_a, n_vocab);
  // A's first chunk asks for nothing (its last layer runs for no token); B wants its logits.
  std::vector<float> b_mixed = mixed.run({{0, {a.begin(), a.begin() + split}, 0, false, false},
                                          {1, tokens_from(500, n_b, n_vocab), 0, true, false}});
  EXPECT_EQ(b_mixed, b_alone) << "B's logits changed with a mid-prompt chunk beside it";
  // A's second chunk attends to the first chunk's last-layer K/V.
  std::vector<float> a_rest = mixed.run({{0, {a.begin() + split, a.end()}, split, false, true}});
  std::vector<float> a_expected(a_whole.begin() + split * mixed.n_vocab(), a_whole.end());
  EXPECT_EQ(a_rest, a_expected) << "A's later tokens saw other K/V than in one run";
  // A sequence that wants only its last token's logits gets that row of the whole run.
  TwoSequences last(path);
  std::vector<float> a_last = last.run({{0, a, 0, true, false}});
  std::vector<float> a_last_expected(a_whole.end() - mixed.n_vocab(), a_whole.end());
  EXPECT_EQ(a_last, a_last_expected);
}

// B shares A's first two pages (positions 0-31, the same tokens) while A writes them in the
// same batch, and computes only its own 8 tokens.
void check_shared_prefix_written_in_the_same_batch(const std::string& path) {
  std::vector<float> b_alone;
  std::vector<int32_t> a, b;
  {
    TwoSequences solo(path);
    const auto n_vocab = static_cast<int32_t>(solo.n_vocab());
    a = tokens_from(11, 40, n_vocab);
    b = a;
    std::copy_n(tokens_from(900, 8, n_vocab).begin(), 8, b.begin() + 32);
    b_alone = solo.run({{1, b, 0, true, false}});
  }
  // A first, then B; and B first: the order of a batch's sequences does not matter, since every
  // K/V of a layer is stored before any token of the layer attends.
  for (const bool b_first : {false, true}) {
    TwoSequences mixed(path);
    const TwoSequences::Part part_a{0, a, 0, true, false};
    const TwoSequences::Part part_b{1, {b.begin() + 32, b.end()}, 32, true, false, 2};
    std::vector<float> both = b_first ? mixed.run({part_b, part_a}) : mixed.run({part_a, part_b});
    ASSERT_EQ(both.size(), 2 * b_alone.size());
    const auto b_row = both.begin() + (b_first ? 0 : std::ptrdiff_t(b_alone.size()));
    EXPECT_EQ(std::vector<float>(b_row, b_row + std::ptrdiff_t(b_alone.size())), b_alone)
        << "B read A's K/V before A's tokens of the layer stored it (B first: " << b_first << ")";
  }
}

const std::filesystem::path kData = std::filesystem::path(DRIFT_TEST_DATA_DIR) / "model";

TEST(LastLayerOutputRows, SyntheticQwen2) {
  check_model((kData / "qwen2-synthetic.gguf").string());
}

TEST(SharedPrefixInOneBatch, SyntheticQwen2) {
  check_shared_prefix_written_in_the_same_batch((kData / "qwen2-synthetic.gguf").string());
}

TEST(SharedPrefixInOneBatch, GptOssSyntheticWithSinksAndSlidingLayers) {
  check_shared_prefix_written_in_the_same_batch((kData / "gpt-oss-synthetic.gguf").string());
}

TEST(LastLayerOutputRows, GptOssSyntheticWithSinksAndSlidingLayers) {
  check_model((kData / "gpt-oss-synthetic.gguf").string());
}

}  // namespace
}  // namespace drift::test
