#include "kernels/quantize.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/dequantize.h"

namespace drift::kernels {
namespace {

using testing::isa_label;
using testing::isas_under_test;
using testing::kU;

// Rows exercising every path: random magnitudes per block, zeros, exact .5 ties (amax 127 gives
// d = 1 and id = 1), several elements sharing the largest magnitude with opposite signs.
std::vector<float> tricky_rows(int64_t k, std::mt19937& rng) {
  std::vector<float> x = testing::random_floats(k, rng);
  std::uniform_real_distribution<float> scale(-10.0f, 6.0f);
  for (int64_t b = 0; b < k / 32; ++b) {
    const float s = std::exp2(scale(rng));
    for (int64_t j = 0; j < 32; ++j) x[b * 32 + j] *= s;
  }
  for (int j = 0; j < 32; ++j) x[j] = 0.0f;
  if (k >= 64)
    for (int j = 0; j < 32; ++j) x[32 + j] = j == 0 ? 127.0f : (j % 2 ? 0.5f : -0.5f) + (j - 16);
  if (k >= 512) {
    x[300] = -1000.0f;  // super-block 1: the first largest magnitude is negative...
    x[301] = 1000.0f;   // ... and a positive one of the same magnitude follows
    x[400] = 0.0f;
  }
  return x;
}

TEST(Quantize, SimdBlocksEqualScalarReference) {
  std::mt19937 rng(3);
  for (int64_t k : {256, 512, 2048}) {
    for (int rep = 0; rep < 4; ++rep) {
      const std::vector<float> x = tricky_rows(k, rng);
      std::vector<BlockQ8_0> q0_ref(k / 32);
      std::vector<BlockQ8_1> q1_ref(k / 32);
      std::vector<BlockQ8_K> qk_ref(k / 256);
      quantize_row_q8_0_ref(x.data(), q0_ref.data(), k);
      quantize_row_q8_1_ref(x.data(), q1_ref.data(), k);
      quantize_row_q8_K_ref(x.data(), qk_ref.data(), k);
      for (Isa isa : isas_under_test()) {
        std::vector<BlockQ8_0> q0(k / 32);
        std::vector<BlockQ8_1> q1(k / 32);
        std::vector<BlockQ8_K> qk(k / 256);
        quantize_row_q8_0(isa, x.data(), q0.data(), k);
        quantize_row_q8_1(isa, x.data(), q1.data(), k);
        quantize_row_q8_K(isa, x.data(), qk.data(), k);
        EXPECT_EQ(0, std::memcmp(q0.data(), q0_ref.data(), q0.size() * sizeof q0[0]))
            << isa_label(isa) << " k=" << k;
        EXPECT_EQ(0, std::memcmp(q1.data(), q1_ref.data(), q1.size() * sizeof q1[0]))
            << isa_label(isa) << " k=" << k;
        EXPECT_EQ(0, std::memcmp(qk.data(), qk_ref.data(), qk.size() * sizeof qk[0]))
            << isa_label(isa) << " k=" << k;
      }
    }
  }
}

// The references against exact arithmetic. d is amax/127 (two roundings to get id = 1/d, one for
// x * id), so |q - x/d| <= 1/2 + 127 * 3u; stored as fp16, d_h = d (1 + e), |e| <= 2^-11, and
// |q d_h - x| <= d (1/2 + 127 * 3u) + 127 |d_h - d|.
TEST(Quantize, Q8_0AndQ8_1ReferencesReconstructWithinHalfAStep) {
  std::mt19937 rng(4);
  const int64_t k = 1024;
  const std::vector<float> x = tricky_rows(k, rng);
  std::vector<BlockQ8_0> q0(k / 32);
  std::vector<BlockQ8_1> q1(k / 32);
  quantize_row_q8_0_ref(x.data(), q0.data(), k);
  quantize_row_q8_1_ref(x.data(), q1.data(), k);
  for (int64_t b = 0; b < k / 32; ++b) {
    double amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(double{x[b * 32 + j]}));
    const double d = amax / 127.0;
    const double dh = fp16_to_f32(q0[b].d);
    EXPECT_EQ(q0[b].d, q1[b].d);
    EXPECT_LE(std::fabs(dh - d), d * std::ldexp(1.0, -11));
    int sum = 0;
    for (int j = 0; j < 32; ++j) {
      EXPECT_EQ(q0[b].qs[j], q1[b].qs[j]);
      EXPECT_LE(std::abs(int{q0[b].qs[j]}), 127);
      const double err = std::fabs(q0[b].qs[j] * dh - x[b * 32 + j]);
      EXPECT_LE(err, d * (0.5 + 127 * 3 * kU) + 127 * std::fabs(dh - d)) << b << " " << j;
      sum += q1[b].qs[j];
    }
    // s = fp16(sum(q) * d) with the fp32 d = amax / 127.
    EXPECT_EQ(q1[b].s, f32_to_fp16(static_cast<float>(sum) * (static_cast<float>(amax) / 127.0f)));
  }
  // Ties go away from zero (roundf), as llama.cpp's reference and the gguf package do.
  // Block 1 is {127, then (j odd ? 0.5 : -0.5) + j - 16}: d = 1, id = 1, every value a tie.
  EXPECT_EQ(q0[1].qs[1], -15);  // -14.5
  EXPECT_EQ(q0[1].qs[3], -13);  // -12.5
  EXPECT_EQ(q0[1].qs[16], -1);  // -0.5
  EXPECT_EQ(q0[1].qs[17], 2);   // 1.5
  EXPECT_EQ(q0[1].qs[18], 2);   // 1.5
  EXPECT_EQ(q0[1].qs[20], 4);   // 3.5
}

// Q8_K: iscale = -127/max; d = 1/iscale; |q - x/d| <= 1/2 + 127 * 3u; bsums are exact sums.
TEST(Quantize, Q8_KReferenceReconstructsAndSumsGroups) {
  std::mt19937 rng(5);
  const int64_t k = 1024;
  const std::vector<float> x = tricky_rows(k, rng);
  std::vector<BlockQ8_K> q(k / 256);
  quantize_row_q8_K_ref(x.data(), q.data(), k);
  for (int64_t b = 0; b < k / 256; ++b) {
    for (int g = 0; g < 16; ++g) {
      int sum = 0;
      for (int j = 0; j < 16; ++j) sum += q[b].qs[16 * g + j];
      EXPECT_EQ(q[b].bsums[g], sum);
    }
    const double d = q[b].d;
    for (int j = 0; j < 256; ++j) {
      EXPECT_LE(std::abs(int{q[b].qs[j]}), 127);
      const double err = std::fabs(q[b].qs[j] * d - x[b * 256 + j]);
      EXPECT_LE(err, std::fabs(d) * (0.5 + 127 * 4 * kU)) << b << " " << j;
    }
  }
  // Super-block 1's first largest element is -1000 (then +1000): max = -1000, iscale = 127/1000,
  // d > 0. Had the later +1000 been taken, d would be negative and the signs of q flipped.
  EXPECT_GT(q[1].d, 0.0f);
  EXPECT_EQ(q[1].qs[300 - 256], -127);
  EXPECT_EQ(q[1].qs[301 - 256], 127);
}

// quantize_activations routes each weight format to its activation format's converter, row by
// row with the given strides, on every ISA.
TEST(Quantize, ActivationsFollowTheWeightFormat) {
  std::mt19937 rng(6);
  const int64_t k = 512, n = 3, stride = 600;
  const std::vector<float> x = testing::random_floats(n * stride, rng);
  for (Format wf : kWeightFormats) {
    const Format af = format_info(wf).activation;
    const int64_t row = activation_row_bytes(wf, k);
    ASSERT_EQ(row, row_bytes(af, k));
    for (Isa isa : isas_under_test()) {
      const int64_t out_stride = row + 4;
      std::vector<uint8_t> out(static_cast<size_t>(n * out_stride), 0xAB);
      quantize_activations(isa, wf, x.data(), stride, n, k, out.data(), out_stride);
      for (int64_t r = 0; r < n; ++r) {
        std::vector<uint8_t> expect(static_cast<size_t>(row));
        const float* xr = x.data() + r * stride;
        switch (af) {
          case Format::kF32:
            std::memcpy(expect.data(), xr, static_cast<size_t>(row));
            break;
          case Format::kF16:
          case Format::kBF16:
            for (int64_t i = 0; i < k; ++i) {
              const uint16_t h = af == Format::kF16 ? f32_to_fp16(xr[i]) : f32_to_bf16(xr[i]);
              std::memcpy(expect.data() + 2 * i, &h, 2);
            }
            break;
          case Format::kQ8_0:
            quantize_row_q8_0_ref(xr, reinterpret_cast<BlockQ8_0*>(expect.data()), k);
            break;
          case Format::kQ8_1:
            quantize_row_q8_1_ref(xr, reinterpret_cast<BlockQ8_1*>(expect.data()), k);
            break;
          case Format::kQ8_K:
            quantize_row_q8_K_ref(xr, reinterpret_cast<BlockQ8_K*>(expect.data()), k);
            break;
          default:
            FAIL() << "unexpected activation format";
        }
        EXPECT_EQ(0, std::memcmp(out.data() + r * out_stride, expect.data(), expect.size()))
            << format_info(wf).name << " " << isa_label(isa) << " row " << r;
        for (int i = 0; i < 4; ++i) EXPECT_EQ(out[r * out_stride + row + i], 0xAB);  // untouched
      }
    }
  }
}

}  // namespace
}  // namespace drift::kernels
