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
#include "kernels/kv_int4.h"

namespace drift::kernels {
namespace {

// The largest |x - read(x)| a format allows for an element of a group with largest magnitude
// amax. Float types round once (fp16: 2^-11 relative, bf16: 2^-8; f32 exact). int8: the code is
// x / s rounded to nearest (error s / 2), s = fp16(amax / 127) rounds by up to 2^-11 relative, so
// a clamped extreme code errs by at most amax * 2^-11 more. int4 values: the largest element sits
// on level -127 and the others within [-127 s, 127 s], at most half the widest gap (24 / 2) from a
// level or 127 - 113 = 14 above the top one, so 14.5 s with the scale's and the products'
// roundings. int4 keys: see key_error_bound.
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
      return amax * 14.5 / 127.0;
  }
  return 0.0;
}

// The squared error over an int4 key group (x[16], rotated) with sub-scale `sub` of `unit`, in
// double, each element on its nearest level.
double key_group_error(const float* x, int sub, float unit) {
  const double s = static_cast<double>(sub) * unit;
  double error = 0;
  for (int u = 0; u < 16; ++u) {
    double best = INFINITY;
    for (int8_t level : kKvInt4Levels) best = std::min(best, std::fabs(x[u] - level * s));
    error += best * best;
  }
  return error;
}

// An int4 key group's searched sub-scale errs no more in total than the plain one (largest
// element m at level -127: m / -127 rounded to the row's sub-scale grid), which is among the
// candidates; so no element errs by more than the square root of the plain scale's total (to the
// search's fp32 roundings).
double key_error_bound(const float* x, float unit) {
  const int sub = static_cast<int>(
      std::clamp(std::nearbyint(kv_int4::signed_max(x, 16) / -127.0 / unit), -127.0, 127.0));
  return std::sqrt(key_group_error(x, sub, unit)) * (1 + 1e-5);
}

