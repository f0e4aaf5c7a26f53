// RMSNorm, RoPE, softmax, SiLU, GELU, elementwise and attention pieces: every ISA bitwise equal to
// the scalar reference, and the reference within a derived bound of double-precision math.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/activation.h"
#include "kernels/elementwise.h"
#include "kernels/exp_approx.h"
#include "kernels/norm.h"
#include "kernels/rope.h"
#include "kernels/softmax.h"

namespace drift::kernels {
namespace {

using testing::bits;
using testing::gamma_n;
using testing::isa_label;
using testing::isas_under_test;
using testing::kU;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

// Bitwise equality of two float vectors (NaNs included), with the first mismatch reported.
::testing::AssertionResult same_bits(const std::vector<float>& got,
                                     const std::vector<float>& want) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << "size differs";
  for (size_t i = 0; i < got.size(); ++i)
    if (bits(got[i]) != bits(want[i]))
      return ::testing::AssertionFailure()
             << "element " << i << ": " << got[i] << " vs " << want[i];
  return ::testing::AssertionSuccess();
}

const std::vector<int64_t> kLengths = {1, 7, 8, 9, 15, 16, 17, 33, 576, 640, 1001};

// ---- exp

// Relative error of exp_approx where the result is a normal float: the Cody-Waite reduction is
// exact up to one rounding of each of its two fmas (relative to |r| <= 0.35), the minimax
// polynomial is within ~1 u of e^r, its Horner steps near 1 add one rounding each for the last
// two steps (fma with + r, + 1) and the scaling one more: < 4 u in total.
TEST(ExpApprox, WithinFourUlpOfExp) {
  double worst = 0;
  for (float x = -87.0f; x < 88.5f; x += 0.000731f) {
    const double want = std::exp(double{x});
    const double rel = std::fabs(exp_approx(x) - want) / want;
    worst = std::max(worst, rel);
  }
  EXPECT_LT(worst, 4 * kU) << "worst relative error " << worst / kU << " u";
  EXPECT_EQ(exp_approx(0.0f), 1.0f);
  EXPECT_EQ(exp_approx(-kInf), 0.0f);
  EXPECT_EQ(exp_approx(kInf), kInf);
  EXPECT_EQ(exp_approx(-200.0f), 0.0f);
  EXPECT_EQ(exp_approx(100.0f), kInf);
  EXPECT_TRUE(std::isnan(exp_approx(kNan)));
  // Subnormal results: within one subnormal step plus 4 u.
  for (float x = -103.9f; x < -87.4f; x += 0.01f) {
    const double want = std::exp(double{x});
    EXPECT_LE(std::fabs(exp_approx(x) - want), 0x1p-149 + 4 * kU * want) << x;
  }
}

// ---- RMSNorm

TEST(RmsNorm, EveryIsaEqualsScalarBitwise) {
  std::mt19937 rng(21);
  for (int64_t n : kLengths) {
    const std::vector<float> x = testing::random_floats(n, rng, 3.0f);
    const std::vector<float> w = testing::random_floats(n, rng);
    for (const float* wp : {w.data(), static_cast<const float*>(nullptr)}) {
      std::vector<float> ref(n);
      rms_norm(Isa::kScalar, x.data(), wp, ref.data(), n, 1e-6f);
      for (Isa isa : isas_under_test()) {
        std::vector<float> y(n);
        rms_norm(isa, x.data(), wp, y.data(), n, 1e-6f);
        EXPECT_TRUE(same_bits(y, ref)) << isa_label(isa) << " n=" << n;
        std::vector<float> in_place = x;
        rms_norm(isa, in_place.data(), wp, in_place.data(), n, 1e-6f);
        EXPECT_TRUE(same_bits(in_place, ref)) << isa_label(isa) << " in place, n=" << n;
      }
    }
  }
}

// Relative error of y: the squares (u) and the double sum (n 2^-53) give the sum, the cast to
// float (u) and + eps (u) the sqrt argument, whose error sqrtf halves and rounds (u); 1/s (u),
// x * scale (u), * w (u): 5.5 u + n 2^-54 in total.
TEST(RmsNorm, ScalarWithinDerivedBoundOfDouble) {
  std::mt19937 rng(22);
  for (int64_t n : kLengths) {
    const std::vector<float> x = testing::random_floats(n, rng, 3.0f);
    const std::vector<float> w = testing::random_floats(n, rng);
    const float eps = 1e-5f;
    std::vector<float> y(n);
    rms_norm(Isa::kScalar, x.data(), w.data(), y.data(), n, eps);
    double sum = 0;
    for (float v : x) sum += double{v} * v;
    const double scale = 1.0 / std::sqrt(sum / n + eps);
    for (int64_t i = 0; i < n; ++i) {
      const double want = x[i] * scale * w[i];
      EXPECT_LE(std::fabs(y[i] - want), (gamma_n(6) + n * 0x1p-53) * std::fabs(want)) << n;
    }
  }
}

// ---- Softmax

TEST(Softmax, EveryIsaEqualsScalarBitwise) {
  std::mt19937 rng(23);
  for (int64_t n : kLengths) {
    std::vector<float> x = testing::random_floats(n, rng, 4.0f);
    if (n > 3) x[2] = -kInf;  // a masked position
    std::vector<float> ref(n);
    softmax(Isa::kScalar, x.data(), ref.data(), n);
    for (Isa isa : isas_under_test()) {
      std::vector<float> y(n);
      softmax(isa, x.data(), y.data(), n);
      EXPECT_TRUE(same_bits(y, ref)) << isa_label(isa) << " n=" << n;
    }
  }
  for (Isa isa : isas_under_test()) {
    std::vector<float> masked(20, -kInf), y(20, 1.0f);
    softmax(isa, masked.data(), y.data(), 20);
    for (float v : y) EXPECT_EQ(v, 0.0f) << isa_label(isa);
  }
}

// y_i = e_i / S. x_i - m rounds (relative u of |x_i - m|, i.e. an absolute error |x_i - m| u in
// the exponent), exp_approx adds < 4 u, the double sum is exact to n 2^-53 of its terms, which
// carry the same per-term errors (bounded by the largest), the cast of 1/S one u and the product
// one u.
TEST(Softmax, ScalarWithinDerivedBoundOfDouble) {
  std::mt19937 rng(24);
  for (int64_t n : kLengths) {
    const std::vector<float> x = testing::random_floats(n, rng, 4.0f);
    std::vector<float> y(n);
    softmax(Isa::kScalar, x.data(), y.data(), n);
    double m = -INFINITY;
    for (float v : x) m = std::max(m, double{v});
    double sum = 0, spread = 0;
    for (float v : x) {
      sum += std::exp(v - m);
      spread = std::max(spread, m - v);
    }
    for (int64_t i = 0; i < n; ++i) {
      const double want = std::exp(x[i] - m) / sum;
      const double rel = (m - x[i]) * kU + 4 * kU + spread * kU + 4 * kU + n * 0x1p-53 + 2 * kU;
      EXPECT_LE(std::fabs(y[i] - want), rel * 1.001 * want) << "n=" << n << " i=" << i;
    }
  }
}

// ---- SiLU and GELU

std::vector<float> activation_inputs(std::mt19937& rng) {
  std::vector<float> x = testing::random_floats(1003, rng, 6.0f);
  const float specials[] = {0.0f,   -0.0f,  kInf,  -kInf,  kNan,  1e-30f, -1e-30f, 9.99f,  10.0f,
                            -10.0f, -9.99f, 87.0f, -87.0f, 89.0f, -89.0f, 200.0f,  -200.0f};
  for (size_t i = 0; i < std::size(specials); ++i) x[7 * i] = specials[i];
  return x;
}

TEST(Activations, EveryIsaEqualsScalarBitwise) {
  std::mt19937 rng(25);
  std::vector<float> x = activation_inputs(rng);
  // Every fp16 value too, for the GELU table.
  for (uint32_t h = 0; h < 65536; ++h) x.push_back(fp16_to_f32(static_cast<uint16_t>(h)));
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<float> silu_ref(n), gelu_ref(n);
  silu(Isa::kScalar, x.data(), silu_ref.data(), n);
  gelu(Isa::kScalar, x.data(), gelu_ref.data(), n);
  for (Isa isa : isas_under_test()) {
    std::vector<float> y(n);
    silu(isa, x.data(), y.data(), n);
    EXPECT_TRUE(same_bits(y, silu_ref)) << "silu " << isa_label(isa);
    gelu(isa, x.data(), y.data(), n);
    EXPECT_TRUE(same_bits(y, gelu_ref)) << "gelu " << isa_label(isa);
  }
}

// gpt-oss's clamped SwiGLU: gates and ups across and beyond the clamp (limit 7), the specials
// included (a NaN stays NaN, +-inf clamp), every ISA bitwise the scalar reference.
TEST(Activations, SwigluOaiEveryIsaEqualsScalarBitwise) {
  std::mt19937 rng(28);
  const std::vector<float> g = activation_inputs(rng);
  std::vector<float> u = activation_inputs(rng);
  std::rotate(u.begin(), u.begin() + 3, u.end());  // other specials meet each gate
  const int64_t n = static_cast<int64_t>(g.size());
  std::vector<float> ref(n);
  swiglu_oai(Isa::kScalar, g.data(), u.data(), ref.data(), n, 1.702f, 7.0f);
  for (Isa isa : isas_under_test()) {
    std::vector<float> y(n);
    swiglu_oai(isa, g.data(), u.data(), y.data(), n, 1.702f, 7.0f);
    EXPECT_TRUE(same_bits(y, ref)) << "swiglu_oai " << isa_label(isa);
  }
}

// Against double with alpha as the kernel holds it (fp32 1.702, as ggml passes it): x sigma(alpha
// x) (y + 1), x and y clamped exactly. The sigmoid part is silu's 6 u, plus the rounding of alpha
// x, which moves E by |alpha x| u relative (E / (1 + E) <= 1 carries it to the result); the +1 and
// the product round once each.
TEST(Activations, SwigluOaiWithinDerivedBoundOfDouble) {
  std::mt19937 rng(29);
  const std::vector<float> g = testing::random_floats(5000, rng, 6.0f);
  const std::vector<float> u = testing::random_floats(5000, rng, 6.0f);
  std::vector<float> y(g.size());
  swiglu_oai(Isa::kScalar, g.data(), u.data(), y.data(), static_cast<int64_t>(g.size()), 1.702f,
             7.0f);
  const double alpha = 1.702f;
  int clamped = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    const double x = std::min<double>(g[i], 7.0);
    const double v = std::clamp<double>(u[i], -7.0, 7.0);
    clamped += g[i] > 7.0f || std::fabs(u[i]) > 7.0f;
    const double silu = x / (1.0 + std::exp(-alpha * x));
    const double want = silu * (v + 1.0);
    const int64_t roundings = 8 + static_cast<int64_t>(std::ceil(std::fabs(alpha * x)));
    EXPECT_LE(std::fabs(y[i] - want), gamma_n(roundings) * std::fabs(silu) * (std::fabs(v) + 1.0))
        << g[i] << " " << u[i];
  }
  EXPECT_GT(clamped, 100);  // the clamps were exercised
}

