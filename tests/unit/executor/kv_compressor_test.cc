// KV-Compress on a cache whose attention is known: keys are one-hot, so each query head attends to
// exactly the positions its query names. The attention kernel accumulates the metric into the
// sequence's KvHeadTable, the compressor evicts, and the test pins which positions each head kept,
// the K/V bytes now at each slot, and how many slots (pages) the sequence still uses.
#include "executor/kv_compressor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/kv_format.h"
#include "kernels/paged_attention.h"
#include "model/kv_head_table.h"
#include "model/kv_pages.h"
#include "util/cpu_features.h"

namespace drift {
namespace {

constexpr int64_t kLayers = 2, kHeads = 2, kDim = 32, kPageSize = 8, kPositions = 24;

ModelConfig tiny_config() {
  ModelConfig c;
  c.n_layers = kLayers;
  c.n_kv_heads = kHeads;
  c.n_heads = kHeads;
  c.head_dim = kDim;
  c.head_dim_v = kDim;
  return c;
}

// Key of position p: 8 at element p (one-hot); value: p + layer/10 + head/100 + e/1000 (which
// entry a slot holds can be read from any of its elements).
std::vector<float> key_of(int64_t p) {
  std::vector<float> k(kDim, 0.0f);
  k[p] = 8.0f;
  return k;
}
std::vector<float> value_of(int64_t layer, int64_t head, int64_t p) {
  std::vector<float> v(kDim);
  for (int64_t e = 0; e < kDim; ++e) v[e] = float(p) + 0.1f * layer + 0.01f * head + 0.001f * e;
  return v;
}

class KvCompressorTest : public ::testing::TestWithParam<kernels::KvFormat> {};

TEST_P(KvCompressorTest, KeepsTheSinksTheRecentAndWhatEachHeadAttended) {
  const kernels::KvFormat format = GetParam();
  const ModelConfig config = tiny_config();
  auto kv = KvPages::create(config, 5, kPageSize, format);
  ASSERT_TRUE(kv.ok()) << kv.error().message;
  // The sequence's pages, out of order; page 4 is someone else's and must stay untouched.
  const std::vector<int32_t> page_table = {2, 0, 3};
  for (int64_t l = 0; l < kLayers; ++l)
    for (int64_t h = 0; h < kHeads; ++h)
      for (int64_t p = 0; p < kPositions; ++p) {
        const int64_t page = page_table[p / kPageSize], slot = p % kPageSize;
        kernels::kv_store_key(format, kv->keys(page, l, h), kDim, kPageSize, slot,
                              key_of(p).data());
        kernels::kv_store_value(format, kv->values(page, l, h), kDim, kPageSize, slot,
                                value_of(l, h, p).data());
      }
  for (int64_t l = 0; l < kLayers; ++l)
    for (int64_t h = 0; h < kHeads; ++h) {
      kernels::kv_store_key(format, kv->keys(4, l, h), kDim, kPageSize, 0, key_of(3).data());
      kernels::kv_store_value(format, kv->values(4, l, h), kDim, kPageSize, 0,
                              value_of(9, 9, 9).data());
    }
  // An entry as attention reads it: its key's then its value's dequantized elements (what each
  // kept entry must still read after its move).
  auto stored = [&](int64_t l, int64_t h, int64_t page, int64_t slot) {
    std::vector<float> x;
    for (int64_t e = 0; e < kDim; ++e)
      x.push_back(kernels::kv_load_key(format, kv->keys(page, l, h), kDim, kPageSize, slot, e));
    for (int64_t e = 0; e < kDim; ++e)
      x.push_back(kernels::kv_load_value(format, kv->values(page, l, h), kDim, kPageSize, slot, e));
    return x;
  };
  std::vector<std::vector<float>> before;  // [(l * kHeads + h) * kPositions + p]
  for (int64_t l = 0; l < kLayers; ++l)
    for (int64_t h = 0; h < kHeads; ++h)
      for (int64_t p = 0; p < kPositions; ++p)
        before.push_back(stored(l, h, page_table[p / kPageSize], p % kPageSize));
  const std::vector<float> bystander = stored(0, 0, 4, 0);

  KvHeadTable heads(kLayers, kHeads, 32);
  ASSERT_TRUE(heads.append(0, kPositions));
  // The attended positions of each (layer, head): the query is 8 at each of them, so those
  // scores are 64 / sqrt(32) ~ 11.3 above the others' 0 and take all but ~1e-4 of the attention.
  const std::vector<std::vector<int64_t>> attended = {
      {5, 9, 10}, {3, 6, 13}, {2, 4, 15}, {7, 8, 11}};
  auto isa = select_isa(detect_cpu_features());
  ASSERT_TRUE(isa.ok());
  const kernels::AttentionShape shape{kDim, kDim, 1.0f / std::sqrt(float(kDim))};
  std::vector<float> scratch(kernels::paged_attention_scratch_floats(shape, kPositions) + 8);
  float* aligned =
      reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(scratch.data()) + 31) / 32 * 32);
  for (int64_t l = 0; l < kLayers; ++l)
    for (int64_t h = 0; h < kHeads; ++h) {
      std::vector<float> q(kDim, 0.0f), out(kDim);
      for (int64_t p : attended[l * kHeads + h]) q[p] = 8.0f;
      const kernels::PagedKv view{kv->keys(0, l, h), kv->values(0, l, h), kv->page_stride(),
                                  kPageSize,         page_table.data(),   format};
      kernels::AttentionQueries queries{};
      queries.n = 1;
      queries.q[0] = q.data();
      queries.first[0] = 0;
      queries.last[0] = kPositions - 1;
      queries.out[0] = out.data();
      queries.metric = heads.metric_sums(l, h);
      queries.metric_lanes = 1;
      kernels::paged_attention(*isa, shape, view, queries, aligned);
    }

