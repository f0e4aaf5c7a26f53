// Paged attention: every ISA bitwise equal to the scalar reference, a query's result independent of
// the block it is computed in, and the reference close to attention evaluated in double.
#include "kernels/paged_attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <tuple>
#include <utility>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/fp16.h"
#include "kernels/kv_format.h"

namespace drift::kernels {
namespace {

using testing::bits;
using testing::isa_label;
using testing::isas_under_test;

// A KV cache of `n_pages` pages for one head in `format`, with a shuffled page table, and queries.
struct KvSetup {
  AttentionShape shape;
  int64_t page_size = 16;
  KvFormat format = KvFormat::kF16;
  std::vector<uint8_t> keys, values;  // [n_pages][page_stride bytes]: one block each
  std::vector<int32_t> page_table;
  int64_t page_stride;
  std::vector<float> q;  // [n_queries][head_dim]

  PagedKv kv() const {
    return PagedKv{keys.data(), values.data(), page_stride, page_size, page_table.data(), format};
  }
  const uint8_t* key_block(int64_t p) const {
    return keys.data() + page_table[p / page_size] * page_stride;
  }
  const uint8_t* value_block(int64_t p) const {
    return values.data() + page_table[p / page_size] * page_stride;
  }
};

KvSetup make_setup(int64_t head_dim, int64_t head_dim_v, int64_t positions, int64_t n_queries,
                   uint32_t seed, int64_t page_size = 16, KvFormat format = KvFormat::kF16) {
  std::mt19937 rng(seed);
  KvSetup s;
  s.page_size = page_size;
  s.format = format;
  s.shape = {head_dim, head_dim_v, 1.0f / std::sqrt(static_cast<float>(head_dim))};
  const int64_t n_pages = (positions + s.page_size - 1) / s.page_size;
  // K and V blocks share one stride (and a spare byte, so no block starts aligned).
  s.page_stride = std::max(kv_key_block_bytes(format, head_dim, page_size),
                           kv_value_block_bytes(format, head_dim_v, page_size)) +
                  4;
  s.keys.assign(n_pages * s.page_stride, 0);
  s.values.assign(n_pages * s.page_stride, 0);
  for (int64_t pg = 0; pg < n_pages; ++pg) {
    for (int64_t j = 0; j < page_size; ++j) {
      const std::vector<float> k = testing::random_floats(head_dim, rng, 2);
      const std::vector<float> v = testing::random_floats(head_dim_v, rng, 2);
      kv_store_key(format, s.keys.data() + pg * s.page_stride, head_dim, page_size, j, k.data());
      kv_store_value(format, s.values.data() + pg * s.page_stride, head_dim_v, page_size, j,
                     v.data());
    }
  }
  s.page_table.resize(n_pages);
  std::iota(s.page_table.begin(), s.page_table.end(), 0);
  std::shuffle(s.page_table.begin(), s.page_table.end(), rng);
  s.q = testing::random_floats(n_queries * head_dim, rng, 1.5f);
  return s;
}

struct Query {
  int64_t index, first, last;
};

// The queries of `block` writing into `out` (one row per query); `sinks`: query i's sink logit
// is (*sinks)[i].
AttentionQueries queries_of(const KvSetup& s, const std::vector<Query>& block,
                            std::vector<std::vector<float>>& out,
                            const std::vector<float>* sinks = nullptr) {
  AttentionQueries qs{};
  qs.n = static_cast<int64_t>(block.size());
  for (size_t i = 0; i < block.size(); ++i) {
    qs.q[i] = s.q.data() + block[i].index * s.shape.head_dim;
    qs.first[i] = block[i].first;
    qs.last[i] = block[i].last;
    qs.out[i] = out[i].data();
    if (sinks != nullptr) qs.sink[i] = (*sinks)[i];
  }
  qs.has_sinks = sinks != nullptr;
  return qs;
}

// Runs `block` (at most kAttentionLanes queries) and returns their outputs; `sinks`: query i's
// sink logit is (*sinks)[i].
std::vector<std::vector<float>> run(Isa isa, const KvSetup& s, const std::vector<Query>& block,
                                    const std::vector<float>* sinks = nullptr,
                                    ValueRowCache* cache = nullptr) {
  int64_t max_last = 0;
  for (const Query& q : block) max_last = std::max(max_last, q.last);
  std::vector<float> scratch(paged_attention_scratch_floats(s.shape, max_last) + 8);
  float* aligned =
      reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(scratch.data()) + 31) / 32 * 32);
  std::vector<std::vector<float>> out(block.size(), std::vector<float>(s.shape.head_dim_v, -7.0f));
  AttentionQueries qs = queries_of(s, block, out, sinks);
  paged_attention(isa, s.shape, s.kv(), qs, aligned, cache);
  return out;
}

