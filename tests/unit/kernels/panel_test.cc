// Panel matmul: every ISA bitwise equal to the scalar panel kernel, outputs independent of the
// batch and the panel split, padding rows never written, and the scalar kernel (which reads the
// repacked panels) within a derived bound of the exact dot product of the file's rows.
#include "kernels/panel.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/dequantize.h"
#include "kernels/matmul.h"
#include "kernels/panel_layout.h"
#include "kernels/quantize.h"

namespace drift::kernels {
namespace {

using testing::bits;
using testing::gamma_n;
using testing::isa_label;
using testing::isas_under_test;

constexpr Format kPanelFormats[] = {
    Format::kQ4_0, Format::kQ4_1, Format::kQ5_0, Format::kQ5_1,   Format::kQ8_0,   Format::kQ4_K,
    Format::kQ6_K, Format::kQ2_K, Format::kQ3_K, Format::kIQ4_NL, Format::kIQ4_XS, Format::kMXFP4};
constexpr float kSentinel = -12345.0f;

struct PanelProblem {
  Format format;
  int64_t n_rows, k, n_tokens;
  std::vector<uint8_t> w;  // file layout [n_rows][w_row_bytes]
  int64_t w_row_bytes;
  std::vector<uint8_t> panels;
  std::vector<uint8_t> x;  // [n_tokens][x_row_bytes]
  int64_t x_row_bytes;
  std::vector<uint8_t> sums;  // [n_tokens][sums_row_bytes]
  int64_t sums_row_bytes;
};

PanelProblem make_problem(Format f, int64_t n_rows, int64_t k, int64_t n_tokens, uint32_t seed) {
  std::mt19937 rng(seed);
  PanelProblem p{f,
                 n_rows,
                 k,
                 n_tokens,
                 {},
                 row_bytes(f, k),
                 {},
                 {},
                 activation_row_bytes(f, k),
                 {},
                 panel_sums_row_bytes(f, k)};
  p.w = testing::random_weight_rows(f, n_rows, k, rng);
  p.panels.resize(static_cast<size_t>(panel_matrix_bytes(f, n_rows, k)));
  repack_panels(f, p.w.data(), p.w_row_bytes, n_rows, k, p.panels.data());
  std::vector<float> xf = testing::random_floats(n_tokens * k, rng);
  for (int64_t t = 0; t < n_tokens; ++t)
    for (int64_t i = 0; i < k; ++i) xf[t * k + i] *= std::exp2(static_cast<float>(t % 7) - 3.0f);
  p.x.resize(static_cast<size_t>(n_tokens * p.x_row_bytes));
  quantize_activations(Isa::kScalar, f, xf.data(), k, n_tokens, k, p.x.data(), p.x_row_bytes);
  p.sums.resize(static_cast<size_t>(n_tokens * p.sums_row_bytes));
  prepare_panel_sums(f, p.x.data(), p.x_row_bytes, n_tokens, k, p.sums.data(), p.sums_row_bytes);
  return p;
}

int64_t stride_of(const PanelProblem& p) { return p.n_rows + 3; }

std::vector<float> fresh_output(const PanelProblem& p) {
  return std::vector<float>(static_cast<size_t>(p.n_tokens * stride_of(p)), kSentinel);
}

// Runs panels [panel_begin, panel_end) for tokens [t0, t0 + n).
void run(Isa isa, const PanelProblem& p, int64_t t0, int64_t n, int64_t panel_begin,
         int64_t panel_end, std::vector<float>& y) {
  const PanelArgs args{p.panels.data(),
                       p.n_rows,
                       p.k,
                       p.x.data() + t0 * p.x_row_bytes,
                       p.x_row_bytes,
                       p.sums.data() + t0 * p.sums_row_bytes,
                       p.sums_row_bytes,
                       y.data() + t0 * stride_of(p),
                       stride_of(p),
                       n};
  panel_matmul(isa, p.format)(args, panel_begin, panel_end);
}

int64_t n_panels(const PanelProblem& p) { return (p.n_rows + kPanelRows - 1) / kPanelRows; }

std::vector<int64_t> test_ks(Format f) {
  if (format_info(f).block_size == 32) return {32, 96, 576, 640};
  return {256, 768, 2048};
}

std::string label(const PanelProblem& p, Isa isa) {
  return std::string(format_info(p.format).name) + " " + isa_label(isa) +
         " k=" + std::to_string(p.k);
}

class PanelFormat : public ::testing::TestWithParam<Format> {};

TEST_P(PanelFormat, EveryIsaEqualsScalarBitwise) {
  uint32_t seed = 7;
  for (int64_t k : test_ks(GetParam())) {
    // 37 rows: two full panels and one with 5 real rows and 11 padding rows.
    const PanelProblem p = make_problem(GetParam(), 37, k, 19, seed++);
    std::vector<float> y_ref = fresh_output(p);
    run(Isa::kScalar, p, 0, p.n_tokens, 0, n_panels(p), y_ref);
    for (Isa isa : isas_under_test()) {
      // Every tile width and remainder of every ISA's token loop.
      for (int64_t n : {1, 2, 3, 4, 5, 7, 8, 9, 17, 19}) {
        std::vector<float> y = fresh_output(p);
        run(isa, p, 0, n, 0, n_panels(p), y);
        for (int64_t t = 0; t < n; ++t)
          for (int64_t r = 0; r < stride_of(p); ++r) {
            const size_t i = static_cast<size_t>(t * stride_of(p) + r);
            ASSERT_EQ(bits(y[i]), bits(y_ref[i]))
                << label(p, isa) << " n_tokens=" << n << " t=" << t << " r=" << r << ": " << y[i]
                << " vs " << y_ref[i];
          }
      }
    }
  }
}

// A matrix larger than two of panel_loop's chunks (kPanelChunkBytes of panels run over every token
// tile before the next chunk), ending in a partial chunk and a partial panel, over token counts
// that leave a remainder tile: the chunked loop order must not change a single output.
TEST_P(PanelFormat, ChunkedLoopEqualsScalarBitwise) {
  const Format f = GetParam();
  const int64_t k = test_ks(f).back();
  const int64_t chunk_panels = std::max<int64_t>(1, kPanelChunkBytes / panel_bytes(f, k));
  const int64_t n_rows = (2 * chunk_panels + 1) * kPanelRows + 5;
  const PanelProblem p = make_problem(f, n_rows, k, 11, 5);
  std::vector<float> y_ref = fresh_output(p);
  run(Isa::kScalar, p, 0, p.n_tokens, 0, n_panels(p), y_ref);
  for (Isa isa : isas_under_test()) {
    std::vector<float> y = fresh_output(p);
    run(isa, p, 0, p.n_tokens, 0, n_panels(p), y);
    ASSERT_EQ(0, std::memcmp(y.data(), y_ref.data(), y.size() * sizeof(float)))
        << label(p, isa) << " rows=" << n_rows;
    // A thread's range that starts inside a chunk.
    std::vector<float> split = fresh_output(p);
    run(isa, p, 0, p.n_tokens, 0, chunk_panels / 2 + 1, split);
    run(isa, p, 0, p.n_tokens, chunk_panels / 2 + 1, n_panels(p), split);
    ASSERT_EQ(0, std::memcmp(split.data(), y_ref.data(), y.size() * sizeof(float)))
        << label(p, isa) << " split inside a chunk";
  }
}

TEST_P(PanelFormat, OutputIndependentOfBatchAndPanelSplit) {
  const int64_t k = test_ks(GetParam())[1];
  const PanelProblem p = make_problem(GetParam(), 53, k, 32, 99);
  for (Isa isa : isas_under_test()) {
    std::vector<float> full = fresh_output(p);
    run(isa, p, 0, 32, 0, n_panels(p), full);

    std::vector<float> one_by_one = fresh_output(p);
    for (int64_t t = 0; t < 32; ++t) run(isa, p, t, 1, 0, n_panels(p), one_by_one);
    EXPECT_EQ(0, std::memcmp(full.data(), one_by_one.data(), full.size() * sizeof(float)))
        << label(p, isa) << ": batch 1 vs batch 32";

    for (int64_t t0 : {0, 5, 13, 25}) {
      std::vector<float> window = fresh_output(p);
      run(isa, p, t0, 7, 0, n_panels(p), window);
      const size_t stride = static_cast<size_t>(stride_of(p));
      EXPECT_EQ(0, std::memcmp(full.data() + t0 * stride, window.data() + t0 * stride,
                               7 * stride * sizeof(float)))
          << label(p, isa) << ": batch 7 at " << t0;
    }

    std::vector<float> split = fresh_output(p);
    const int64_t cuts[][2] = {{2, 4}, {0, 1}, {1, 1}, {1, 2}, {4, 4}};
    for (const auto& c : cuts) run(isa, p, 0, 32, c[0], c[1], split);
    EXPECT_EQ(0, std::memcmp(full.data(), split.data(), full.size() * sizeof(float)))
        << label(p, isa) << ": panel splits";

    for (int64_t t = 0; t < 32; ++t)
      for (int64_t r = p.n_rows; r < stride_of(p); ++r)
        ASSERT_EQ(full[t * stride_of(p) + r], kSentinel) << "wrote a padding row";
  }
}

TEST_P(PanelFormat, EmptyRangesAndBatchesWriteNothing) {
  const PanelProblem p = make_problem(GetParam(), 20, test_ks(GetParam())[0], 3, 5);
  for (Isa isa : isas_under_test()) {
    std::vector<float> y = fresh_output(p);
    run(isa, p, 0, 3, 1, 1, y);
    run(isa, p, 0, 0, 0, n_panels(p), y);
    for (float v : y) ASSERT_EQ(v, kSentinel) << label(p, isa);
  }
}

// The scalar panel kernel, which reads the repacked bytes, against the exact dot product of the
// file's rows: the weights and activations dequantized (each value at most one rounding away from
// exact: the formats' products of an fp16 scale and a small integer are exact in fp32, the min
// terms round once) and multiplied in double. The panel order rounds each block's scale product,
// the K-quants' integer-to-float conversion, the nb-long fma chains and the final add or
// subtraction: nb + 4 roundings of any term, plus the two of dequantization.
TEST_P(PanelFormat, ScalarWithinDerivedBoundOfExactDot) {
  uint32_t seed = 40;
  for (int64_t k : test_ks(GetParam())) {
    const PanelProblem p = make_problem(GetParam(), 21, k, 4, seed++);
    std::vector<float> y = fresh_output(p);
    run(Isa::kScalar, p, 0, p.n_tokens, 0, n_panels(p), y);
    const Format act = format_info(p.format).activation;
    const int64_t nb = k / format_info(p.format).block_size;
    std::vector<float> wf(k), xf(k);
    for (int64_t r = 0; r < p.n_rows; ++r) {
      dequantize_row(p.format, p.w.data() + r * p.w_row_bytes, wf.data(), k);
      for (int64_t t = 0; t < p.n_tokens; ++t) {
        dequantize_row(act, p.x.data() + t * p.x_row_bytes, xf.data(), k);
        double exact = 0, magnitude = 0;
        if (p.format == Format::kQ4_1 || p.format == Format::kQ5_1) {
          // Q4_1 x Q8_1 approximates the min term by m_w * s_a, s_a = fp16(d_a * sum(a)) as the
          // activation block stores it (as llama.cpp does): that is the value to approach.
          // Q4_1 and Q5_1 blocks: d, m, (qh,) qs. The min part of the dequantized weights is
          // dropped (m is fp16, the weights minus m are d * q exactly).
          const bool five = p.format == Format::kQ5_1;
          const int64_t block_bytes = format_info(p.format).block_bytes;
          const auto* ab = reinterpret_cast<const BlockQ8_1*>(p.x.data() + t * p.x_row_bytes);
          for (int64_t b = 0; b < nb; ++b) {
            const uint8_t* wb = p.w.data() + r * p.w_row_bytes + b * block_bytes;
            uint16_t d, m;
            std::memcpy(&d, wb, 2);
            std::memcpy(&m, wb + 2, 2);
            uint32_t qh = 0;
            if (five) std::memcpy(&qh, wb + 4, 4);
            const uint8_t* qs = wb + (five ? 8 : 4);
            const double dd = double{fp16_to_f32(d)} * fp16_to_f32(ab[b].d);
            for (int j = 0; j < 16; ++j) {
              const int q_lo = (qs[j] & 15) | static_cast<int>(((qh >> j) & 1) << 4);
              const int q_hi = (qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1) << 4);
              const double lo = dd * q_lo * ab[b].qs[j];
              const double hi = dd * q_hi * ab[b].qs[j + 16];
              exact += lo + hi;
              magnitude += std::fabs(lo) + std::fabs(hi);
            }
            const double ms = double{fp16_to_f32(m)} * fp16_to_f32(ab[b].s);
            exact += ms;
            magnitude += std::fabs(ms);
          }
        } else {
          for (int64_t i = 0; i < k; ++i) {
            exact += double{wf[i]} * xf[i];
            magnitude += std::fabs(double{wf[i]} * xf[i]);
          }
        }
        // Q4_1's and the K-quants' min terms are summed separately from the scaled quants, so
        // cancellation between the two is bounded by their own magnitudes: widen by 2x.
        const double bound = 2 * (gamma_n(nb + 6) + k * std::ldexp(1.0, -53)) * magnitude;
        ASSERT_LE(std::fabs(y[t * stride_of(p) + r] - exact), bound)
            << format_info(p.format).name << " k=" << k << " r=" << r << " t=" << t;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(PanelFormats, PanelFormat, ::testing::ValuesIn(kPanelFormats),
                         [](const ::testing::TestParamInfo<Format>& info) {
                           return std::string(format_info(info.param).name);
                         });

// Every code at its largest and every activation at +-127: the SIMD kernels add several groups'
// byte products in int16 before widening them (as many as the format's largest code allows), so
// these blocks sit at the edge of that range; every ISA still gives the scalar kernel's bits.
template <class Block>
void set_largest_codes(std::vector<uint8_t>& w, void (*set)(Block&)) {
  for (size_t b = 0; b < w.size() / sizeof(Block); ++b) {
    Block block;
    std::memcpy(&block, w.data() + b * sizeof(Block), sizeof(Block));
    set(block);
    std::memcpy(w.data() + b * sizeof(Block), &block, sizeof(Block));
  }
}

void largest_codes(Format f, std::vector<uint8_t>& w) {
  switch (f) {
    case Format::kQ4_0:
      return set_largest_codes<BlockQ4_0>(w, [](BlockQ4_0& b) { std::memset(b.qs, 0xff, 16); });
    case Format::kQ4_1:
      return set_largest_codes<BlockQ4_1>(w, [](BlockQ4_1& b) { std::memset(b.qs, 0xff, 16); });
    case Format::kQ5_0:
      return set_largest_codes<BlockQ5_0>(w, [](BlockQ5_0& b) {
        std::memset(b.qs, 0xff, 16);
        std::memset(b.qh, 0xff, 4);
      });
    case Format::kQ5_1:
      return set_largest_codes<BlockQ5_1>(w, [](BlockQ5_1& b) {
        std::memset(b.qs, 0xff, 16);
        std::memset(b.qh, 0xff, 4);
      });
    case Format::kMXFP4:  // code 7: E2M1's largest value, 6 (doubled, 12)
      return set_largest_codes<BlockMXFP4>(w, [](BlockMXFP4& b) { std::memset(b.qs, 0x77, 16); });
    case Format::kQ4_K:
      return set_largest_codes<BlockQ4_K>(w, [](BlockQ4_K& b) {
        std::memset(b.qs, 0xff, sizeof b.qs);
        std::memset(b.scales, 0xff, sizeof b.scales);
      });
    case Format::kQ6_K:
      return set_largest_codes<BlockQ6_K>(w, [](BlockQ6_K& b) {
        std::memset(b.ql, 0xff, sizeof b.ql);
        std::memset(b.qh, 0xff, sizeof b.qh);
        for (int8_t& s : b.scales) s = s < 0 ? -128 : 127;
      });
    case Format::kQ2_K:
      return set_largest_codes<BlockQ2_K>(w, [](BlockQ2_K& b) {
        std::memset(b.qs, 0xff, sizeof b.qs);
        std::memset(b.scales, 0xff, sizeof b.scales);
      });
    case Format::kQ3_K:
      return set_largest_codes<BlockQ3_K>(w, [](BlockQ3_K& b) {
        std::memset(b.qs, 0xff, sizeof b.qs);
        std::memset(b.hmask, 0xff, sizeof b.hmask);
      });
    default:
      FAIL() << "no largest codes for " << format_info(f).name;
  }
}

TEST(PanelInt16Sums, LargestCodesAndActivationsEqualScalarBitwise) {
  for (Format f : {Format::kQ4_0, Format::kQ4_1, Format::kQ5_0, Format::kQ5_1, Format::kMXFP4,
                   Format::kQ4_K, Format::kQ6_K, Format::kQ2_K, Format::kQ3_K}) {
    const int64_t k = format_info(f).block_size == 32 ? 256 : 512;
    const int64_t n_rows = 21, n_tokens = 3;
    std::mt19937 rng(7);
    std::vector<uint8_t> w = testing::random_weight_rows(f, n_rows, k, rng);
    largest_codes(f, w);
    std::vector<uint8_t> panels(static_cast<size_t>(panel_matrix_bytes(f, n_rows, k)));
    repack_panels(f, w.data(), row_bytes(f, k), n_rows, k, panels.data());
    // Token 0 all +1 (quants +127), token 1 all -1 (-127), token 2 alternating signs.
    std::vector<float> xf(static_cast<size_t>(n_tokens * k));
    for (int64_t i = 0; i < k; ++i) {
      xf[i] = 1.0f;
      xf[k + i] = -1.0f;
      xf[2 * k + i] = i % 2 ? -1.0f : 1.0f;
    }
    const int64_t x_row_bytes = activation_row_bytes(f, k);
    const int64_t sums_row_bytes = panel_sums_row_bytes(f, k);
    std::vector<uint8_t> x(static_cast<size_t>(n_tokens * x_row_bytes));
    std::vector<uint8_t> sums(static_cast<size_t>(n_tokens * sums_row_bytes));
    quantize_activations(Isa::kScalar, f, xf.data(), k, n_tokens, k, x.data(), x_row_bytes);
    prepare_panel_sums(f, x.data(), x_row_bytes, n_tokens, k, sums.data(), sums_row_bytes);
    const PanelArgs base{panels.data(), n_rows,         k,       x.data(), x_row_bytes,
                         sums.data(),   sums_row_bytes, nullptr, n_rows,   n_tokens};
    std::vector<float> y_ref(static_cast<size_t>(n_tokens * n_rows), kSentinel);
    PanelArgs args = base;
    args.y = y_ref.data();
    panel_matmul(Isa::kScalar, f)(args, 0, (n_rows + kPanelRows - 1) / kPanelRows);
    // The decode shape too: each token alone.
    for (Isa isa : isas_under_test())
      for (int64_t n : {n_tokens, int64_t{1}}) {
        std::vector<float> y(static_cast<size_t>(n_tokens * n_rows), kSentinel);
        for (int64_t t0 = 0; t0 < n_tokens; t0 += n) {
          args = base;
          args.x = x.data() + t0 * x_row_bytes;
          args.sums = sums.data() + t0 * sums_row_bytes;
          args.y = y.data() + t0 * n_rows;
          args.n_tokens = n;
          panel_matmul(isa, f)(args, 0, (n_rows + kPanelRows - 1) / kPanelRows);
        }
        for (size_t i = 0; i < y.size(); ++i)
          ASSERT_EQ(bits(y[i]), bits(y_ref[i]))
              << format_info(f).name << " " << isa_label(isa) << " n=" << n << " i=" << i << ": "
              << y[i] << " vs " << y_ref[i];
      }
  }
}

// For the low-bit formats the row layout's order (matmul.h) is the panel order, so a model gives
// the same bits whichever layout a matrix is in.
TEST(PanelLowBit, PanelEqualsRowLayoutBitwise) {
  for (Format f :
       {Format::kQ2_K, Format::kQ3_K, Format::kIQ4_NL, Format::kIQ4_XS, Format::kMXFP4}) {
    const PanelProblem p = make_problem(f, 37, 768, 5, 3);
    std::vector<float> y = fresh_output(p);
    run(Isa::kScalar, p, 0, p.n_tokens, 0, n_panels(p), y);
    const DotFn dot = matmul_kernels(Isa::kScalar).dot(f);
    for (int64_t t = 0; t < p.n_tokens; ++t)
      for (int64_t r = 0; r < p.n_rows; ++r)
        ASSERT_EQ(bits(y[t * stride_of(p) + r]),
                  bits(dot(p.w.data() + r * p.w_row_bytes, p.x.data() + t * p.x_row_bytes, p.k)))
            << format_info(f).name << " t=" << t << " r=" << r;
  }
}

// MXFP4's scale bytes at both ends of E8M0's range, which the SIMD kernels turn into floats by
// other instructions than mxfp4_scale: e < 2 (subnormal scales) under activations of ordinary
// size, and e up to 255 (2^127) under activations of 2^-16 (fp16 activation scales near 2^-21:
// nothing overflows). Every ISA's panel kernel and row kernel give the scalar row kernel's bits.
TEST(PanelMXFP4, ExtremeScalesEqualRowLayoutBitwise) {
  const Format f = Format::kMXFP4;
  const int64_t n_rows = 37, k = 640, n_tokens = 9;
  struct Range {
    int e_lo, e_hi;
    float x_scale;
  };
  for (const Range range : {Range{0, 12, 1.0f}, Range{232, 255, 0x1p-16f}}) {
    std::mt19937 rng(static_cast<uint32_t>(range.e_lo + 1));
    std::vector<uint8_t> w = testing::random_weight_rows(f, n_rows, k, rng);
    const int64_t block_bytes = format_info(f).block_bytes;
    for (size_t b = 0; b < w.size() / block_bytes; ++b)
      w[b * block_bytes] = static_cast<uint8_t>(range.e_lo + rng() % (range.e_hi - range.e_lo + 1));
    std::vector<uint8_t> panels(static_cast<size_t>(panel_matrix_bytes(f, n_rows, k)));
    repack_panels(f, w.data(), row_bytes(f, k), n_rows, k, panels.data());
    std::vector<float> xf = testing::random_floats(n_tokens * k, rng, range.x_scale);
    const int64_t x_row_bytes = activation_row_bytes(f, k);
    const int64_t sums_row_bytes = panel_sums_row_bytes(f, k);
    std::vector<uint8_t> x(static_cast<size_t>(n_tokens * x_row_bytes));
    std::vector<uint8_t> sums(static_cast<size_t>(n_tokens * sums_row_bytes));
    quantize_activations(Isa::kScalar, f, xf.data(), k, n_tokens, k, x.data(), x_row_bytes);
    prepare_panel_sums(f, x.data(), x_row_bytes, n_tokens, k, sums.data(), sums_row_bytes);
    const DotFn reference = matmul_kernels(Isa::kScalar).dot(f);
    for (Isa isa : isas_under_test()) {
      std::vector<float> y(static_cast<size_t>(n_tokens * n_rows), kSentinel);
      panel_matmul(isa, f)(PanelArgs{panels.data(), n_rows, k, x.data(), x_row_bytes, sums.data(),
                                     sums_row_bytes, y.data(), n_rows, n_tokens},
                           0, (n_rows + kPanelRows - 1) / kPanelRows);
      const DotFn row_dot = matmul_kernels(isa).dot(f);
      for (int64_t t = 0; t < n_tokens; ++t)
        for (int64_t r = 0; r < n_rows; ++r) {
          const uint8_t* w_row = w.data() + r * row_bytes(f, k);
          const uint8_t* x_row = x.data() + t * x_row_bytes;
          const float expected = reference(w_row, x_row, k);
          ASSERT_TRUE(std::isfinite(expected));
          ASSERT_EQ(bits(y[t * n_rows + r]), bits(expected))
              << isa_label(isa) << " e in [" << range.e_lo << ", " << range.e_hi << "] t=" << t
              << " r=" << r << ": " << y[t * n_rows + r] << " vs " << expected;
          ASSERT_EQ(bits(row_dot(w_row, x_row, k)), bits(expected)) << isa_label(isa) << " row";
        }
    }
  }
}

TEST(PanelSupport, SameAnswerForEveryFormat) {
  EXPECT_TRUE(panel_supported(Format::kQ4_1));
  EXPECT_TRUE(panel_supported(Format::kQ6_K));
  EXPECT_FALSE(panel_supported(Format::kQ5_K));
  EXPECT_FALSE(panel_supported(Format::kF32));
  // A panel reads no more bytes than the 16 rows it replaces (decode is bound by those bytes),
  // except the unpacked 6-bit scales of Q4_K (+2.8%), IQ4_XS (+1.5%) and Q3_K (+3.6%).
  for (Format f : kPanelFormats) {
    const int64_t k = 4096;
    const double ratio = static_cast<double>(panel_bytes(f, k)) / (16 * row_bytes(f, k));
    const double allowed = f == Format::kQ3_K                           ? 1.04
                           : f == Format::kQ4_K || f == Format::kIQ4_XS ? 1.03
                                                                        : 1.0;
    EXPECT_LE(ratio, allowed) << format_info(f).name;
  }
}

}  // namespace
}  // namespace drift::kernels
