// Helpers shared by the kernel tests: the ISAs under test, random inputs, error bounds.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "kernels/format.h"
#include "kernels/fp16.h"
#include "util/cpu_features.h"

namespace drift::kernels {
// Prints a Format by name in gtest messages.
inline void PrintTo(Format f, std::ostream* os) { *os << format_info(f).name; }
}  // namespace drift::kernels

namespace drift::kernels::testing {

// Every ISA this CPU runs, scalar first; only DRIFT_ISA's if that is set (scalar stays the
// reference the tests compare with either way).
inline std::vector<Isa> isas_under_test() {
  const CpuFeatures features = detect_cpu_features();
  const char* forced = std::getenv("DRIFT_ISA");
  if (forced != nullptr && *forced != '\0') {
    Expected<Isa> isa = select_isa(features);
    if (!isa.ok()) {
      ADD_FAILURE() << isa.error().message;
      return {};
    }
    return {*isa};
  }
  return supported_isas(features);
}

inline std::string isa_label(Isa isa) { return std::string(isa_name(isa)); }

// 2^-24: the unit roundoff of fp32.
inline constexpr double kU = 1.0 / 16777216.0;
// gamma_n = n u / (1 - n u): the bound on the relative error of n roundings (Higham).
inline double gamma_n(int64_t n) { return n * kU / (1.0 - n * kU); }

inline uint32_t bits(float f) { return f32_to_bits(f); }

// fp16 bit pattern of a random sane scale: random sign, magnitude in [2^lo, 2^hi].
inline uint16_t random_fp16_scale(std::mt19937& rng, double lo = -12, double hi = -4) {
  std::uniform_real_distribution<double> e(lo, hi);
  const double mag = std::exp2(e(rng));
  return f32_to_fp16(static_cast<float>((rng() & 1) ? -mag : mag));
}

// Offsets of the fp16 scale fields of a block (see format.h).
inline std::vector<int> fp16_scale_offsets(Format f) {
  switch (f) {
    case Format::kQ4_0:
    case Format::kQ5_0:
    case Format::kQ8_0:
      return {0};
    case Format::kQ4_1:
    case Format::kQ5_1:
    case Format::kQ4_K:
    case Format::kQ5_K:
      return {0, 2};
    case Format::kQ6_K:
      return {208};
    case Format::kQ2_K:
      return {80, 82};
    case Format::kQ3_K:
      return {108};
    case Format::kIQ4_NL:
    case Format::kIQ4_XS:
      return {0};
    default:
      return {};
  }
}

inline std::vector<float> random_floats(int64_t n, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

// n_rows rows of k elements of a weight format: random bytes with sane scales for the quantized
// formats (so every quant bit pattern occurs), random normals for the float formats.
inline std::vector<uint8_t> random_weight_rows(Format f, int64_t n_rows, int64_t k,
                                               std::mt19937& rng) {
  const FormatInfo& info = format_info(f);
  const int64_t n_blocks = n_rows * k / info.block_size;
  std::vector<uint8_t> out(static_cast<size_t>(n_blocks * info.block_bytes));
  if (f == Format::kF32 || f == Format::kF16 || f == Format::kBF16) {
    const std::vector<float> v = random_floats(n_rows * k, rng, 0.5f);
    for (size_t i = 0; i < v.size(); ++i) {
      if (f == Format::kF32) {
        std::memcpy(out.data() + 4 * i, &v[i], 4);
      } else {
        const uint16_t h = f == Format::kF16 ? f32_to_fp16(v[i]) : f32_to_bf16(v[i]);
        std::memcpy(out.data() + 2 * i, &h, 2);
      }
    }
    return out;
  }
  for (uint8_t& b : out) b = static_cast<uint8_t>(rng());
  if (f == Format::kMXFP4)  // E8M0 scales 2^-18 .. 2^-3 (a byte drawn at random overflows fp32)
    for (int64_t b = 0; b < n_blocks; ++b) out[b * info.block_bytes] = 110 + rng() % 16;
  for (int64_t b = 0; b < n_blocks; ++b)
    for (int off : fp16_scale_offsets(f)) {
      const uint16_t h = random_fp16_scale(rng);
      std::memcpy(out.data() + b * info.block_bytes + off, &h, 2);
    }
  return out;
}

}  // namespace drift::kernels::testing
