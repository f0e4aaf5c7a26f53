// Sliding-window KV groups through the real forward pass: a sequence run in prefill chunks and
// decode steps over KV pages split into groups (kv/kv_groups.h), whose sliding groups' pages are
// dropped from its page table and poisoned (NaN in every byte) as they leave the window, gives
// bitwise the logits of the same steps over one group that keeps everything. Gemma 3 (window 512,
// past three windows) and the gpt-oss synthetic model (window 16, past ten; f16, int8 and int4).
// And KV-Compress on KV groups compacts every group alike: the logits of a compressed run are
// those over one group.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "executor/kv_compressor.h"
#include "kernels/kv_format.h"
#include "kv/kv_groups.h"
#include "model/forward_pass.h"
#include "test_models.h"
#include "util/cpu_features.h"

namespace drift {
namespace {

constexpr int64_t kPageSize = 16;

KvLayerPlacement placement_of(const KVGrouping& g) {
  return KvLayerPlacement{g.layers_per_group, g.layer_group, g.layer_slot};
}

struct RunResult {
  std::vector<float> logits;  // [steps][n_vocab]: the last token's of each chunk or step
  int64_t pages_freed = 0;
};

class SlidingWindowGroups {
 public:
  explicit SlidingWindowGroups(const std::string& path, int64_t context, int64_t chunk)
      : context_(context), chunk_(chunk) {
    auto isa = select_isa(detect_cpu_features());
    EXPECT_TRUE(isa.ok());
    auto model = Model::load(path, *isa);
    EXPECT_TRUE(model.ok()) << model.error().message;
    if (!model.ok()) return;
    model_ = std::move(*model);
    auto forward = ForwardPass::create(*model_, ForwardLimits{chunk, 1, context, 2});
    EXPECT_TRUE(forward.ok()) << forward.error().message;
    if (forward.ok()) forward_ = std::move(*forward);
    const ModelConfig& c = model_->config();
    for (int64_t il = 0; il < c.n_layers; ++il)
      windows_.push_back(c.layers[il].sliding_window ? int32_t(c.sliding_window) : 0);
  }
  bool ok() const { return forward_ != nullptr; }
  const ModelConfig& config() const { return model_->config(); }
  const std::vector<int32_t>& windows() const { return windows_; }

  // The prompt in chunks, then `decode` more tokens one at a time (the argmax of the last
  // logits: the continuation itself must agree), over a cache of `grouping`'s groups. With
  // `free`, each sliding group's pages leave the table and are poisoned once no later query
  // sees them.
  RunResult run(const std::vector<int32_t>& prompt, int64_t decode, const KVGrouping& grouping,
                bool free, kernels::KvFormat format = kernels::KvFormat::kF16,
                KvCompressor* compressor = nullptr) {
    const ModelConfig& c = config();
    const int64_t per_group = (context_ + kPageSize - 1) / kPageSize;
    const int64_t groups = grouping.num_groups();
    auto kv = KvPages::create(c, groups * per_group, kPageSize, format,
                              groups > 1 ? placement_of(grouping) : KvLayerPlacement{});
    std::unique_ptr<KvHeadTable> heads;
    if (compressor)
      heads = std::make_unique<KvHeadTable>(c.n_layers, c.n_kv_heads, context_,
                                            compressor->config().metric_intervals);
    EXPECT_TRUE(kv.ok()) << kv.error().message;
    std::vector<int32_t> table(size_t(groups * per_group));
    for (size_t i = 0; i < table.size(); ++i) table[i] = int32_t(i);
    RunResult run;
    std::vector<int32_t> tokens = prompt;
    std::vector<float> row(size_t(c.n_vocab));
    int64_t pos = 0;
    while (pos < int64_t(prompt.size()) + decode) {
      const int64_t n = pos < int64_t(prompt.size())
                            ? std::min<int64_t>(chunk_, int64_t(prompt.size()) - pos)
                            : 1;
      ForwardSequence s;
      s.start_pos = pos;
      s.n_tokens = n;
      s.page_table = table;
      s.want_logits = true;
      s.heads = heads.get();
      if (heads) s.metric_tokens = std::min(compressor->config().metric_window, n);
      const std::span<const int32_t> chunk(tokens.data() + pos, size_t(n));
      Status status = forward_->run(ForwardBatch{chunk, {&s, 1}}, *kv, pool_, row);
      EXPECT_TRUE(status.ok()) << status.message();
      if (!status.ok()) return run;
      run.logits.insert(run.logits.end(), row.begin(), row.end());
      pos += n;
      if (pos >= int64_t(prompt.size()))
        tokens.push_back(int32_t(std::max_element(row.begin(), row.end()) - row.begin()));
      if (free) run.pages_freed += free_outside_windows(*kv, grouping, table, per_group, pos);
      if (compressor) compressor->compress(pos, *heads, *kv, table);
    }
    return run;
  }

