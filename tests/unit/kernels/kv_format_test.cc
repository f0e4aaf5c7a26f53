// KV cache element formats: what is stored reads back within the error the format allows, slots
// written in any order do not disturb each other (two int4 slots share a byte), and the byte counts
// hold the data and scales.
#include "kernels/kv_format.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/fp16.h"

namespace drift::kernels {
namespace {

// The largest |x - read(x)| a format allows for an element of a group with largest magnitude
// amax. Float types round once (fp16: 2^-11 relative, bf16: 2^-8; f32 exact). int8/int4: the code
// is x / s rounded to nearest (error s / 2), s = fp16(amax / max_code) rounds by up to 2^-11
// relative, so a clamped extreme code errs by at most amax * 2^-11 more. int4 may clip more (see
// int4_scale): its bound is looser, its squared error is tested below.
double allowed_error(KvFormat f, float x, float amax) {
  switch (f) {
    case KvFormat::kF16:
      return std::fabs(x) * 0x1p-11 + 0x1p-25;
    case KvFormat::kBF16:
      return std::fabs(x) * 0x1p-8;
    case KvFormat::kF32:
      return 0.0;
    case KvFormat::kInt8:
      return amax / 127.0 * (0.5 + 0x1p-10) + amax * 0x1p-11;
    case KvFormat::kInt4:
      // |scale| = amax / 8 shrunk by at most 0.8: half a step, or a clipped extreme element's
      // amax - 8 * |scale| <= 0.2 amax.
      return std::max(amax / 16.0, 0.2 * amax) * (1 + 0x1p-10) + amax * 0x1p-11;
  }
  return 0.0;
}

TEST(KvFormat, KeysAndValuesReadBackWithinTheFormatsError) {
  std::mt19937 rng(5);
  const int64_t dim = 64, page_size = 16;
  for (KvFormat f :
       {KvFormat::kF16, KvFormat::kBF16, KvFormat::kF32, KvFormat::kInt8, KvFormat::kInt4}) {
    std::vector<uint8_t> kblock(kv_block_bytes(f, dim, page_size), 0xa5);
    std::vector<uint8_t> vblock(kv_block_bytes(f, dim, page_size), 0x5a);
    std::vector<std::vector<float>> rows(page_size);
    std::vector<int64_t> order(page_size);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);  // neighbours written before and after
    for (int64_t j : order) {
      rows[j] = testing::random_floats(dim, rng, 3.0f);
      rows[j][j % dim] = 40.0f * (j % 2 ? 1 : -1);  // an outlier per row
      kv_store_key(f, kblock.data(), dim, page_size, j, rows[j].data());
      kv_store_value(f, vblock.data(), dim, page_size, j, rows[j].data());
    }
    const int64_t group = kv_group_size(f, dim) ? kv_group_size(f, dim) : dim;
    for (int64_t j = 0; j < page_size; ++j) {
      // A rotated format stores H x: compare the stored elements with H x (the error bound is
      // the quantizer's, in the rotated space).
      std::vector<float> want = rows[j];
      if (kv_format_rotated(f, dim)) kv_rotate(want.data(), dim);
      for (int64_t e = 0; e < dim; ++e) {
        const int64_t g0 = e / group * group;
        float amax = 0;
        for (int64_t u = g0; u < g0 + group; ++u) amax = std::max(amax, std::fabs(want[u]));
        const double tol = allowed_error(f, want[e], amax);
        EXPECT_LE(std::fabs(kv_load_key(f, kblock.data(), dim, page_size, j, e) - want[e]), tol)
            << int(f) << " slot " << j << " e " << e;
        EXPECT_LE(std::fabs(kv_load_value(f, vblock.data(), dim, page_size, j, e) - want[e]), tol)
            << int(f) << " slot " << j << " e " << e;
      }
    }
  }
}

// H is orthogonal and symmetric: rotating twice gives the row back (to rounding), and a lone
// outlier is spread evenly over its group (what makes one int4 scale fit the group).
TEST(KvFormat, RotationIsItsOwnInverseAndSpreadsAnOutlier) {
  std::mt19937 rng(9);
  std::vector<float> x = testing::random_floats(64, rng, 2.0f);
  std::vector<float> y = x;
  kv_rotate(y.data(), 64);
  kv_rotate(y.data(), 64);
  for (int64_t i = 0; i < 64; ++i) EXPECT_NEAR(y[i], x[i], 1e-5f * 64);
  std::vector<float> spike(32, 0.0f);
  spike[5] = 32.0f;
  kv_rotate(spike.data(), 32);
  for (float v : spike) EXPECT_FLOAT_EQ(std::fabs(v), 32.0f / std::sqrt(32.0f));
}

// The int4 codebook and scale search (kv_format.h): per group, never worse than the codebook with
// the plain scale (largest element -> level -127), which the search includes; over many groups of
// Gaussian values, a clearly smaller error than evenly spaced codes -8 .. 7 with the largest
// element at -8 (the format before the codebook, whose KV cache cost SmolLM2 5% perplexity).
TEST(KvFormat, Int4CodebookAndScaleSearchBeatEvenCodes) {
  std::mt19937 rng(13);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  auto nearest_level = [](float y) {
    float best = kKvInt4Levels[0];
    for (int8_t level : kKvInt4Levels)
      if (std::fabs(y - level) < std::fabs(y - best)) best = level;
    return best;
  };
  double total_searched = 0, total_even = 0;
  for (int trial = 0; trial < 200; ++trial) {
    float x[32];
    for (float& v : x) v = normal(rng);
    std::vector<uint8_t> block(kv_block_bytes(KvFormat::kInt4, 32, 2));
    // Stored rotated: compare in the rotated space.
    kv_store_key(KvFormat::kInt4, block.data(), 32, 2, 0, x);
    float hx[32];
    std::copy(x, x + 32, hx);
    kv_rotate(hx, 32);
    double searched_error = 0, plain_error = 0, even_error = 0;
    for (int g0 = 0; g0 < 32; g0 += kKvInt4Group) {
      float m = 0;
      for (int e = g0; e < g0 + kKvInt4Group; ++e)
        if (std::fabs(hx[e]) > std::fabs(m)) m = hx[e];
      const float plain = fp16_to_f32(f32_to_fp16(-m / 127));
      const float even = fp16_to_f32(f32_to_fp16(-m / 8));
      for (int e = g0; e < g0 + kKvInt4Group; ++e) {
        const double got = kv_load_key(KvFormat::kInt4, block.data(), 32, 2, 0, e);
        searched_error += (got - hx[e]) * (got - hx[e]);
        const double p = nearest_level(hx[e] / plain) * plain;
        plain_error += (p - hx[e]) * (p - hx[e]);
        const double q = std::clamp(std::nearbyint(hx[e] * (1.0f / even)), -8.0f, 7.0f) * even;
        even_error += (q - hx[e]) * (q - hx[e]);
      }
    }
    EXPECT_LE(searched_error, plain_error * (1 + 1e-5)) << trial;
    total_searched += searched_error;
    total_even += even_error;
  }
  EXPECT_LT(total_searched, 0.9 * total_even) << total_searched / total_even;
  std::printf("int4 squared error vs even codes: %.3f\n", total_searched / total_even);
}

TEST(KvFormat, AZeroRowReadsZero) {
  for (KvFormat f : {KvFormat::kInt8, KvFormat::kInt4}) {
    std::vector<uint8_t> block(kv_block_bytes(f, 32, 2), 0xff);
    const std::vector<float> zero(32, 0.0f);
    kv_store_value(f, block.data(), 32, 2, 1, zero.data());
    for (int64_t e = 0; e < 32; ++e) EXPECT_EQ(kv_load_value(f, block.data(), 32, 2, 1, e), 0.0f);
  }
}

TEST(KvFormat, BlockBytesHoldCodesAndScales) {
  EXPECT_EQ(kv_block_bytes(KvFormat::kF16, 64, 16), 2048);
  EXPECT_EQ(kv_block_bytes(KvFormat::kF32, 64, 16), 4096);
  EXPECT_EQ(kv_block_bytes(KvFormat::kInt8, 64, 16), 1024 + 64);
  EXPECT_EQ(kv_block_bytes(KvFormat::kInt8, 72, 16), 1152 + 32);  // one scale per row
  EXPECT_EQ(kv_block_bytes(KvFormat::kInt4, 64, 16), 512 + 128);
  EXPECT_EQ(kv_block_bytes(KvFormat::kInt4, 256, 16), 2048 + 512);
  EXPECT_TRUE(kv_format_check(KvFormat::kInt4, 64, 16).ok());
  EXPECT_FALSE(kv_format_check(KvFormat::kInt4, 48, 16).ok());
  EXPECT_FALSE(kv_format_check(KvFormat::kInt4, 64, 15).ok());
}

}  // namespace
}  // namespace drift::kernels
