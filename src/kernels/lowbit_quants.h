// Internal: the low-bit weight formats (Q2_K, Q3_K, IQ4_NL, IQ4_XS, MXFP4) decoded to plain
// integers in element order. The scalar dot products, the dequantizers and the panel repacker read
// blocks only through these, so a block's meaning is written down once. Helpers are `static inline`
// (see the note in format.h on SIMD translation units).
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/format.h"

namespace drift::kernels {

// IQ4_NL's and IQ4_XS's codebook: code c (4 bits) stands for kIQ4Values[c] (ggml's kvalues_iq4nl,
// ggml-common.h). Every value fits int8, so a decoded block is an int8 vector.
inline constexpr int8_t kIQ4Values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                          1,    13,   25,  38,  53,  69,  89,  113};

// Q2_K and Q3_K share the order of their 2-bit fields: element e = 128h + 32g + l is bits 2g, 2g+1
// of qs[32h + l].
static inline int lowbit_two_bits(const uint8_t* qs, int e) {
  return (qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
}

// Q2_K: the 256 unsigned 2-bit quants, and the 4-bit scale and min of the 16 sub-blocks.
static inline void unpack_q2_k(const BlockQ2_K& b, int* q, int* scale, int* min) {
  for (int e = 0; e < kQKK; ++e) q[e] = lowbit_two_bits(b.qs, e);
  for (int j = 0; j < 16; ++j) {
    scale[j] = b.scales[j] & 15;
    min[j] = b.scales[j] >> 4;
  }
}

// Q3_K's 6-bit scale j (before the -32): low 4 bits in a nibble of scales[0..8), high 2 bits in
// a pair of scales[8..12).
static inline int unpack_scale_q3_k(const uint8_t* scales, int j) {
  const int low = j < 8 ? scales[j] & 15 : scales[j - 8] >> 4;
  const int high = (scales[8 + j % 4] >> (2 * (j / 4))) & 3;
  return low | high << 4;
}

// Q3_K: the 256 signed quants in [-4, 3] and the 16 signed sub-block scales in [-32, 31].
static inline void unpack_q3_k(const BlockQ3_K& b, int* q, int* scale) {
  for (int e = 0; e < kQKK; ++e) {
    const int high = (b.hmask[e % 32] >> (4 * (e / 128) + (e % 128) / 32)) & 1;
    q[e] = lowbit_two_bits(b.qs, e) - (high ? 0 : 4);
  }
  for (int j = 0; j < 16; ++j) scale[j] = unpack_scale_q3_k(b.scales, j) - 32;
}

// IQ4_NL: the 32 codebook values of a block.
static inline void unpack_iq4_nl(const BlockIQ4_NL& b, int* v) {
  for (int j = 0; j < 16; ++j) {
    v[j] = kIQ4Values[b.qs[j] & 15];
    v[j + 16] = kIQ4Values[b.qs[j] >> 4];
  }
}

// IQ4_XS's 6-bit scale of sub-block j, minus 32: in [-32, 31].
static inline int unpack_scale_iq4_xs(const BlockIQ4_XS& b, int j) {
  const int low = (b.scales_l[j / 2] >> (4 * (j % 2))) & 15;
  const int high = (b.scales_h >> (2 * j)) & 3;
  return (low | high << 4) - 32;
}

// IQ4_XS: the 256 codebook values and the 8 signed sub-block scales.
static inline void unpack_iq4_xs(const BlockIQ4_XS& b, int* v, int* scale) {
  for (int j = 0; j < 8; ++j) {
    scale[j] = unpack_scale_iq4_xs(b, j);
    for (int i = 0; i < 16; ++i) {
      v[32 * j + i] = kIQ4Values[b.qs[16 * j + i] & 15];
      v[32 * j + 16 + i] = kIQ4Values[b.qs[16 * j + i] >> 4];
    }
  }
}

// MXFP4's codebook: the 16 E2M1 values (bit 3 the sign, bits 2..1 the exponent, bit 0 the mantissa)
// doubled, so that they are integers (ggml's kvalues_mxfp4).
inline constexpr int8_t kMXFP4Values[16] = {0, 1,  2,  3,  4,  6,  8,  12,
                                            0, -1, -2, -3, -4, -6, -8, -12};

// An E8M0 scale halved, 2^(e - 128), exactly (ggml_e8m0_to_fp32_half): e < 2 are fp32
// subnormals, e = 255 (the format's NaN) becomes 2^127 as in ggml.
static inline float mxfp4_scale(uint8_t e) {
  const uint32_t bits = e < 2 ? uint32_t{0x00200000} << e : static_cast<uint32_t>(e - 1) << 23;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// MXFP4: the 32 doubled E2M1 values of a block.
static inline void unpack_mxfp4(const BlockMXFP4& b, int* v) {
  for (int j = 0; j < 16; ++j) {
    v[j] = kMXFP4Values[b.qs[j] & 15];
    v[j + 16] = kMXFP4Values[b.qs[j] >> 4];
  }
}

}  // namespace drift::kernels