// Causal prefill of 8 consecutive tokens, decode-like single queries, sliding windows, a lone
// position, partial blocks.
std::vector<std::vector<Query>> blocks(int64_t positions) {
  std::vector<std::vector<Query>> b;
  std::vector<Query> causal;
  for (int64_t i = 0; i < 8; ++i) causal.push_back({i, 0, positions - 8 + i});
  b.push_back(causal);
  b.push_back({{0, 0, positions - 1}});
  b.push_back({{1, 0, 0}, {2, 0, 1}, {3, 0, 2}});
  std::vector<Query> window;
  for (int64_t i = 0; i < 5; ++i)
    window.push_back({i, std::max<int64_t>(0, positions - 20 + i), positions - 6 + i});
  b.push_back(window);
  // Grouped heads: three queries with the same range.
  b.push_back({{4, 3, positions - 1}, {5, 3, positions - 1}, {6, 3, positions - 1}});
  // A full AVX-512 block: 16 consecutive tokens; 12 queries of 4 tokens x 3 heads; 16 heads of
  // one token.
  std::vector<Query> causal16, grouped, heads;
  for (int64_t i = 0; i < 16; ++i) causal16.push_back({i, 0, positions - 16 + i});
  for (int64_t i = 0; i < 12; ++i) grouped.push_back({i, 0, positions - 4 + i / 3});
  for (int64_t i = 0; i < 16; ++i) heads.push_back({i, 0, positions - 1});
  b.push_back(causal16);
  b.push_back(grouped);
  b.push_back(heads);
  return b;
}

const char* format_name(KvFormat f) {
  switch (f) {
    case KvFormat::kF16:
      return "f16";
    case KvFormat::kBF16:
      return "bf16";
    case KvFormat::kF32:
      return "f32";
    case KvFormat::kInt8:
      return "int8";
    case KvFormat::kInt4:
      return "int4";
  }
  return "?";
}

constexpr KvFormat kFormats[] = {KvFormat::kF16, KvFormat::kBF16, KvFormat::kF32, KvFormat::kInt8,
                                 KvFormat::kInt4};

TEST(PagedAttention, EveryIsaEqualsScalarBitwise) {
  uint32_t seed = 3;
  for (KvFormat format : kFormats) {
    // 72: rows that end in a partial 8/16-lane chunk (int4 needs whole groups of 32).
    for (int64_t head_dim :
         {int64_t{64}, format == KvFormat::kInt4 ? int64_t{96} : int64_t{72}, int64_t{256}}) {
      for (int64_t positions : {17, 40, 300}) {
        const KvSetup s = make_setup(head_dim, head_dim, positions, 16, seed++, 16, format);
        for (const auto& block : blocks(positions)) {
          const auto want = run(Isa::kScalar, s, block);
          for (Isa isa : isas_under_test()) {
            const auto got = run(isa, s, block);
            for (size_t i = 0; i < block.size(); ++i)
              for (int64_t d = 0; d < head_dim; ++d)
                ASSERT_EQ(bits(got[i][d]), bits(want[i][d]))
                    << isa_label(isa) << " " << format_name(format) << " head_dim=" << head_dim
                    << " positions=" << positions << " query " << i << " d=" << d;
          }
        }
      }
    }
  }
}

