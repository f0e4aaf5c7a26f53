// KV-Compress through the real forward pass: a sequence run in steps with a KvHeadTable and
// compressed after each step gives, with kv_keep = 1, exactly the logits of one uncompressed pass
// (and so the same output); with kv_keep < 1, every entry a head kept is, bit for bit, the K/V the
// uncompressed pass wrote at that entry's position (where the two passes computed the same K/V). On
// a llama-style synthetic model and on Gemma 3 (whose sliding-window layers find their first
// visible entry through the table).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "executor/kv_compressor.h"
#include "model/forward_pass.h"
#include "model/kv_head_table.h"
#include "test_models.h"
#include "util/cpu_features.h"

namespace drift {
namespace {

constexpr int64_t kPageSize = 16;

struct Harness {
  std::unique_ptr<Model> model;
  std::unique_ptr<ForwardPass> forward;
  std::unique_ptr<KvPages> plain, compressed;  // the uncompressed pass's cache, the stepped one's
  std::vector<int32_t> pages;
  ThreadPool pool{2};

  static std::unique_ptr<Harness> load(const std::string& path, int64_t context) {
    auto h = std::make_unique<Harness>();
    auto isa = select_isa(detect_cpu_features());
    EXPECT_TRUE(isa.ok());
    auto model = Model::load(path, *isa);
    EXPECT_TRUE(model.ok()) << model.error().message;
    if (!model.ok()) return nullptr;
    h->model = std::move(*model);
    auto forward = ForwardPass::create(*h->model, ForwardLimits{context, 1, context, 2});
    EXPECT_TRUE(forward.ok()) << forward.error().message;
    h->forward = std::move(*forward);
    const int64_t n_pages = (context + kPageSize - 1) / kPageSize;
    auto plain = KvPages::create(h->model->config(), n_pages, kPageSize);
    auto compressed = KvPages::create(h->model->config(), n_pages, kPageSize);
    EXPECT_TRUE(plain.ok() && compressed.ok());
    if (!plain.ok() || !compressed.ok()) return nullptr;
    h->plain = std::make_unique<KvPages>(std::move(*plain));
    h->compressed = std::make_unique<KvPages>(std::move(*compressed));
    for (int64_t i = 0; i < n_pages; ++i) h->pages.push_back(static_cast<int32_t>(i));
    return h;
  }

  const ModelConfig& config() const { return model->config(); }

  // Logits of every token, one pass, no table.
  std::vector<float> run_plain(const std::vector<int32_t>& tokens) {
    std::vector<float> logits(tokens.size() * config().n_vocab);
    ForwardSequence s;
    s.n_tokens = static_cast<int64_t>(tokens.size());
    s.page_table = pages;
    s.all_logits = true;
    EXPECT_TRUE(forward->run(ForwardBatch{tokens, {&s, 1}}, *plain, pool, logits).ok());
    return logits;
  }

