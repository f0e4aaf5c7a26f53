// Matmul kernels: every ISA bitwise equal to the scalar reference, outputs independent of batch
// composition and row split, and the reference within a derived bound of exact arithmetic.
#include "kernels/matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/dequantize.h"
#include "kernels/quantize.h"

namespace drift::kernels {
namespace {

using testing::bits;
using testing::gamma_n;
using testing::isa_label;
using testing::isas_under_test;

// A weight matrix [n_rows][k] and n_tokens activation rows already in the activation format.
struct Problem {
  Format format;
  int64_t n_rows, k, n_tokens;
  std::vector<uint8_t> w;  // [n_rows][w_row_bytes]
  int64_t w_row_bytes;
  std::vector<uint8_t> x;  // [n_tokens][x_row_bytes]
  int64_t x_row_bytes;
};

Problem make_problem(Format f, int64_t n_rows, int64_t k, int64_t n_tokens, uint32_t seed) {
  std::mt19937 rng(seed);
  Problem p{f, n_rows, k, n_tokens, {}, row_bytes(f, k), {}, activation_row_bytes(f, k)};
  p.w = testing::random_weight_rows(f, n_rows, k, rng);
  std::vector<float> xf = testing::random_floats(n_tokens * k, rng);
  // Vary the token magnitudes so that per-token scales differ a lot.
  for (int64_t t = 0; t < n_tokens; ++t)
    for (int64_t i = 0; i < k; ++i) xf[t * k + i] *= std::exp2(static_cast<float>(t % 7) - 3.0f);
  p.x.resize(static_cast<size_t>(n_tokens * p.x_row_bytes));
  quantize_activations(Isa::kScalar, f, xf.data(), k, n_tokens, k, p.x.data(), p.x_row_bytes);
  return p;
}

constexpr float kSentinel = -12345.0f;

// Y over rows [row_begin, row_end) for tokens [t0, t0 + n) of the problem, written into a
// [n_tokens][n_rows + 3] buffer pre-filled with a sentinel.
void run(const MatmulKernels& kernels, const Problem& p, int64_t t0, int64_t n, int64_t row_begin,
         int64_t row_end, std::vector<float>& y) {
  const int64_t stride = p.n_rows + 3;
  MatmulArgs args{p.w.data(),
                  p.w_row_bytes,
                  p.x.data() + t0 * p.x_row_bytes,
                  p.x_row_bytes,
                  y.data() + t0 * stride,
                  stride,
                  p.k,
                  n};
  kernels.matmul(p.format)(args, row_begin, row_end);
}

std::vector<float> fresh_output(const Problem& p) {
  return std::vector<float>(static_cast<size_t>(p.n_tokens * (p.n_rows + 3)), kSentinel);
}

std::vector<int64_t> test_ks(Format f) {
  const int64_t bs = format_info(f).block_size;
  if (bs == 1) return {1, 15, 16, 17, 40, 576};
  if (bs == 32) return {32, 96, 576, 640};  // 1, 3, 18, 20 blocks
  return {256, 768, 2048};                  // 1, 3, 8 super-blocks
}

std::string label(const Problem& p, Isa isa) {
  return std::string(format_info(p.format).name) + " " + isa_label(isa) +
         " k=" + std::to_string(p.k);
}

class MatmulFormat : public ::testing::TestWithParam<Format> {};

TEST_P(MatmulFormat, EveryIsaEqualsScalarBitwise) {
  const MatmulKernels& ref = matmul_kernels(Isa::kScalar);
  uint32_t seed = 10;
  for (int64_t k : test_ks(GetParam())) {
    const Problem p = make_problem(GetParam(), 5, k, 9, seed++);
    std::vector<float> y_ref = fresh_output(p);
    run(ref, p, 0, p.n_tokens, 0, p.n_rows, y_ref);
    for (Isa isa : isas_under_test()) {
      const MatmulKernels& kern = matmul_kernels(isa);
      // Several batch sizes, so that every tile width runs.
      for (int64_t n : {1, 2, 3, 4, 5, 9}) {
        std::vector<float> y = fresh_output(p);
        run(kern, p, 0, n, 0, p.n_rows, y);
        for (int64_t t = 0; t < n; ++t)
          for (int64_t r = 0; r < p.n_rows + 3; ++r) {
            const size_t i = static_cast<size_t>(t * (p.n_rows + 3) + r);
            ASSERT_EQ(bits(y[i]), bits(y_ref[i]))
                << label(p, isa) << " n_tokens=" << n << " t=" << t << " r=" << r << ": " << y[i]
                << " vs " << y_ref[i];
          }
      }
      // The single-row dot product gives the same values.
      for (int64_t t = 0; t < p.n_tokens; ++t)
        for (int64_t r = 0; r < p.n_rows; ++r) {
          const float d = kern.dot(p.format)(p.w.data() + r * p.w_row_bytes,
                                             p.x.data() + t * p.x_row_bytes, p.k);
          ASSERT_EQ(bits(d), bits(y_ref[t * (p.n_rows + 3) + r])) << label(p, isa);
        }
    }
  }
}

// The numerical contract: Y[t][r] is the same bits whatever the batch size, the token's position
// in the batch and the row split.
TEST_P(MatmulFormat, OutputIndependentOfBatchAndRowSplit) {
  const int64_t k = test_ks(GetParam())[2];
  const Problem p = make_problem(GetParam(), 37, k, 32, 99);
  for (Isa isa : isas_under_test()) {
    const MatmulKernels& kern = matmul_kernels(isa);
    std::vector<float> full = fresh_output(p);
    run(kern, p, 0, 32, 0, p.n_rows, full);

    std::vector<float> one_by_one = fresh_output(p);
    for (int64_t t = 0; t < 32; ++t) run(kern, p, t, 1, 0, p.n_rows, one_by_one);
    EXPECT_EQ(0, std::memcmp(full.data(), one_by_one.data(), full.size() * sizeof(float)))
        << label(p, isa) << ": batch 1 vs batch 32";

    // Windows of 7 tokens at offsets that put each token at different positions in the batch.
    for (int64_t t0 : {0, 5, 13, 25}) {
      std::vector<float> window = fresh_output(p);
      run(kern, p, t0, 7, 0, p.n_rows, window);
      const size_t stride = static_cast<size_t>(p.n_rows + 3);
      EXPECT_EQ(0, std::memcmp(full.data() + t0 * stride, window.data() + t0 * stride,
                               7 * stride * sizeof(float)))
          << label(p, isa) << ": batch 7 at " << t0;
    }

    // Row splits, including empty ranges, in an odd order.
    std::vector<float> split = fresh_output(p);
    const int64_t cuts[][2] = {{20, 37}, {0, 1}, {1, 1}, {8, 20}, {1, 8}, {37, 37}};
    for (const auto& c : cuts) run(kern, p, 0, 32, c[0], c[1], split);
    EXPECT_EQ(0, std::memcmp(full.data(), split.data(), full.size() * sizeof(float)))
        << label(p, isa) << ": row splits";

    for (int64_t t = 0; t < 32; ++t)
      for (int64_t r = p.n_rows; r < p.n_rows + 3; ++r)
        ASSERT_EQ(full[t * (p.n_rows + 3) + r], kSentinel) << "wrote outside the rows";
  }
}

TEST_P(MatmulFormat, EmptyRangesAndBatchesWriteNothing) {
  const Problem p = make_problem(GetParam(), 4, test_ks(GetParam())[0], 3, 5);
  for (Isa isa : isas_under_test()) {
    std::vector<float> y = fresh_output(p);
    run(matmul_kernels(isa), p, 0, 3, 2, 2, y);
    run(matmul_kernels(isa), p, 0, 0, 0, p.n_rows, y);
    for (float v : y) ASSERT_EQ(v, kSentinel) << label(p, isa);
  }
}

// ---- The scalar reference against exact arithmetic.

// The value the canonical formula of matmul.h approximates, in exact (double) arithmetic, the sum
// of the magnitudes of its terms, and the number of roundings any term goes through.
struct Exact {
  double value = 0, magnitude = 0;
  int64_t roundings = 0;
};

void q32_values(Format f, const uint8_t* blk, int* q) {
  if (f == Format::kQ8_0) {
    for (int j = 0; j < 32; ++j) q[j] = reinterpret_cast<const int8_t*>(blk + 2)[j];
    return;
  }
  const bool five = f == Format::kQ5_0 || f == Format::kQ5_1;
  const bool has_min = f == Format::kQ4_1 || f == Format::kQ5_1;
  const uint8_t* qs = blk + (has_min ? 4 : 2) + (five ? 4 : 0);
  uint32_t qh = 0;
  if (five) std::memcpy(&qh, blk + (has_min ? 4 : 2), 4);
  const int offset = has_min ? 0 : (five ? 16 : 8);
  for (int j = 0; j < 16; ++j) {
    q[j] = ((qs[j] & 15) | static_cast<int>(((qh >> j) & 1) << 4)) - offset;
    q[j + 16] = ((qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1) << 4)) - offset;
  }
}

uint16_t u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

// Weights of the low-bit formats as exact values: dequantize_row (checked against the gguf package
// by fixtures_test.cc) forms d * sc * q with products exact in fp32 (at most 11 + 6 + 7 significant
// bits); Q2_K's d * sc * q - dmin * mn is split into its two exact parts by zeroing the other
// scale.
std::vector<double> exact_lowbit_weights(Format f, const uint8_t* w, int64_t k) {
  std::vector<float> a(static_cast<size_t>(k)), b(static_cast<size_t>(k), 0.0f);
  if (f != Format::kQ2_K) {
    dequantize_row(f, w, a.data(), k);
  } else {
    std::vector<uint8_t> only_d(w, w + row_bytes(f, k)), only_min = only_d;
    for (int64_t i = 0; i < k / kQKK; ++i) {
      std::memset(only_d.data() + i * sizeof(BlockQ2_K) + 82, 0, 2);    // dmin = 0
      std::memset(only_min.data() + i * sizeof(BlockQ2_K) + 80, 0, 2);  // d = 0
    }
    dequantize_row(f, only_d.data(), a.data(), k);
    dequantize_row(f, only_min.data(), b.data(), k);
  }
  std::vector<double> out(static_cast<size_t>(k));
  for (int64_t i = 0; i < k; ++i) out[i] = double{a[i]} + double{b[i]};
  return out;
}

Exact exact_dot_lowbit(Format f, const uint8_t* w, const uint8_t* x, int64_t k) {
  Exact e;
  const std::vector<double> wv = exact_lowbit_weights(f, w, k);
  for (int64_t i = 0; i < k; ++i) {
    double a;
    if (f == Format::kIQ4_NL || f == Format::kMXFP4) {
      const auto* blk = reinterpret_cast<const BlockQ8_0*>(x) + i / kQK;
      a = double{fp16_to_f32(blk->d)} * blk->qs[i % kQK];
    } else {
      const auto* blk = reinterpret_cast<const BlockQ8_K*>(x) + i / kQKK;
      a = double{blk->d} * blk->qs[i % kQKK];
    }
    e.value += wv[i] * a;
    e.magnitude += std::fabs(wv[i] * a);
  }
  // Per block: d_w * d_a and float(L) round once each, then one fma of a chain of nb (two
  // chains for Q2_K, and their difference).
  e.roundings = k / format_info(f).block_size + 4;
  return e;
}

// Formats of 32-element blocks against Q8_0 (Q8_1 for those with a min).
Exact exact_dot_q32(Format f, const uint8_t* w, const uint8_t* x, int64_t k) {
  Exact e;
  const FormatInfo& info = format_info(f);
  const int64_t nb = k / info.block_size;
  const bool has_min = f == Format::kQ4_1 || f == Format::kQ5_1;
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* wb = w + b * info.block_bytes;
    const uint8_t* xb = x + b * (has_min ? 36 : 34);
    const auto* qa = reinterpret_cast<const int8_t*>(xb + (has_min ? 4 : 2));
    int q[32];
    q32_values(f, wb, q);
    // d_w * d_a of two fp16 values is exact in fp32 (11 x 11 significant bits).
    const double s = double{fp16_to_f32(u16(wb))} * fp16_to_f32(u16(xb));
    for (int l = 0; l < 8; ++l) {
      int64_t p = 0;
      for (int j = 4 * l; j < 4 * l + 4; ++j) p += q[j] * qa[j];
      e.value += s * static_cast<double>(p);
      e.magnitude += std::fabs(s * static_cast<double>(p));
    }
    if (has_min) {
      const double ms = double{fp16_to_f32(u16(wb + 2))} * fp16_to_f32(u16(xb + 2));
      e.value += ms;
      e.magnitude += std::fabs(ms);
    }
  }
  // Lane chains of ceil(nb/2) fmas + 4 reduction levels; the min chain nb fmas; + final add.
  e.roundings = std::max((nb + 1) / 2 + 4, nb) + 1;
  return e;
}