// A value-row cache shared by the calls of a prefill, as the forward pass shares one per thread
// and layer, changes no result: blocks whose ranges grow (rows added to the cache), a block over
// another KV in between (the cache must notice and reload), a sliding window that starts past
// the cached rows, a range larger than a small cache (converted per block), and K/V rewritten
// after a reset().
TEST(PagedAttention, ValueRowCacheChangesNoResult) {
  uint32_t seed = 41;
  for (KvFormat format : {KvFormat::kF16, KvFormat::kBF16, KvFormat::kInt8, KvFormat::kInt4}) {
    const int64_t positions = 300;
    KvSetup a = make_setup(64, 64, positions, 16, seed++, 16, format);
    const KvSetup b = make_setup(64, 64, positions, 16, seed++, 16, format);
    auto causal = [](int64_t first_token, int64_t n, int64_t window = 0) {
      std::vector<Query> block;  // n tokens x 3 heads sharing a KV head (16 queries at most)
      for (int64_t i = 0; i < std::min<int64_t>(16, 3 * n); ++i) {
        const int64_t last = first_token + i / 3;
        block.push_back({i, window > 0 ? std::max<int64_t>(0, last - window + 1) : 0, last});
      }
      return block;
    };
    struct Call {
      const KvSetup* kv;
      std::vector<Query> block;
    };
    std::vector<Call> calls;
    // Blocks of 5 tokens end on even and odd positions: a bf16 value pair cached with its
    // partner still out of range must be completed when a later block reaches it.
    for (int64_t t = 0; t + 5 <= 120; t += 5) calls.push_back({&a, causal(t, 5)});
    calls.push_back({&b, causal(200, 6)});
    for (int64_t t = 120; t + 6 <= positions; t += 6) calls.push_back({&a, causal(t, 6)});
    calls.push_back({&a, causal(250, 6, 40)});  // rows [211, 255]: inside the cached ones
    calls.push_back({&b, causal(280, 6, 20)});  // rows [261, 285]: a new start
    calls.push_back({&b, causal(100, 6)});      // before the cached start
    const std::vector<uint8_t> a_values = a.values;
    const KvSetup other = make_setup(64, 64, positions, 16, seed++, 16, format);
    for (Isa isa : isas_under_test()) {
      std::copy(a_values.begin(), a_values.end(), a.values.begin());  // undo the rewrite below
      std::vector<float> rows(paged_attention_value_cache_rows(a.shape, positions - 1) * 64);
      ValueRowCache cache{rows.data(), paged_attention_value_cache_rows(a.shape, positions - 1)};
      std::vector<float> small_rows(40 * 64);
      ValueRowCache small{small_rows.data(), 40};
      for (size_t c = 0; c < calls.size(); ++c) {
        const auto want = run(Isa::kScalar, *calls[c].kv, calls[c].block);
        for (ValueRowCache* used : {&cache, &small}) {
          const auto got = run(isa, *calls[c].kv, calls[c].block, nullptr, used);
          for (size_t i = 0; i < want.size(); ++i)
            for (int64_t d = 0; d < 64; ++d)
              ASSERT_EQ(bits(got[i][d]), bits(want[i][d]))
                  << isa_label(isa) << " " << format_name(format) << " call " << c << " query " << i
                  << " d=" << d << (used == &small ? " (small cache)" : "");
        }
      }
      // Rewrite a's value rows in place (same address, other bytes), reset (as the forward pass
      // does at each layer), run again: the cache must not serve the old rows.
      (void)run(isa, a, causal(290, 3), nullptr, &cache);
      std::copy(other.values.begin(), other.values.end(), a.values.begin());
      cache.reset();
      const auto want = run(Isa::kScalar, a, causal(290, 3));
      const auto got = run(isa, a, causal(290, 3), nullptr, &cache);
      for (size_t i = 0; i < want.size(); ++i)
        for (int64_t d = 0; d < 64; ++d)
          ASSERT_EQ(bits(got[i][d]), bits(want[i][d])) << isa_label(isa) << " after reset";
    }
  }
}

// KV-Compress's metric (kernels/attention_metric.h) of a block: `metric` starts as given, the
// queries whose bit is set in `lanes` add their squared probabilities.
std::vector<float> run_metric(Isa isa, const KvSetup& s, const std::vector<Query>& block,
                              uint32_t lanes, std::vector<float> metric) {
  int64_t max_last = 0;
  for (const Query& q : block) max_last = std::max(max_last, q.last);
  std::vector<float> scratch(paged_attention_scratch_floats(s.shape, max_last) + 8);
  float* aligned =
      reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(scratch.data()) + 31) / 32 * 32);
  std::vector<std::vector<float>> out(block.size(), std::vector<float>(s.shape.head_dim_v));
  AttentionQueries qs = queries_of(s, block, out);
  qs.metric = metric.data();
  qs.metric_lanes = lanes;
  paged_attention(isa, s.shape, s.kv(), qs, aligned);
  return metric;
}

// The metric every ISA accumulates is the scalar reference's, bit for bit: every block shape
// (decode groups, prefill query lanes, blocks split in two 8-lane halves), every format, all or
// every other query asking, added to sums that already hold something.
TEST(PagedAttention, MetricOfEveryIsaEqualsScalarBitwise) {
  uint32_t seed = 41;
  for (KvFormat format : kFormats) {
    for (int64_t head_dim : {int64_t{64}, int64_t{256}}) {
      for (int64_t positions : {17, 300}) {
        const KvSetup s = make_setup(head_dim, head_dim, positions, 16, seed++, 16, format);
        std::vector<float> start(positions);
        for (int64_t p = 0; p < positions; ++p) start[p] = 0.001f * static_cast<float>(p % 7);
        for (const auto& block : blocks(positions)) {
          for (uint32_t lanes : {0xffffu, 0x5555u, 0x8001u}) {
            const auto want = run_metric(Isa::kScalar, s, block, lanes, start);
            for (Isa isa : isas_under_test()) {
              const auto got = run_metric(isa, s, block, lanes, start);
              for (int64_t p = 0; p < positions; ++p)
                ASSERT_EQ(bits(got[p]), bits(want[p]))
                    << isa_label(isa) << " " << format_name(format) << " head_dim=" << head_dim
                    << " positions=" << positions << " block of " << block.size() << " lanes "
                    << lanes << " p=" << p;
            }
          }
        }
      }
    }
  }
}