  // Logits of every token, in steps of `step` tokens with the table, compressed after each step.
  std::vector<float> run_compressed(const std::vector<int32_t>& tokens, int64_t step,
                                    KvCompressor& compressor, KvHeadTable& heads) {
    const int64_t n = static_cast<int64_t>(tokens.size());
    std::vector<float> logits(n * config().n_vocab);
    for (int64_t begin = 0; begin < n; begin += step) {
      ForwardSequence s;
      s.start_pos = begin;
      s.n_tokens = std::min(step, n - begin);
      s.page_table = pages;
      s.all_logits = true;
      s.heads = &heads;
      s.metric_tokens = std::min(compressor.config().metric_window, s.n_tokens);
      const std::span<const int32_t> chunk(tokens.data() + begin, s.n_tokens);
      Status status = forward->run(ForwardBatch{chunk, {&s, 1}}, *compressed, pool,
                                   std::span<float>(logits).subspan(begin * config().n_vocab));
      EXPECT_TRUE(status.ok()) << status.message();
      compressor.compress(begin + s.n_tokens, heads, *compressed, pages);
    }
    return logits;
  }
};

std::vector<int32_t> random_tokens(int64_t n, int64_t n_vocab) {
  std::mt19937 rng(7);
  std::vector<int32_t> t(n);
  for (auto& x : t) x = static_cast<int32_t>(rng() % n_vocab);
  return t;
}

KvCompressConfig compress_config(double keep, KvEvictPolicy policy) {
  KvCompressConfig c;
  c.keep = keep;
  c.policy = policy;
  c.min_tokens = 64;
  c.sink_tokens = 4;
  c.recent_tokens = 32;
  c.metric_window = 16;
  return c;
}

void expect_keep_one_is_uncompressed(const std::string& path, int64_t n_tokens, int64_t step) {
  auto h = Harness::load(path, n_tokens);
  ASSERT_TRUE(h);
  const std::vector<int32_t> tokens = random_tokens(n_tokens, h->config().n_vocab);
  const std::vector<float> want = h->run_plain(tokens);
  KvCompressor compressor(compress_config(1.0, KvEvictPolicy::kAttention));
  KvHeadTable heads(h->config().n_layers, h->config().n_kv_heads, n_tokens);
  const std::vector<float> got = h->run_compressed(tokens, step, compressor, heads);
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0);
  EXPECT_EQ(heads.max_length(), n_tokens);
}

const std::filesystem::path kSynthetic =
    std::filesystem::path(DRIFT_TEST_DATA_DIR) / "model" / "qwen2-synthetic.gguf";

TEST(KvCompress, KeepOneGivesTheUncompressedLogitsBitForBit) {
  expect_keep_one_is_uncompressed(kSynthetic.string(), 200, 48);
}

// 600 tokens: past Gemma 3's 512-position sliding window, so its local layers start their
// queries' ranges inside the table.
TEST(KvCompress, KeepOneGivesTheUncompressedLogitsWithSlidingWindows) {
  const auto path = test::model_path(test::kGemma3File);
  ASSERT_TRUE(test::model_available(path));
  expect_keep_one_is_uncompressed(path.string(), 600, 200);
}

TEST(KvCompress, KeptEntriesAreTheUncompressedPassesKV) {
  for (KvEvictPolicy policy : {KvEvictPolicy::kAttention, KvEvictPolicy::kWindow}) {
    auto h = Harness::load(kSynthetic.string(), 256);
    ASSERT_TRUE(h);
    const ModelConfig& c = h->config();
    const std::vector<int32_t> tokens = random_tokens(256, c.n_vocab);
    h->run_plain(tokens);
    KvCompressor compressor(compress_config(0.5, policy));
    KvHeadTable heads(c.n_layers, c.n_kv_heads, 256);
    const std::vector<float> logits = h->run_compressed(tokens, 32, compressor, heads);
    EXPECT_EQ(heads.max_length(), 128);  // floor(0.5 * 256)
    int64_t heads_differ = 0;
    for (int64_t l = 0; l < c.n_layers; ++l) {
      for (int64_t kvh = 0; kvh < c.n_kv_heads; ++kvh) {
        const auto positions = heads.positions(l, kvh);
        ASSERT_EQ(positions.size(), 128u);
        heads_differ +=
            !std::equal(positions.begin(), positions.end(), heads.positions(0, 0).begin());
        for (size_t j = 0; j < positions.size(); ++j) {
          // Layer 0's K/V depend on the token alone; deeper layers' on the attention below them,
          // the same as the uncompressed pass's only for the tokens run before the first
          // compression (after the step that ends at 96 > min_tokens).
          const int64_t p = positions[j];
          if (l > 0 && p >= 96) continue;
          for (int64_t e = 0; e < c.head_dim; ++e)
            ASSERT_EQ(
                kernels::kv_load_key(kernels::KvFormat::kF16,
                                     h->compressed->keys(j / kPageSize, l, kvh), c.head_dim,
                                     kPageSize, j % kPageSize, e),
                kernels::kv_load_key(kernels::KvFormat::kF16, h->plain->keys(p / kPageSize, l, kvh),
                                     c.head_dim, kPageSize, p % kPageSize, e))
                << "layer " << l << " head " << kvh << " slot " << j << " position " << p;
          for (int64_t e = 0; e < c.head_dim_v; ++e)
            ASSERT_EQ(kernels::kv_load_value(kernels::KvFormat::kF16,
                                             h->compressed->values(j / kPageSize, l, kvh),
                                             c.head_dim_v, kPageSize, j % kPageSize, e),
                      kernels::kv_load_value(kernels::KvFormat::kF16,
                                             h->plain->values(p / kPageSize, l, kvh), c.head_dim_v,
                                             kPageSize, p % kPageSize, e));
        }
      }
    }
    // The window policy keeps the same positions in every head; attention chooses per head.
    if (policy == KvEvictPolicy::kWindow)
      EXPECT_EQ(heads_differ, 0);
    else
      EXPECT_GT(heads_differ, 0);
    for (float x : logits) ASSERT_TRUE(std::isfinite(x));
  }
}

}  // namespace
}  // namespace drift