// silu = x / (1 + E): E's relative error (< 4 u) reaches the result scaled by E / (1 + E) <= 1;
// the add and the divide round once each: 6 u.
TEST(Activations, SiluWithinDerivedBoundOfDouble) {
  std::mt19937 rng(26);
  const std::vector<float> x = testing::random_floats(5000, rng, 8.0f);
  std::vector<float> y(x.size());
  silu(Isa::kScalar, x.data(), y.data(), static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    const double want = x[i] / (1.0 + std::exp(-double{x[i]}));
    EXPECT_LE(std::fabs(y[i] - want), gamma_n(6) * std::fabs(want)) << x[i];
  }
}

// GELU through the fp16 table: the input rounds to fp16 (|dx| <= 2^-11 |x|, or 2^-25 when
// subnormal) and GELU's slope is below 1.13; the table value rounds to fp16 (2^-11 |g|, or
// 2^-25); the fp32 formula with tanhf is within a few u of |x| + |g|. Beyond +-10 the clamps are
// exact to 1e-5.
TEST(Activations, GeluWithinDerivedBoundOfDouble) {
  std::mt19937 rng(27);
  const std::vector<float> x = testing::random_floats(5000, rng, 4.0f);
  std::vector<float> y(x.size());
  gelu(Isa::kScalar, x.data(), y.data(), static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    const double v = x[i];
    const double want = 0.5 * v * (1 + std::tanh(0.7978845608028654 * v * (1 + 0.044715 * v * v)));
    const double bound = 1.13 * (0x1p-11 * std::fabs(v) + 0x1p-25) +
                         (0x1p-11 * std::fabs(want) + 0x1p-25) + 8 * kU * (std::fabs(v) + 1) +
                         (std::fabs(v) >= 10 ? 1e-5 : 0);
    EXPECT_LE(std::fabs(y[i] - want), bound) << v;
  }
}