// Decode blocks of every group size (the heads of one KV head, 1 to 8: a kernel instance each),
// over ranges that fill whole groups of blocks or leave a remainder, with value rows of 1 to 4
// chunks of 16 dimensions and a partial chunk, in every KV format.
TEST(PagedAttention, DecodeGroupsOfEverySizeEqualScalar) {
  uint32_t seed = 40;
  for (KvFormat format : kFormats) {
    const bool int4 = format == KvFormat::kInt4;  // whole groups of 32 only
    for (auto [head_dim, head_dim_v] : {std::pair<int64_t, int64_t>{64, 64},
                                        {256, 256},
                                        {64, int4 ? 96 : 40},
                                        {128, int4 ? 224 : 200}}) {
      for (int64_t positions : {16, 64, 200, 257}) {
        const KvSetup s = make_setup(head_dim, head_dim_v, positions, 8, seed++, 16, format);
        for (int64_t n = 1; n <= 8; ++n) {
          for (int64_t first : {int64_t{0}, positions / 3}) {
            std::vector<Query> block;
            for (int64_t i = 0; i < n; ++i) block.push_back({i, first, positions - 1});
            const auto want = run(Isa::kScalar, s, block);
            for (Isa isa : isas_under_test()) {
              const auto got = run(isa, s, block);
              for (int64_t i = 0; i < n; ++i)
                for (int64_t d = 0; d < head_dim_v; ++d)
                  ASSERT_EQ(bits(got[i][d]), bits(want[i][d]))
                      << isa_label(isa) << " " << format_name(format) << " heads=" << n
                      << " head_dim=" << head_dim << " head_dim_v=" << head_dim_v << " range ["
                      << first << ", " << positions - 1 << "] d=" << d;
            }
          }
        }
      }
    }
  }
}

// Key and value rows whose length is not a multiple of 8 (the last chunk of the queries' copy
// and of the output is narrower), prefill and decode blocks.
TEST(PagedAttention, ValueRowsOfAnyLengthEqualScalar) {
  for (KvFormat format : {KvFormat::kF16, KvFormat::kBF16, KvFormat::kF32, KvFormat::kInt8}) {
    for (auto [head_dim, head_dim_v] :
         {std::pair<int64_t, int64_t>{64, 36}, {64, 13}, {36, 36}, {20, 13}}) {
      const KvSetup s = make_setup(head_dim, head_dim_v, 100, 16,
                                   60 + static_cast<uint32_t>(head_dim + head_dim_v), 16, format);
      for (const auto& block : blocks(100)) {
        const auto want = run(Isa::kScalar, s, block);
        for (Isa isa : isas_under_test()) {
          const auto got = run(isa, s, block);
          for (size_t i = 0; i < block.size(); ++i)
            for (int64_t d = 0; d < head_dim_v; ++d)
              ASSERT_EQ(bits(got[i][d]), bits(want[i][d]))
                  << isa_label(isa) << " " << format_name(format) << " head_dim=" << head_dim
                  << " head_dim_v=" << head_dim_v << " query " << i << " d=" << d;
        }
      }
    }
  }
}

// Pages of 8 positions: the AVX-512 decode path (16 positions) steps aside, the rest is alike.
TEST(PagedAttention, PagesOfEightMatchScalar) {
  for (KvFormat format : kFormats) {
    const KvSetup s = make_setup(64, 64, 61, 16, 7, /*page_size=*/8, format);
    for (const auto& block : blocks(61)) {
      const auto want = run(Isa::kScalar, s, block);
      for (Isa isa : isas_under_test()) {
        const auto got = run(isa, s, block);
        for (size_t i = 0; i < block.size(); ++i)
          for (int64_t d = 0; d < 64; ++d)
            ASSERT_EQ(bits(got[i][d]), bits(want[i][d])) << isa_label(isa) << format_name(format);
      }
    }
  }
}