  KvCompressConfig compress;
  compress.keep = 0.5;  // 12 of 24 entries a head
  compress.min_tokens = 16;
  compress.sink_tokens = 2;
  compress.recent_tokens = 7;
  compress.metric_window = 1;
  KvCompressor compressor(compress);
  EXPECT_EQ(compressor.compress(kPositions, heads, *kv, page_table), 12);

  // 2 sinks + 7 recent (17-23) + the 3 attended, each head its own.
  const std::vector<std::vector<int32_t>> want = {{0, 1, 5, 9, 10, 17, 18, 19, 20, 21, 22, 23},
                                                  {0, 1, 3, 6, 13, 17, 18, 19, 20, 21, 22, 23},
                                                  {0, 1, 2, 4, 15, 17, 18, 19, 20, 21, 22, 23},
                                                  {0, 1, 7, 8, 11, 17, 18, 19, 20, 21, 22, 23}};
  for (int64_t l = 0; l < kLayers; ++l)
    for (int64_t h = 0; h < kHeads; ++h) {
      const auto positions = heads.positions(l, h);
      EXPECT_EQ(std::vector<int32_t>(positions.begin(), positions.end()), want[l * kHeads + h])
          << "layer " << l << " head " << h;
      for (size_t j = 0; j < positions.size(); ++j)
        EXPECT_EQ(stored(l, h, page_table[j / kPageSize], j % kPageSize),
                  before[(l * kHeads + h) * kPositions + positions[j]])
            << "layer " << l << " head " << h << " slot " << j;
    }
  EXPECT_EQ(stored(0, 0, 4, 0), bystander);
  // The metric starts over for the next window.
  std::vector<float> sums;
  for (float m : heads.metric(0, 0, sums)) EXPECT_EQ(m, 0.0f);
}

INSTANTIATE_TEST_SUITE_P(Formats, KvCompressorTest,
                         ::testing::Values(kernels::KvFormat::kF16, kernels::KvFormat::kInt8,
                                           kernels::KvFormat::kInt4),
                         [](const auto& info) {
                           return std::string(info.param == kernels::KvFormat::kF16    ? "f16"
                                              : info.param == kernels::KvFormat::kInt8 ? "int8"
                                                                                       : "int4");
                         });

}  // namespace
}  // namespace drift