// ---- Elementwise

TEST(Elementwise, EveryIsaIsOneRoundingPerElement) {
  std::mt19937 rng(28);
  for (int64_t n : kLengths) {
    const std::vector<float> a = testing::random_floats(n, rng), b = testing::random_floats(n, rng);
    std::vector<float> sum(n), prod(n), scaled(n);
    for (int64_t i = 0; i < n; ++i) {
      sum[i] = a[i] + b[i];
      prod[i] = a[i] * b[i];
      scaled[i] = a[i] * 0.37f;
    }
    for (Isa isa : isas_under_test()) {
      std::vector<float> y(n);
      add(isa, a.data(), b.data(), y.data(), n);
      EXPECT_TRUE(same_bits(y, sum)) << isa_label(isa);
      mul(isa, a.data(), b.data(), y.data(), n);
      EXPECT_TRUE(same_bits(y, prod)) << isa_label(isa);
      scale(isa, a.data(), 0.37f, y.data(), n);
      EXPECT_TRUE(same_bits(y, scaled)) << isa_label(isa);
    }
  }
}

// ---- RoPE

TEST(Rope, EveryIsaEqualsScalarBitwiseAndLeavesTheRestAlone) {
  std::mt19937 rng(31);
  for (RopeLayout layout : {RopeLayout::kRopeNormal, RopeLayout::kRopeNeox}) {
    for (int64_t n_dims : {2, 6, 8, 16, 18, 64, 128}) {
      const int64_t head_dim = n_dims + 6, stride = head_dim + 3, n_heads = 3;
      RopeParams params;
      params.n_dims = n_dims;
      std::vector<float> cache(n_dims);
      rope_cache(params, 1234, cache.data());
      const std::vector<float> x = testing::random_floats(n_heads * stride, rng);
      std::vector<float> ref = x;
      rope_apply(Isa::kScalar, layout, cache.data(), n_dims, ref.data(), n_heads, stride);
      for (int64_t h = 0; h < n_heads; ++h)
        for (int64_t i = n_dims; i < stride; ++i)
          ASSERT_EQ(ref[h * stride + i], x[h * stride + i]) << "touched dimension " << i;
      for (Isa isa : isas_under_test()) {
        std::vector<float> y = x;
        rope_apply(isa, layout, cache.data(), n_dims, y.data(), n_heads, stride);
        EXPECT_TRUE(same_bits(y, ref)) << isa_label(isa) << " n_dims=" << n_dims;
      }
    }
  }
}