// Pages whose size is not a multiple of 8 take the scalar path on every ISA.
TEST(PagedAttention, OddPageSizesMatchScalar) {
  const KvSetup s = make_setup(64, 64, 61, 16, 5, /*page_size=*/12);
  for (const auto& block : blocks(61)) {
    const auto want = run(Isa::kScalar, s, block);
    for (Isa isa : isas_under_test()) {
      const auto got = run(isa, s, block);
      for (size_t i = 0; i < block.size(); ++i)
        for (int64_t d = 0; d < 64; ++d) ASSERT_EQ(bits(got[i][d]), bits(want[i][d]));
    }
  }
}

TEST(PagedAttention, QueryResultIndependentOfItsBlock) {
  const int64_t positions = 123;
  for (KvFormat format : {KvFormat::kF16, KvFormat::kInt8, KvFormat::kInt4}) {
    const KvSetup s = make_setup(64, 64, positions, 16, 11, 16, format);
    for (Isa isa : isas_under_test()) {
      for (const auto& block : blocks(positions)) {
        const auto together = run(isa, s, block);
        for (size_t i = 0; i < block.size(); ++i) {
          const auto alone = run(isa, s, {block[i]});
          for (int64_t d = 0; d < 64; ++d)
            ASSERT_EQ(bits(alone[0][d]), bits(together[i][d])) << isa_label(isa) << " query " << i;
        }
      }
    }
  }
}

// Key or value p as attention sees it: the stored elements, rotated back for a rotated format.
std::vector<float> key_row(const KvSetup& s, int64_t p) {
  std::vector<float> k(s.shape.head_dim);
  for (int64_t e = 0; e < s.shape.head_dim; ++e)
    k[e] = kv_load_key(s.format, s.key_block(p), s.shape.head_dim, s.page_size, p % s.page_size, e);
  if (kv_format_rotated(s.format, s.shape.head_dim)) kv_rotate(k.data(), s.shape.head_dim);
  return k;
}
std::vector<float> value_row(const KvSetup& s, int64_t p) {
  std::vector<float> v(s.shape.head_dim_v);
  for (int64_t e = 0; e < s.shape.head_dim_v; ++e)
    v[e] = kv_load_value(s.format, s.value_block(p), s.shape.head_dim_v, s.page_size,
                         p % s.page_size, e);
  if (kv_format_rotated(s.format, s.shape.head_dim_v)) kv_rotate(v.data(), s.shape.head_dim_v);
  return v;
}

// Query element e as the format's order multiplies it: q' (bf16_operand) in the bf16 order.
double query_operand(KvFormat format, float q) {
  return attends_in_bf16(format) ? bf16_operand(q) : q;
}

// Against attention in double over the same (dequantized) K/V: the score chains (head_dim fmas and
// a scale), exp_approx (< 4 ulp), the weight sum and the output chains bound the error; 1e-4
// relative to the output's magnitude holds with a wide margin for these sizes. The bf16 order
// rounds each weight to 8 bits (relative error <= 2^-9, in the sum and in the output): 2^-8.
TEST(PagedAttention, ScalarCloseToDouble) {
  const int64_t positions = 200, head_dim = 64;
  for (KvFormat format : kFormats) {
    const KvSetup s = make_setup(head_dim, head_dim, positions, 16, 17, 16, format);
    for (const auto& block : blocks(positions)) {
      const auto got = run(Isa::kScalar, s, block);
      for (size_t i = 0; i < block.size(); ++i) {
        const float* q = s.q.data() + block[i].index * head_dim;
        std::vector<double> sc;
        double m = -INFINITY;
        for (int64_t p = block[i].first; p <= block[i].last; ++p) {
          const std::vector<float> k = key_row(s, p);
          double dot = 0;
          for (int64_t e = 0; e < head_dim; ++e) dot += query_operand(format, q[e]) * k[e];
          sc.push_back(dot * s.shape.scale);
          m = std::max(m, sc.back());
        }
        double sum = 0;
        for (double& v : sc) sum += (v = std::exp(v - m));
        const double tolerance = attends_in_bf16(format) ? 0x1p-8 : 1e-4;
        for (int64_t d = 0; d < head_dim; ++d) {
          double o = 0, mag = 0;
          for (int64_t p = block[i].first; p <= block[i].last; ++p) {
            const double v = value_row(s, p)[d];
            o += sc[p - block[i].first] * v;
            mag += std::fabs(sc[p - block[i].first] * v);
          }
          ASSERT_NEAR(got[i][d], o / sum, tolerance * mag / sum + 1e-7)
              << format_name(format) << " query " << i << " d=" << d;
        }
      }
    }
  }
}

