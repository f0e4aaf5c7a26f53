// IEEE half (fp16) and bfloat16 <-> fp32 conversion: exact scalar definitions and row converters.
//
// fp16 -> fp32 and bf16 -> fp32 are exact. fp32 -> fp16 rounds to nearest even (as F16C's
// vcvtps2ph with imm 0, numpy's astype(float16) and ggml's GGML_FP32_TO_FP16), overflowing to inf
// from 65520 on; NaN stays NaN (quiet, top payload bits kept, as F16C does). fp32 -> bf16 is ggml's
// ggml_compute_fp32_to_bf16: round to nearest even, subnormals kept, NaN forced quiet.
// The row converters give bit-identical results on every ISA.
#pragma once

#include <cstdint>
#include <cstring>

#include "util/cpu_features.h"

namespace drift::kernels {

// `static inline` on purpose: see the note in format.h.
static inline float bits_to_f32(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

static inline uint32_t f32_to_bits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}

static inline float fp16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return bits_to_f32(sign | 0x7f800000u | (mant << 13));  // inf / NaN
  if (exp != 0) return bits_to_f32(sign | ((exp + 112) << 23) | (mant << 13));
  if (mant == 0) return bits_to_f32(sign);
  // Subnormal half: mant * 2^-24, normalised for fp32.
  int e = -1;
  do {
    mant <<= 1;
    ++e;
  } while ((mant & 0x400u) == 0);
  return bits_to_f32(sign | static_cast<uint32_t>(112 - e) << 23 | ((mant & 0x3ffu) << 13));
}

static inline uint16_t f32_to_fp16(float f) {
  const uint32_t x = f32_to_bits(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return sign | 0x7e00u | ((ax >> 13) & 0x3ffu);  // NaN, quieted
  if (ax >= 0x477ff000u) return sign | 0x7c00u;                         // >= 65520: inf
  if (ax >= 0x38800000u) {                                              // normal half
    const uint32_t rounded = ax + 0xfffu + ((ax >> 13) & 1u);
    return sign | static_cast<uint16_t>((rounded - 0x38000000u) >> 13);
  }
  // Subnormal half (or zero): the value in units of 2^-24, rounded to nearest even.
  const uint32_t exp = ax >> 23;
  if (exp < 102) return sign;  // below 2^-25: rounds to zero
  const uint32_t mant = (ax & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126 - exp;  // in [14, 24]
  const uint32_t q = mant >> shift;
  const uint32_t rem = mant & ((1u << shift) - 1);
  const uint32_t half = 1u << (shift - 1);
  const uint32_t up = (rem > half || (rem == half && (q & 1u))) ? 1u : 0u;
  return sign | static_cast<uint16_t>(q + up);
}

static inline float bf16_to_f32(uint16_t h) { return bits_to_f32(static_cast<uint32_t>(h) << 16); }

static inline uint16_t f32_to_bf16(float f) {
  const uint32_t x = f32_to_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 64u);
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

// bf16 attention operands (paged_attention.h, bf16 K/V): a bf16 of magnitude below 2^-40 counts as
// zero. Products and sums of such operands are then multiples of 2^-94 and never subnormal, the
// one range where vdpbf16ps (which flushes subnormals) and two fmas (which keep them) differ.
inline constexpr uint16_t kBf16TinyBits = 0x2B80;  // 2^-40 as bf16 bits
static inline uint16_t bf16_flush_tiny(uint16_t h) {
  return (h & 0x7fffu) < kBf16TinyBits ? static_cast<uint16_t>(h & 0x8000u) : h;
}
// x rounded to such an operand (to nearest even), as a float.
static inline float bf16_operand(float x) { return bf16_to_f32(bf16_flush_tiny(f32_to_bf16(x))); }

// Row converters: dst[i] = convert(src[i]) for i in [0, n).
void convert_f32_to_fp16(Isa isa, const float* src, uint16_t* dst, int64_t n);
void convert_fp16_to_f32(Isa isa, const uint16_t* src, float* dst, int64_t n);
void convert_f32_to_bf16(Isa isa, const float* src, uint16_t* dst, int64_t n);
void convert_bf16_to_f32(Isa isa, const uint16_t* src, float* dst, int64_t n);

}  // namespace drift::kernels