// The pairs: NORMAL rotates (2i, 2i+1), NEOX (i, i + n_dims/2), each by the angle of pair i; a
// rotated pair is x0 c - x1 s, x0 s + x1 c with two products and a sum rounding: gamma_2 of
// |x0 c| + |x1 s|.
TEST(Rope, LayoutsRotateTheRightPairs) {
  std::mt19937 rng(32);
  const int64_t n_dims = 8;
  RopeParams params;
  params.n_dims = n_dims;
  std::vector<float> cache(n_dims);
  rope_cache(params, 7, cache.data());
  const std::vector<float> x = testing::random_floats(n_dims, rng);
  for (RopeLayout layout : {RopeLayout::kRopeNormal, RopeLayout::kRopeNeox}) {
    std::vector<float> y = x;
    rope_apply(Isa::kScalar, layout, cache.data(), n_dims, y.data(), 1, n_dims);
    for (int64_t i = 0; i < n_dims / 2; ++i) {
      const int64_t a = layout == RopeLayout::kRopeNormal ? 2 * i : i;
      const int64_t b = layout == RopeLayout::kRopeNormal ? 2 * i + 1 : i + n_dims / 2;
      const double c = cache[2 * i], s = cache[2 * i + 1];
      const double mag = std::fabs(x[a] * c) + std::fabs(x[b] * s);
      EXPECT_NEAR(y[a], x[a] * c - x[b] * s, gamma_n(2) * mag);
      EXPECT_NEAR(y[b], x[a] * s + x[b] * c, gamma_n(2) * mag);
    }
  }
}

// theta_i = p * base^(-2i/n) is built by i multiplications with theta_scale = powf(...) (glibc's
// powf is correctly rounded here: u), each adding its rounding (u) and carrying theta_scale's
// error: |d theta| <= (2i + 1) u theta; freq_scale * (theta / ff) adds 2 u. cosf/sinf are within
// one ulp (<= 2^-24 absolute for results <= 1), and |d cos| <= |d theta|.
TEST(Rope, CacheWithinDerivedBoundOfDouble) {
  for (float base : {10000.0f, 1000000.0f}) {
    for (int64_t n_dims : {64, 128}) {
      for (int64_t pos : {0, 1, 17, 1000, 32767}) {
        RopeParams params;
        params.n_dims = n_dims;
        params.freq_base = base;
        params.freq_scale = 0.5f;
        std::vector<float> cache(n_dims);
        rope_cache(params, pos, cache.data());
        for (int64_t i = 0; i < n_dims / 2; ++i) {
          const double theta = 0.5 * pos * std::pow(double{base}, -2.0 * i / n_dims);
          const double dtheta = (2 * i + 3) * kU * theta;
          EXPECT_NEAR(cache[2 * i], std::cos(theta), dtheta + 2 * kU) << pos << " " << i;
          EXPECT_NEAR(cache[2 * i + 1], std::sin(theta), dtheta + 2 * kU) << pos << " " << i;
        }
      }
    }
  }
}

}  // namespace
}  // namespace drift::kernels