// Sink logits for a block of n queries: below, near and far above the scores (|s| is a few units
// here), so that the sink sometimes sets the softmax's max and sometimes takes most of it.
std::vector<float> sinks_for(size_t n) {
  const float choices[] = {-2.5f, 0.75f, 3.0f, 40.0f, -30.0f, 1.5f};
  std::vector<float> sinks(n);
  for (size_t i = 0; i < n; ++i) sinks[i] = choices[i % 6];
  return sinks;
}

// gpt-oss's attention sinks: every ISA gives the scalar reference's bits in every block shape and
// KV format, and a sink of -inf is bitwise no sink at all.
TEST(PagedAttention, SinksOfEveryIsaEqualScalarBitwise) {
  uint32_t seed = 70;
  for (KvFormat format : kFormats) {
    for (int64_t head_dim : {int64_t{64}, int64_t{256}}) {
      for (int64_t positions : {17, 300}) {
        const KvSetup s = make_setup(head_dim, head_dim, positions, 16, seed++, 16, format);
        for (const auto& block : blocks(positions)) {
          const std::vector<float> sinks = sinks_for(block.size());
          const std::vector<float> none(block.size(), -INFINITY);
          const auto want = run(Isa::kScalar, s, block, &sinks);
          const auto plain = run(Isa::kScalar, s, block);
          for (Isa isa : isas_under_test()) {
            const auto got = run(isa, s, block, &sinks);
            const auto got_none = run(isa, s, block, &none);
            for (size_t i = 0; i < block.size(); ++i)
              for (int64_t d = 0; d < head_dim; ++d) {
                ASSERT_EQ(bits(got[i][d]), bits(want[i][d]))
                    << isa_label(isa) << " " << format_name(format) << " head_dim=" << head_dim
                    << " positions=" << positions << " block of " << block.size() << " query " << i
                    << " d=" << d;
                ASSERT_EQ(bits(got_none[i][d]), bits(plain[i][d]))
                    << isa_label(isa) << " " << format_name(format) << " -inf sink, query " << i;
              }
          }
        }
      }
    }
  }
}

// Sinks against double arithmetic: the sink joins the max and the denominator, never the values
// (llama.cpp's soft_max with sinks and its flash attention). A sink of 40 leaves the positions
// about e^-37 of the mass, so the outputs shrink by that much and the bound (relative to the
// output's magnitude, as in ScalarCloseToDouble) shrinks with them.
TEST(PagedAttention, SinksCloseToDouble) {
  const int64_t positions = 200, head_dim = 64;
  for (KvFormat format : {KvFormat::kF16, KvFormat::kInt8}) {
    const KvSetup s = make_setup(head_dim, head_dim, positions, 16, 19, 16, format);
    for (const auto& block : blocks(positions)) {
      const std::vector<float> sinks = sinks_for(block.size());
      const auto got = run(Isa::kScalar, s, block, &sinks);
      for (size_t i = 0; i < block.size(); ++i) {
        const float* q = s.q.data() + block[i].index * head_dim;
        std::vector<double> sc;
        double m = sinks[i];
        for (int64_t p = block[i].first; p <= block[i].last; ++p) {
          const std::vector<float> k = key_row(s, p);
          double dot = 0;
          for (int64_t e = 0; e < head_dim; ++e) dot += double{q[e]} * k[e];
          sc.push_back(dot * s.shape.scale);
          m = std::max(m, sc.back());
        }
        double sum = std::exp(sinks[i] - m);
        for (double& v : sc) sum += (v = std::exp(v - m));
        for (int64_t d = 0; d < head_dim; ++d) {
          double o = 0, mag = 0;
          for (int64_t p = block[i].first; p <= block[i].last; ++p) {
            const double v = value_row(s, p)[d];
            o += sc[p - block[i].first] * v;
            mag += std::fabs(sc[p - block[i].first] * v);
          }
          ASSERT_NEAR(got[i][d], o / sum, 1e-4 * mag / sum + 1e-30)
              << format_name(format) << " query " << i << " sink " << sinks[i] << " d=" << d;
        }
      }
    }
  }
}