 private:
  // What the scheduler frees after a step: in each sliding group, the pages wholly below
  // next - window + 1. They get NaN in every byte of every layer they hold.
  int64_t free_outside_windows(KvPages& kv, const KVGrouping& grouping, std::vector<int32_t>& table,
                               int64_t per_group, int64_t next) {
    const ModelConfig& c = config();
    int64_t freed = 0;
    for (int32_t g = 0; g < grouping.num_groups(); ++g) {
      const KVGroup kind = grouping.groups[size_t(g)];
      if (!kind.sliding()) continue;
      const int64_t dead = std::max<int64_t>(0, next - kind.sliding_window + 1) / kPageSize;
      for (int64_t i = 0; i < dead; ++i) {
        int32_t& page = table[size_t(g * per_group + i)];
        if (page < 0) continue;
        for (int64_t il = 0; il < c.n_layers; ++il) {
          if (kv.group_of(il) != g) continue;
          for (int64_t h = 0; h < c.n_kv_heads; ++h) {
            std::memset(kv.keys(page, il, h), 0xFF,
                        size_t(kernels::kv_key_block_bytes(kv.format(), c.head_dim, kPageSize)));
            std::memset(
                kv.values(page, il, h), 0xFF,
                size_t(kernels::kv_value_block_bytes(kv.format(), c.head_dim_v, kPageSize)));
          }
        }
        page = -1;
        ++freed;
      }
    }
    return freed;
  }