// K-quants against Q8_K: the 8 integer lanes and 4 min lanes of each super-block (matmul.h),
// whose float terms are what the roundings act on.
Exact exact_dot_k_quants(Format f, const uint8_t* w, const uint8_t* x, int64_t k) {
  Exact e;
  const FormatInfo& info = format_info(f);
  const int64_t nb = k / info.block_size;
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* wb = w + b * info.block_bytes;
    const auto* a = reinterpret_cast<const BlockQ8_K*>(x + b * sizeof(BlockQ8_K));
    int64_t lane[8] = {}, mlane[4] = {};
    double d, dmin = 0;
    if (f == Format::kQ6_K) {
      const auto* blk = reinterpret_cast<const BlockQ6_K*>(wb);
      d = fp16_to_f32(blk->d);
      for (int i = 0; i < 256; ++i) {
        const int h = i / 128, part = (i % 128) / 32, l = i % 32;
        const uint8_t lo = blk->ql[64 * h + l + (part % 2) * 32];
        const int q =
            ((part < 2 ? lo & 15 : lo >> 4) | ((blk->qh[32 * h + l] >> (2 * part)) & 3) << 4) - 32;
        lane[(i % 32) / 4] += int64_t{blk->scales[i / 16]} * q * a->qs[i];
      }
      // The canonical lanes carry the -32 as 32 * (scale[2l] bsums[2l] + scale[2l+1]
      // bsums[2l+1]) instead of spread over the elements; move it there.
      for (int l = 0; l < 8; ++l) {
        for (int i = 0; i < 256; ++i)
          if ((i % 32) / 4 == l) lane[l] += 32 * int64_t{blk->scales[i / 16]} * a->qs[i];
        lane[l] -= 32 * (int64_t{blk->scales[2 * l]} * a->bsums[2 * l] +
                         int64_t{blk->scales[2 * l + 1]} * a->bsums[2 * l + 1]);
      }
    } else {
      const bool five = f == Format::kQ5_K;
      const uint8_t* scales = wb + 4;
      const uint8_t* qh = wb + 16;
      const uint8_t* qs = wb + 16 + (five ? 32 : 0);
      d = fp16_to_f32(u16(wb));
      dmin = fp16_to_f32(u16(wb + 2));
      for (int i = 0; i < 256; ++i) {
        const int c = i / 64, h = (i % 64) / 32, l = i % 32;
        uint8_t sc, mn;
        unpack_scale_min_k4(scales, 2 * c + h, &sc, &mn);
        int q = (qs[32 * c + l] >> (4 * h)) & 15;
        if (five) q |= ((qh[l] >> (2 * c + h)) & 1) << 4;
        lane[l / 4] += int64_t{sc} * q * a->qs[i];
        mlane[i / 64] += int64_t{mn} * a->qs[i];
      }
    }
    for (int l = 0; l < 8; ++l) {
      const double term = d * a->d * static_cast<double>(lane[l]);
      e.value += term;
      e.magnitude += std::fabs(term);
    }
    for (int m = 0; m < 4; ++m) {
      const double term = dmin * a->d * static_cast<double>(mlane[m]);
      e.value -= term;
      e.magnitude += std::fabs(term);
    }
  }
  // d * d_a and float(lane) round once each, the lane chains nb fmas, the reduction tree 3
  // levels, the final subtraction once.
  e.roundings = nb + 6;
  return e;
}