// The metric against squared probabilities computed in double over the same K/V: the probability
// carries the weight's and the sum's error (the bound of ScalarCloseToDouble), its square twice
// that; 1e-4 relative to the sum of squares plus an absolute 1e-9 for the vanishing ones holds
// with a wide margin (2^-6 for the bf16 order's 8-bit weights: 2^-9 from the weight and as much
// from the sum, twice over in the square). A position no asking query sees keeps its sum.
TEST(PagedAttention, MetricIsSquaredAttentionSummedOverQueries) {
  const int64_t positions = 200, head_dim = 64;
  for (KvFormat format : kFormats) {
    const KvSetup s = make_setup(head_dim, head_dim, positions, 16, 23, 16, format);
    for (const auto& block : blocks(positions)) {
      const uint32_t lanes = 0x5555u;  // queries 0, 2, 4, ...
      const auto got = run_metric(Isa::kScalar, s, block, lanes, std::vector<float>(positions));
      std::vector<double> want(positions, 0.0);
      for (size_t i = 0; i < block.size(); i += 2) {
        const float* q = s.q.data() + block[i].index * head_dim;
        std::vector<double> sc;
        double m = -INFINITY;
        for (int64_t p = block[i].first; p <= block[i].last; ++p) {
          const std::vector<float> k = key_row(s, p);
          double dot = 0;
          for (int64_t e = 0; e < head_dim; ++e) dot += query_operand(format, q[e]) * k[e];
          sc.push_back(dot * s.shape.scale);
          m = std::max(m, sc.back());
        }
        double sum = 0;
        for (double& v : sc) sum += (v = std::exp(v - m));
        for (int64_t p = block[i].first; p <= block[i].last; ++p) {
          const double a = sc[p - block[i].first] / sum;
          want[p] += a * a;
        }
      }
      for (int64_t p = 0; p < positions; ++p)
        ASSERT_NEAR(got[p], want[p], (attends_in_bf16(format) ? 0x1p-6 : 1e-4) * want[p] + 1e-9)
            << format_name(format) << " block of " << block.size() << " p=" << p;
    }
  }
}

}  // namespace
}  // namespace drift::kernels

namespace drift::kernels {
namespace {

// A decode block computed in parts (paged_attention.h, "Decode attention in parts"): each pass's
// parts run in reverse order, as threads may; the block is head `head` of `heads` whose value
// dimensions the parts share; `metric`: the KV-Compress sums the block adds to.
std::vector<std::vector<float>> run_in_parts(Isa isa, const KvSetup& s,
                                             const std::vector<Query>& block, int parts,
                                             const std::vector<float>* sinks,
                                             std::vector<float>* metric, int64_t heads = 1,
                                             int64_t head = 0) {
  const int64_t last = block[0].last;
  std::vector<float> scores_memory(decode_scores_floats(last) + 16);
  float* scores =
      reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(scores_memory.data()) + 63) / 64 * 64);
  std::vector<float> maxima(parts * kAttentionLanes, 99.0f);
  std::vector<std::vector<float>> priv(parts,
                                       std::vector<float>(decode_private_floats(s.shape), -5.0f));
  std::vector<std::vector<float>> out(block.size(), std::vector<float>(s.shape.head_dim_v, -7.0f));
  AttentionQueries qs = queries_of(s, block, out, sinks);
  if (metric != nullptr) {
    qs.metric = metric->data();
    qs.metric_lanes = 0x5u;
  }
  const DecodeParts dp{scores, maxima.data(), parts};
  const PagedKv kv = s.kv();
  for (int p = parts - 1; p >= 0; --p) decode_scores(isa, s.shape, kv, qs, dp, p, priv[p].data());
  for (int p = parts - 1; p >= 0; --p) decode_weights(isa, kv, qs, dp, p);
  for (int p = parts - 1; p >= 0; --p) {
    const DimensionShare share = decode_value_share(heads, head, s.shape.head_dim_v, p, parts);
    decode_values(isa, s.shape, kv, qs, dp, share.begin, share.end, priv[p].data());
  }
  return out;
}