  std::unique_ptr<Model> model_;
  std::unique_ptr<ForwardPass> forward_;
  std::vector<int32_t> windows_;
  ThreadPool pool_{2};
  int64_t context_, chunk_;
};

std::vector<int32_t> random_tokens(int64_t n, int64_t n_vocab) {
  std::mt19937 rng(11);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = int32_t(rng() % uint32_t(n_vocab));
  return t;
}

void expect_freeing_changes_no_logit(const std::string& path, int64_t prompt_len, int64_t chunk,
                                     int64_t decode, int64_t expected_groups,
                                     kernels::KvFormat format = kernels::KvFormat::kF16) {
  SlidingWindowGroups h(path, prompt_len + decode, chunk);
  ASSERT_TRUE(h.ok());
  auto grouped = group_kv_layers(h.windows(), /*hybrid=*/true);
  auto one = group_kv_layers(h.windows(), /*hybrid=*/false);
  ASSERT_TRUE(grouped.ok() && one.ok());
  ASSERT_EQ(grouped->num_groups(), expected_groups);
  const std::vector<int32_t> prompt = random_tokens(prompt_len, h.config().n_vocab);
  const RunResult want = h.run(prompt, decode, *one, /*free=*/false, format);
  const RunResult got = h.run(prompt, decode, *grouped, /*free=*/true, format);
  ASSERT_EQ(got.logits.size(), want.logits.size());
  ASSERT_FALSE(got.logits.empty());
  EXPECT_EQ(std::memcmp(got.logits.data(), want.logits.data(), got.logits.size() * sizeof(float)),
            0)
      << "freeing pages outside the window changed the logits";
  EXPECT_GT(got.pages_freed, 0);
}

TEST(SlidingWindowGroups, GptOssFreesPastTenWindowsWithTheSameLogits) {
  const std::string model =
      (std::filesystem::path(DRIFT_TEST_DATA_DIR) / "model" / "gpt-oss-synthetic.gguf").string();
  // Window 16: 150 prompt tokens in chunks of 24, then 20 decode steps.
  for (kernels::KvFormat format :
       {kernels::KvFormat::kF16, kernels::KvFormat::kInt8, kernels::KvFormat::kInt4}) {
    SCOPED_TRACE(int(format));
    expect_freeing_changes_no_logit(model, 150, 24, 20, 2, format);
  }
}

TEST(SlidingWindowGroups, KvCompressCompactsEveryGroupAlike) {
  const std::string model =
      (std::filesystem::path(DRIFT_TEST_DATA_DIR) / "model" / "gpt-oss-synthetic.gguf").string();
  SlidingWindowGroups h(model, 180, 24);
  ASSERT_TRUE(h.ok());
  auto grouped = group_kv_layers(h.windows(), true);
  auto one = group_kv_layers(h.windows(), false);
  ASSERT_TRUE(grouped.ok() && one.ok());
  KvCompressConfig config;
  config.keep = 0.5;
  config.min_tokens = 32;
  config.sink_tokens = 4;
  config.recent_tokens = 16;
  config.metric_window = 8;
  const std::vector<int32_t> prompt = random_tokens(150, h.config().n_vocab);
  KvCompressor want_compressor(config), got_compressor(config);
  const RunResult want = h.run(prompt, 20, *one, false, kernels::KvFormat::kF16, &want_compressor);
  const RunResult got =
      h.run(prompt, 20, *grouped, false, kernels::KvFormat::kF16, &got_compressor);
  ASSERT_EQ(got.logits.size(), want.logits.size());
  EXPECT_EQ(std::memcmp(got.logits.data(), want.logits.data(), got.logits.size() * sizeof(float)),
            0);
  // And compression changed them: the test compares compressed runs.
  const RunResult plain = h.run(prompt, 20, *one, false);
  EXPECT_NE(std::memcmp(plain.logits.data(), want.logits.data(), got.logits.size() * sizeof(float)),
            0);
}

TEST(SlidingWindowGroups, Gemma3FreesPastThreeWindowsWithTheSameLogits) {
  const auto path = test::model_path(test::kGemma3File);
  ASSERT_TRUE(test::model_available(path));
  // Window 512: 1,600 prompt tokens in chunks of 200, then 8 decode steps.
  expect_freeing_changes_no_logit(path.string(), 1600, 200, 8, 6);
}

TEST(SlidingWindowGroups, AFreedPageAQueryStillSeesIsRefused) {
  const std::string model =
      (std::filesystem::path(DRIFT_TEST_DATA_DIR) / "model" / "gpt-oss-synthetic.gguf").string();
  auto isa = select_isa(detect_cpu_features());
  ASSERT_TRUE(isa.ok());
  auto loaded = Model::load(model, *isa);
  ASSERT_TRUE(loaded.ok());
  const ModelConfig& c = (*loaded)->config();
  std::vector<int32_t> windows;
  for (int64_t il = 0; il < c.n_layers; ++il)
    windows.push_back(c.layers[il].sliding_window ? int32_t(c.sliding_window) : 0);
  auto grouping = group_kv_layers(windows, true);
  ASSERT_TRUE(grouping.ok());
  auto kv = KvPages::create(c, 8, kPageSize, kernels::KvFormat::kF16, placement_of(*grouping));
  auto forward = ForwardPass::create(**loaded, ForwardLimits{8, 1, 64, 1});
  ASSERT_TRUE(kv.ok() && forward.ok());
  ThreadPool pool(1);
  std::vector<float> logits(size_t(c.n_vocab));
  // Position 40 (window 16) sees 25..40: the sliding group's page 1 (16..31) is still needed.
  const std::vector<int32_t> table = {0, 1, 2, -1, -1, 3};  // [2 groups][3 pages]
  const std::vector<int32_t> token = {1};
  ForwardSequence s;
  s.start_pos = 40;
  s.n_tokens = 1;
  s.page_table = table;
  s.want_logits = true;
  Status status = (*forward)->run(ForwardBatch{token, {&s, 1}}, *kv, pool, logits);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("group 1, page 1"), std::string::npos) << status.message();
  // Page 0 of the sliding group (0..15) may be gone.
  const std::vector<int32_t> freed_below = {0, 1, 2, -1, 4, 3};
  s.page_table = freed_below;
  EXPECT_TRUE((*forward)->run(ForwardBatch{token, {&s, 1}}, *kv, pool, logits).ok());
}

}  // namespace
}  // namespace drift