Exact exact_dot(Format f, const uint8_t* w, const uint8_t* x, int64_t k) {
  if (f == Format::kQ2_K || f == Format::kQ3_K || f == Format::kIQ4_NL || f == Format::kIQ4_XS ||
      f == Format::kMXFP4)
    return exact_dot_lowbit(f, w, x, k);
  Exact e;
  const FormatInfo& info = format_info(f);
  if (info.block_size == 1) {
    std::vector<float> wf(k), xf(k);
    dequantize_row(f, w, wf.data(), k);
    dequantize_row(f, x, xf.data(), k);
    for (int64_t i = 0; i < k; ++i) {
      e.value += double{wf[i]} * xf[i];
      e.magnitude += std::fabs(double{wf[i]} * xf[i]);
    }
    e.roundings = (k + 15) / 16 + 4;
    return e;
  }
  if (info.block_size == 32) return exact_dot_q32(f, w, x, k);
  return exact_dot_k_quants(f, w, x, k);
}

TEST_P(MatmulFormat, ScalarReferenceWithinDerivedBoundOfExactArithmetic) {
  uint32_t seed = 40;
  for (int64_t k : test_ks(GetParam())) {
    const Problem p = make_problem(GetParam(), 6, k, 4, seed++);
    const DotFn dot = matmul_kernels(Isa::kScalar).dot(p.format);
    for (int64_t r = 0; r < p.n_rows; ++r)
      for (int64_t t = 0; t < p.n_tokens; ++t) {
        const uint8_t* w = p.w.data() + r * p.w_row_bytes;
        const uint8_t* x = p.x.data() + t * p.x_row_bytes;
        const Exact e = exact_dot(p.format, w, x, p.k);
        // gamma_n bounds n roundings of every term; the double evaluation of the exact value
        // adds at most k * 2^-53 of the magnitude.
        const double bound = (gamma_n(e.roundings) + p.k * std::ldexp(1.0, -53)) * e.magnitude;
        const double got = dot(w, x, p.k);
        ASSERT_LE(std::fabs(got - e.value), bound)
            << format_info(p.format).name << " k=" << k << " r=" << r << " t=" << t;
      }
  }
}

INSTANTIATE_TEST_SUITE_P(AllWeightFormats, MatmulFormat, ::testing::ValuesIn(kWeightFormats),
                         [](const ::testing::TestParamInfo<Format>& info) {
                           return std::string(format_info(info.param).name);
                         });

}  // namespace
}  // namespace drift::kernels
