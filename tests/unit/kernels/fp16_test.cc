#include "kernels/fp16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernel_test_util.h"

namespace drift::kernels {
namespace {

using testing::bits;
using testing::isa_label;
using testing::isas_under_test;

// The round-to-nearest-even fp16 of x, by brute force over the neighbouring halves (in double,
// where every half is exact).
uint16_t nearest_fp16(float x) {
  if (std::isnan(x)) return 0;  // not used for NaN
  const double v = x;
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const double a = std::fabs(v);
  if (a >= 65520.0) return sign | 0x7c00;
  // Largest finite half <= a (halves are ordered like their bit patterns), then the nearer of it
  // and the next one, ties to the even pattern.
  uint32_t lo = 0, hi = 0x7bff;
  while (lo < hi) {
    const uint32_t mid = (lo + hi + 1) / 2;
    if (fp16_to_f32(static_cast<uint16_t>(mid)) <= a)
      lo = mid;
    else
      hi = mid - 1;
  }
  const double below = fp16_to_f32(static_cast<uint16_t>(lo));
  const double above = fp16_to_f32(static_cast<uint16_t>(lo + 1));  // lo + 1 = 0x7c00 is inf
  uint16_t best = static_cast<uint16_t>(lo);
  if (a - below > above - a || (a - below == above - a && (lo & 1) != 0))
    best = static_cast<uint16_t>(lo + 1);
  return sign | best;
}

TEST(Fp16, ScalarEncodeIsNearestEven) {
  std::mt19937 rng(1);
  std::vector<float> xs = {0.0f,
                           -0.0f,
                           1.0f,
                           65504.0f,
                           65519.99f,
                           65520.0f,
                           1e-8f,
                           2.98e-8f,
                           2.9802322e-8f /* 2^-25: a tie to 0 */,
                           5.96e-8f,
                           6.1e-5f,
                           6.103e-5f,
                           1.00048828125f /* tie: 1 + 2^-11 */,
                           1.00146484375f /* tie, odd */};
  std::uniform_int_distribution<uint32_t> any;
  for (int i = 0; i < 2000; ++i) {
    // Random magnitudes across the fp16 range, including subnormals.
    const float f = bits_to_f32((any(rng) & 0x80000000u) | (0x32000000u + any(rng) % 0x16000000u));
    xs.push_back(f);
  }
  for (float x : xs) EXPECT_EQ(f32_to_fp16(x), nearest_fp16(x)) << x;
}

TEST(Fp16, DecodeEncodeRoundTripsEveryHalf) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = fp16_to_f32(static_cast<uint16_t>(h));
    const bool nan = ((h >> 10) & 0x1f) == 0x1f && (h & 0x3ff) != 0;
    // NaNs come back quieted (bit 9 set), with their payload.
    EXPECT_EQ(f32_to_fp16(f), nan ? (h | 0x200) : h) << h;
  }
}

// F16C and the scalar definitions agree on random bit patterns (all classes: NaN, inf,
// subnormal, overflow) and on the exact tie points.
TEST(Fp16, RowConvertersAgreeWithScalarOnEveryIsa) {
  std::mt19937 rng(2);
  std::vector<float> x(4099);
  for (float& f : x) f = bits_to_f32(static_cast<uint32_t>(rng()));
  for (size_t i = 0; i < 512; ++i)
    x[i] = bits_to_f32(0x38000000u + (static_cast<uint32_t>(i) << 12));
  std::vector<uint16_t> h_ref(x.size()), b_ref(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    h_ref[i] = f32_to_fp16(x[i]);
    b_ref[i] = f32_to_bf16(x[i]);
  }
  std::vector<uint16_t> halves(65536);
  for (uint32_t i = 0; i < 65536; ++i) halves[i] = static_cast<uint16_t>(i);
  for (Isa isa : isas_under_test()) {
    std::vector<uint16_t> h(x.size()), b(x.size());
    convert_f32_to_fp16(isa, x.data(), h.data(), static_cast<int64_t>(x.size()));
    convert_f32_to_bf16(isa, x.data(), b.data(), static_cast<int64_t>(x.size()));
    EXPECT_EQ(h, h_ref) << isa_label(isa);
    EXPECT_EQ(b, b_ref) << isa_label(isa);
    std::vector<float> back(65536);
    convert_bf16_to_f32(isa, halves.data(), back.data(), 65536);
    for (uint32_t i = 0; i < 65536; ++i) ASSERT_EQ(bits(back[i]), i << 16) << isa_label(isa);
  }
}

TEST(Bf16, EncodeRoundsToNearestEvenAndQuietsNan) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(f32_to_bf16(bits_to_f32(0x3f808000u)), 0x3f80);  // tie, even stays
  EXPECT_EQ(f32_to_bf16(bits_to_f32(0x3f818000u)), 0x3f82);  // tie, odd rounds up
  EXPECT_EQ(f32_to_bf16(bits_to_f32(0x3f808001u)), 0x3f81);
  EXPECT_EQ(f32_to_bf16(bits_to_f32(0x7f800001u)), 0x7fc0);  // signalling NaN -> quiet
  EXPECT_EQ(f32_to_bf16(bits_to_f32(0x00000001u)), 0x0000);  // subnormals are rounded, not flushed
  EXPECT_EQ(f32_to_bf16(bits_to_f32(0x00008000u)), 0x0000);
  EXPECT_EQ(f32_to_bf16(bits_to_f32(0x00018000u)), 0x0002);
  EXPECT_EQ(f32_to_bf16(bits_to_f32(0x7f7fffffu)), 0x7f80);  // FLT_MAX rounds to inf
}

}  // namespace
}  // namespace drift::kernels