// In parts, a decode block gives the outputs (and the metric) of one call on the same ISA, bit
// for bit, whatever the number of parts: more parts than position or dimension units too, ranges
// that start inside a unit, sinks, every format (the rotated ones too), every group size.
TEST(PagedAttention, DecodeInPartsEqualsOneCallBitwise) {
  uint32_t seed = 77;
  std::vector<Isa> isas = isas_under_test();
  isas.push_back(Isa::kScalar);
  for (KvFormat format : kFormats) {
    const bool int4 = format == KvFormat::kInt4;  // whole groups of 32 only
    for (auto [head_dim, head_dim_v] : {std::pair<int64_t, int64_t>{64, 64},
                                        {256, 256},
                                        {128, int4 ? 224 : 200},
                                        {64, int4 ? 96 : 40}}) {
      for (int64_t positions : {20, 333}) {
        const KvSetup s = make_setup(head_dim, head_dim_v, positions, 8, seed++, 16, format);
        for (int64_t n : {1, 3, 8}) {
          for (int64_t first : {int64_t{5}, positions / 2}) {
            std::vector<Query> block;
            for (int64_t i = 0; i < n; ++i) block.push_back({i, first, positions - 1});
            const std::vector<float> sinks = sinks_for(static_cast<size_t>(n));
            for (bool with_sinks : {false, true}) {
              const std::vector<float>* sk = with_sinks ? &sinks : nullptr;
              for (Isa isa : isas) {
                const auto want = run(isa, s, block, sk);
                std::vector<float> start(positions, 0.25f);
                const auto want_metric = run_metric(isa, s, block, 0x5u, start);
                // (heads, head): the block alone, or a head of three whose dimensions the parts
                // deal out with the others' (split inside it, or whole).
                for (auto [parts, heads, head] : {std::tuple<int, int64_t, int64_t>{1, 1, 0},
                                                  {2, 1, 0},
                                                  {3, 1, 0},
                                                  {40, 1, 0},
                                                  {2, 3, 1},
                                                  {2, 3, 2},
                                                  {3, 3, 0}}) {
                  std::vector<float> metric = start;
                  const auto got = run_in_parts(isa, s, block, parts, sk,
                                                with_sinks ? nullptr : &metric, heads, head);
                  for (int64_t i = 0; i < n; ++i)
                    for (int64_t d = 0; d < head_dim_v; ++d)
                      ASSERT_EQ(bits(got[i][d]), bits(want[i][d]))
                          << isa_label(isa) << " " << format_name(format) << " heads=" << n
                          << " head_dim=" << head_dim << "/" << head_dim_v << " range [" << first
                          << ", " << positions - 1 << "] sinks=" << with_sinks << " parts=" << parts
                          << " d=" << d;
                  if (!with_sinks)
                    for (int64_t p = 0; p < positions; ++p)
                      ASSERT_EQ(bits(metric[p]), bits(want_metric[p]))
                          << isa_label(isa) << " " << format_name(format) << " parts=" << parts
                          << " metric p=" << p;
                }
              }
            }
          }
        }
      }
    }
  }
}

// The value dimensions of a decode's heads dealt out to parts: every dimension of every head
// exactly once, in units of 32, whole heads to a part where the heads divide evenly.
TEST(PagedAttention, DecodeValueSharesCoverEveryDimensionOnce) {
  for (int64_t heads : {1, 3, 8}) {
    for (int64_t head_dim_v : {40, 64, 128, 256}) {
      for (int parts : {1, 2, 3, 5, 40}) {
        for (int64_t head = 0; head < heads; ++head) {
          std::vector<int> taken(static_cast<size_t>(head_dim_v), 0);
          for (int part = 0; part < parts; ++part) {
            const DimensionShare d = decode_value_share(heads, head, head_dim_v, part, parts);
            ASSERT_LE(d.begin, d.end);
            if (d.begin < d.end) EXPECT_EQ(d.begin % 32, 0);
            for (int64_t i = d.begin; i < d.end; ++i) ++taken[static_cast<size_t>(i)];
          }
          for (int64_t i = 0; i < head_dim_v; ++i)
            ASSERT_EQ(taken[static_cast<size_t>(i)], 1)
                << heads << " heads of " << head_dim_v << ", " << parts << " parts, head " << head
                << " d=" << i;
        }
      }
    }
  }
  // 8 heads, 2 parts: heads 0-3 whole to part 0, 4-7 to part 1.
  for (int64_t head = 0; head < 8; ++head) {
    const DimensionShare d = decode_value_share(8, head, 128, head < 4 ? 0 : 1, 2);
    EXPECT_EQ(d.begin, 0);
    EXPECT_EQ(d.end, 128);
  }
  // 3 heads of 64, 2 parts: the middle head is the one split.
  EXPECT_EQ(decode_value_share(3, 0, 64, 0, 2).end, 64);
  EXPECT_EQ(decode_value_share(3, 1, 64, 0, 2).end, 32);
  EXPECT_EQ(decode_value_share(3, 1, 64, 1, 2).begin, 32);
  EXPECT_EQ(decode_value_share(3, 2, 64, 1, 2).begin, 0);
}

// Only decode blocks split: queries of different ranges (a prefill's) take one call.
TEST(PagedAttention, OnlyDecodeBlocksSplit) {
  const KvSetup s = make_setup(64, 64, 40, 8, 3, 16, KvFormat::kF16);
  AttentionQueries qs{};
  qs.n = 2;
  qs.first[0] = qs.first[1] = 0;
  qs.last[0] = qs.last[1] = 39;
  EXPECT_TRUE(decode_splits(s.kv(), qs));
  qs.last[1] = 38;
  EXPECT_FALSE(decode_splits(s.kv(), qs));
}

}  // namespace
}  // namespace drift::kernels