TEST(KvFormat, KeysAndValuesReadBackWithinTheFormatsError) {
  std::mt19937 rng(5);
  const int64_t page_size = 16;
  for (KvFormat f :
       {KvFormat::kF16, KvFormat::kBF16, KvFormat::kF32, KvFormat::kInt8, KvFormat::kInt4}) {
    for (int64_t dim : {int64_t{64}, int64_t{96}}) {
      std::vector<uint8_t> kblock(kv_key_block_bytes(f, dim, page_size), 0xa5);
      std::vector<uint8_t> vblock(kv_value_block_bytes(f, dim, page_size), 0x5a);
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
      const int64_t key_group = kv_key_group(f, dim) ? kv_key_group(f, dim) : dim;
      const int64_t value_group = kv_value_group(f, dim) ? kv_value_group(f, dim) : dim;
      for (int64_t j = 0; j < page_size; ++j) {
        // A rotated format stores H x: compare the stored elements with H x (the error bound is
        // the quantizer's, in the rotated space).
        std::vector<float> want = rows[j];
        if (kv_format_rotated(f, dim)) kv_rotate(want.data(), dim);
        float row_amax = 0;
        for (float w : want) row_amax = std::max(row_amax, std::fabs(w));
        const float unit = kv_int4::key_unit(kv_int4::key_master(row_amax));
        auto amax_of = [&](int64_t e, int64_t group) {
          float amax = 0;
          for (int64_t u = e / group * group; u < (e / group + 1) * group; ++u)
            amax = std::max(amax, std::fabs(want[u]));
          return amax;
        };
        for (int64_t e = 0; e < dim; ++e) {
          const double key_tol = f == KvFormat::kInt4
                                     ? key_error_bound(&want[e / 16 * 16], unit)
                                     : allowed_error(f, want[e], amax_of(e, key_group));
          EXPECT_LE(std::fabs(kv_load_key(f, kblock.data(), dim, page_size, j, e) - want[e]),
                    key_tol)
              << int(f) << " dim " << dim << " slot " << j << " e " << e;
          EXPECT_LE(std::fabs(kv_load_value(f, vblock.data(), dim, page_size, j, e) - want[e]),
                    allowed_error(f, want[e], amax_of(e, value_group)))
              << int(f) << " dim " << dim << " slot " << j << " e " << e;
        }
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

// The int4 codebook and key scale search (kv_int4.h): per group, never worse than the plain
// scale on the same sub-scale grid (largest element -> level -127), which the search includes;
// over many groups of Gaussian values, a clearly smaller error than evenly spaced codes -8 .. 7
// with the largest element at -8 and an exact fp32 scale (the format before the codebook, whose
// KV cache cost SmolLM2 5% perplexity).
TEST(KvFormat, Int4CodebookAndScaleSearchBeatEvenCodes) {
  std::mt19937 rng(13);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  double total_searched = 0, total_even = 0;
  for (int trial = 0; trial < 200; ++trial) {
    float x[32];
    for (float& v : x) v = normal(rng);
    std::vector<uint8_t> block(kv_key_block_bytes(KvFormat::kInt4, 32, 2));
    // Stored rotated: compare in the rotated space.
    kv_store_key(KvFormat::kInt4, block.data(), 32, 2, 0, x);
    float hx[32];
    std::copy(x, x + 32, hx);
    kv_rotate(hx, 32);
    float amax = 0;
    for (float v : hx) amax = std::max(amax, std::fabs(v));
    const float unit = kv_int4::key_unit(kv_int4::key_master(amax));
    for (int g0 = 0; g0 < 32; g0 += kKvInt4KeyGroup) {
      double searched_error = 0, even_error = 0;
      const float m = kv_int4::signed_max(hx + g0, 16);
      const double even = -m / 8.0;
      for (int e = g0; e < g0 + kKvInt4KeyGroup; ++e) {
        const double got = kv_load_key(KvFormat::kInt4, block.data(), 32, 2, 0, e);
        searched_error += (got - hx[e]) * (got - hx[e]);
        const double q = std::clamp(std::nearbyint(hx[e] / even), -8.0, 7.0) * even;
        even_error += (q - hx[e]) * (q - hx[e]);
      }
      const int plain = static_cast<int>(std::nearbyint(m / -127.0 / unit));
      EXPECT_LE(searched_error, key_group_error(hx + g0, plain, unit) * (1 + 1e-5)) << trial;
      total_searched += searched_error;
      total_even += even_error;
    }
  }
  EXPECT_LT(total_searched, 0.9 * total_even) << total_searched / total_even;
  std::printf("int4 key squared error vs even codes: %.3f\n", total_searched / total_even);
}

TEST(KvFormat, AZeroRowReadsZero) {
  for (KvFormat f : {KvFormat::kInt8, KvFormat::kInt4}) {
    std::vector<uint8_t> keys(kv_key_block_bytes(f, 32, 2), 0xff);
    std::vector<uint8_t> values(kv_value_block_bytes(f, 32, 2), 0xff);
    const std::vector<float> zero(32, 0.0f);
    kv_store_key(f, keys.data(), 32, 2, 1, zero.data());
    kv_store_value(f, values.data(), 32, 2, 1, zero.data());
    for (int64_t e = 0; e < 32; ++e) {
      EXPECT_EQ(kv_load_key(f, keys.data(), 32, 2, 1, e), 0.0f);
      EXPECT_EQ(kv_load_value(f, values.data(), 32, 2, 1, e), 0.0f);
    }
  }
}

// bf16 K/V store elements below 2^-40 in magnitude as zero (of their sign), what the bf16
// attention order (paged_attention.h) assumes of its operands; the rest round to nearest even.
TEST(KvFormat, Bf16StoresTinyElementsAsZero) {
  const std::vector<float> row = {0x1p-40f, 0x1.ffp-41f, -0x1p-41f,      1e-30f,
                                  -3e-39f,  0.0f,        1.0f + 0x1p-8f, -2.5f};
  const std::vector<float> want = {0x1p-40f, 0x1p-40f, -0.0f, 0.0f, -0.0f, 0.0f, 1.0f, -2.5f};
  const int64_t dim = static_cast<int64_t>(row.size());
  for (Isa isa : supported_isas(detect_cpu_features())) {
    std::vector<uint8_t> keys(kv_key_block_bytes(KvFormat::kBF16, dim, 2), 0xff);
    std::vector<uint8_t> values(kv_value_block_bytes(KvFormat::kBF16, dim, 2), 0xff);
    kv_store_key(isa, KvFormat::kBF16, keys.data(), dim, 2, 1, row.data());
    kv_store_value(isa, KvFormat::kBF16, values.data(), dim, 2, 1, row.data());
    for (int64_t e = 0; e < dim; ++e) {
      const float k = kv_load_key(KvFormat::kBF16, keys.data(), dim, 2, 1, e);
      const float v = kv_load_value(KvFormat::kBF16, values.data(), dim, 2, 1, e);
      EXPECT_EQ(f32_to_bits(k), f32_to_bits(want[e])) << isa_name(isa) << " key " << e;
      EXPECT_EQ(f32_to_bits(v), f32_to_bits(want[e])) << isa_name(isa) << " value " << e;
    }
  }
}

TEST(KvFormat, BlockBytesHoldCodesAndScales) {
  EXPECT_EQ(kv_key_block_bytes(KvFormat::kF16, 64, 16), 2048);
  EXPECT_EQ(kv_value_block_bytes(KvFormat::kF32, 64, 16), 4096);
  EXPECT_EQ(kv_key_block_bytes(KvFormat::kInt8, 64, 16), 1024 + 64);
  EXPECT_EQ(kv_value_block_bytes(KvFormat::kInt8, 72, 16), 1152 + 32);  // one scale per row
  // int4 keys: codes, a fp16 master per slot, an int8 sub-scale per 16 elements and slot.
  EXPECT_EQ(kv_key_block_bytes(KvFormat::kInt4, 64, 16), 512 + 32 + 64);
  EXPECT_EQ(kv_key_block_bytes(KvFormat::kInt4, 256, 16), 2048 + 32 + 256);
  EXPECT_EQ(kv_key_block_bytes(KvFormat::kInt4, 32, 2), 32 + 4 + 4);
  // int4 values: codes, a fp16 scale per 64 elements (32 when the row is not whole 64s).
  EXPECT_EQ(kv_value_block_bytes(KvFormat::kInt4, 64, 16), 512 + 32);
  EXPECT_EQ(kv_value_block_bytes(KvFormat::kInt4, 256, 16), 2048 + 128);
  EXPECT_EQ(kv_value_block_bytes(KvFormat::kInt4, 96, 16), 768 + 96);
  EXPECT_TRUE(kv_format_check(KvFormat::kInt4, 64, 16).ok());
  EXPECT_FALSE(kv_format_check(KvFormat::kInt4, 48, 16).ok());
  EXPECT_FALSE(kv_format_check(KvFormat::kInt4, 64, 15).ok());
}

// H t in double, rounded to float: a row whose rotation gives back t to within the last bits.
std::vector<float> unrotated(const std::vector<double>& t) {
  std::vector<double> y = t;
  for (size_t b0 = 0; b0 < y.size(); b0 += 32) {
    for (size_t h = 1; h < 32; h *= 2)
      for (size_t i = b0; i < b0 + 32; i += 2 * h)
        for (size_t j = i; j < i + h; ++j) {
          const double a = y[j], b = y[j + h];
          y[j] = a + b;
          y[j + h] = a - b;
        }
  }
  std::vector<float> x(y.size());
  for (size_t i = 0; i < y.size(); ++i) x[i] = static_cast<float>(y[i] / std::sqrt(32.0));
  return x;
}

// Rows that exercise the stores' edge cases: Gaussian, with a large outlier, all zeros (signed
// zeros included), tiny (the key master near fp16's subnormals), huge (the master and scales
// clamped to fp16's range), near float's largest (every candidate's squared error overflows to
// inf, rotated sums stay finite), two elements of equal magnitude and opposite signs (the first
// wins), and rows whose rotated elements fall on the codebook's midpoints under a power-of-two
// value scale (level -127 first): which code each gets depends on the last bit of the rotation, so
// a store that rotates in another order of operations writes other codes.
std::vector<float> store_test_row(int kind, int64_t dim, std::mt19937& rng) {
  std::vector<float> x = testing::random_floats(dim, rng, 2.0f);
  if (kind == 6) {
    std::vector<double> t(dim);
    for (int64_t e = 0; e < dim; ++e)
      t[e] = (e % 32 == 0 ? -127.0 : kv_int4::kMidpoints[rng() % 15]) / 64.0;
    return unrotated(t);
  }
  switch (kind) {
    case 1:
      x[rng() % dim] = 90.0f;
      break;
    case 2:
      for (int64_t e = 0; e < dim; ++e) x[e] = (e % 3 == 0) ? -0.0f : 0.0f;
      break;
    case 3:
      for (float& v : x) v *= 1e-7f;
      break;
    case 4:
      for (float& v : x) v *= 1e5f;
      x[0] = 3e8f;
      break;
    case 5:
      for (int64_t e = 0; e < dim; ++e) x[e] = (e % 2 ? 1.0f : -1.0f) * ((e % 5) + 1.0f);
      break;
    case 7:
      for (float& v : x) v *= 1e36f;
      break;
    default:
      break;
  }
  return x;
}

// Every ISA's int4, f16 and bf16 store writes the scalar reference's bytes: whole blocks compared
// after every slot was written in a shuffled order over the same random bytes (neighbouring
// nibbles kept).
TEST(KvStore, EveryIsaWritesTheScalarBytes) {
  std::mt19937 rng(21);
  for (KvFormat f : {KvFormat::kInt4, KvFormat::kF16, KvFormat::kBF16})
    for (int64_t dim : {int64_t{32}, int64_t{64}, int64_t{96}, int64_t{128}, int64_t{256}}) {
      for (int64_t page_size : {int64_t{2}, int64_t{16}}) {
        std::vector<std::vector<float>> rows;
        for (int64_t j = 0; j < page_size; ++j)
          rows.push_back(store_test_row(static_cast<int>(j % 8), dim, rng));
        std::vector<int64_t> order(page_size);
        std::iota(order.begin(), order.end(), 0);
        std::shuffle(order.begin(), order.end(), rng);
        std::vector<uint8_t> garbage(kv_key_block_bytes(f, dim, page_size) +
                                     kv_value_block_bytes(f, dim, page_size));
        for (uint8_t& b : garbage) b = static_cast<uint8_t>(rng());
        auto store = [&](Isa isa) {
          std::vector<uint8_t> keys(garbage.begin(),
                                    garbage.begin() + kv_key_block_bytes(f, dim, page_size));
          std::vector<uint8_t> values(garbage.begin() + keys.size(), garbage.end());
          for (int64_t j : order) {
            kv_store_key(isa, f, keys.data(), dim, page_size, j, rows[j].data());
            kv_store_value(isa, f, values.data(), dim, page_size, j, rows[j].data());
          }
          return std::pair(keys, values);
        };
        const auto want = store(Isa::kScalar);
        for (Isa isa : testing::isas_under_test()) {
          const auto got = store(isa);
          EXPECT_EQ(got.first, want.first)
              << testing::isa_label(isa) << " format " << static_cast<int>(f) << " keys dim " << dim
              << " page " << page_size;
          EXPECT_EQ(got.second, want.second)
              << testing::isa_label(isa) << " format " << static_cast<int>(f) << " values dim "
              << dim << " page " << page_size;
        }
      }
    }
}

}  // namespace
}  // namespace drift::kernels
