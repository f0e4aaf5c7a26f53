// Element formats of weight and activation tensors: ggml's block layouts, byte for byte, and what
// each weight format needs from the activations it is multiplied with.
//
// Every quantized format stores a row of k elements as k / block_size consecutive blocks. The
// structs below are the exact on-disk layouts of GGUF files (little-endian, no padding); scales
// named `d`, `m`, `dmin`, `s` are IEEE fp16 bit patterns unless stated otherwise.
//
// A weight matrix in format W is multiplied with activations converted to
// format_info(W).activation:
//   Q4_0, Q5_0, Q8_0, IQ4_NL, MXFP4 -> Q8_0     Q4_1, Q5_1 -> Q8_1
//   Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS -> Q8_K
//   F16 -> F16                    BF16 -> BF16            F32 -> F32
// exactly as llama.cpp's CPU backend does (ggml-cpu type_traits vec_dot_type), so that the same
// activations reach the integer dot products.
//
// A note for this folder: public headers define no inline functions with external linkage. The
// SIMD translation units are compiled with -mavx2/-mavx512*, and the linker may pick their copy of
// an inline function for baseline code, which would then fault on an older CPU. Helpers shared
// with SIMD files are `static inline` (one private copy per translation unit).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "util/error.h"

namespace drift::kernels {

// Values are ggml's type ids, so a GGUF tensor type converts with a range check only.
enum class Format : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,  // activations only
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,  // activations only
  kIQ4_NL = 20,
  kIQ4_XS = 23,
  kBF16 = 30,
  kMXFP4 = 39,
};

inline constexpr int64_t kQK = 32;    // elements per block of Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1
inline constexpr int64_t kQKK = 256;  // elements per super-block of the K-quants

// x[j] = d * ((qs[j] & 15) - 8),  x[j + 16] = d * ((qs[j] >> 4) - 8)   for j in [0, 16)
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[kQK / 2];
};
// x[j] = d * (qs[j] & 15) + m,    x[j + 16] = d * (qs[j] >> 4) + m
struct BlockQ4_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qs[kQK / 2];
};
// 5-bit values: q[j] = (qs[j] & 15) | (bit j of qh) << 4, q[j+16] = (qs[j] >> 4) | (bit j+16) << 4;
// x = d * (q - 16). qh is a little-endian uint32.
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
// As Q5_0 with x = d * q + m.
struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
// x[j] = d * qs[j]
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kQK];
};
// As Q8_0, plus s = fp16(d * sum(qs)) so that a Q4_1/Q5_1 dot product gets the min term cheaply.
struct BlockQ8_1 {
  uint16_t d;
  uint16_t s;
  int8_t qs[kQK];
};
// 16 sub-blocks of 16: x = d * (scales[i] & 15) * q - dmin * (scales[i] >> 4), q 2-bit. Element
// e = 128h + 32g + l (h < 2, g < 4, l < 32) is bits 2g, 2g + 1 of qs[32h + l]; its sub-block
// is e / 16.
struct BlockQ2_K {
  uint8_t scales[kQKK / 16];
  uint8_t qs[kQKK / 4];
  uint16_t d;
  uint16_t dmin;
};
// 16 sub-blocks of 16: x = d * (sc[i] - 32) * q, q = low2 - (high bit set ? 0 : 4) in [-4, 3].
// Element e = 128h + 32g + l: low2 is bits 2g, 2g + 1 of qs[32h + l], the high bit is bit 4h + g
// of hmask[l]. The 6-bit sc[i] are packed in scales (see unpack_scale_q3_k in lowbit_quants.h).
struct BlockQ3_K {
  uint8_t hmask[kQKK / 8];
  uint8_t qs[kQKK / 4];
  uint8_t scales[12];
  uint16_t d;
};
// Non-linear 4-bit codes: x[j] = d * kIQ4Values[qs[j] & 15], x[j + 16] = d * kIQ4Values[qs[j] >> 4]
// (the 16-entry codebook of lowbit_quants.h).
struct BlockIQ4_NL {
  uint16_t d;
  uint8_t qs[kQK / 2];
};
// OCP microscaling FP4: 32 E2M1 values sharing one power-of-two scale. x[j] = 2^(e - 128) *
// kMXFP4Values[qs[j] & 15], x[j + 16] = 2^(e - 128) * kMXFP4Values[qs[j] >> 4]: the codebook holds
// the E2M1 values doubled (integers in [-12, 12]), so the E8M0 scale 2^(e - 127) is halved
// (ggml's GGML_E8M0_TO_FP32_HALF; e < 2 gives the subnormals 2^-128, 2^-127).
struct BlockMXFP4 {
  uint8_t e;
  uint8_t qs[kQK / 2];
};
// 8 sub-blocks of 32 with IQ4_NL's codebook: x = d * (ls[i] - 32) * kIQ4Values[code], ls 6-bit:
// low 4 bits in nibble i % 2 of scales_l[i / 2], high 2 bits at bit 2i of scales_h. Sub-block i's
// codes are qs[16i .. 16i + 16) as in IQ4_NL (low nibbles first).
struct BlockIQ4_XS {
  uint16_t d;
  uint16_t scales_h;
  uint8_t scales_l[kQKK / 64];
  uint8_t qs[kQKK / 2];
};
// 8 sub-blocks of 32: x = d * sc[i] * q - dmin * mn[i], q 4-bit; sc, mn 6-bit packed in scales
// (see unpack_scales_k4). qs: 4 chunks of 64 elements, each 32 bytes: low nibbles are elements
// [0, 32) of the chunk, high nibbles elements [32, 64).
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qs[kQKK / 2];
};
// As Q4_K with a 5th bit: for chunk c (64 elements), element l < 32 takes bit 2c of qh[l], element
// 32 + l takes bit 2c + 1 of qh[l].
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qh[kQKK / 8];
  uint8_t qs[kQKK / 2];
};
// 16 sub-blocks of 16: x = d * scales[i] * (q - 32), q 6-bit: low 4 bits in ql, high 2 in qh.
// Per half (128 elements) h: for l in [0, 32):
//   q[l]      = (ql[64h + l] & 15)      | ((qh[32h + l] >> 0) & 3) << 4
//   q[l + 32] = (ql[64h + l + 32] & 15) | ((qh[32h + l] >> 2) & 3) << 4
//   q[l + 64] = (ql[64h + l] >> 4)      | ((qh[32h + l] >> 4) & 3) << 4
//   q[l + 96] = (ql[64h + l + 32] >> 4) | ((qh[32h + l] >> 6) & 3) << 4
struct BlockQ6_K {
  uint8_t ql[kQKK / 2];
  uint8_t qh[kQKK / 4];
  int8_t scales[kQKK / 16];
  uint16_t d;
};
// Activations for the K-quants: x = d * qs (d is fp32 here), bsums[i] = sum of qs[16i .. 16i+16).
struct BlockQ8_K {
  float d;
  int8_t qs[kQKK];
  int16_t bsums[kQKK / 16];
};

// The sizes ggml (ggml-common.h) defines; a GGUF file's bytes are read through these structs.
static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ8_1) == 36);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockQ8_K) == 292);
static_assert(sizeof(BlockQ2_K) == 84);
static_assert(sizeof(BlockQ3_K) == 110);
static_assert(sizeof(BlockIQ4_NL) == 18);
static_assert(sizeof(BlockIQ4_XS) == 136);
static_assert(sizeof(BlockMXFP4) == 17);

struct FormatInfo {
  Format format;
  std::string_view name;  // as llama.cpp prints it, e.g. "q4_K"
  int64_t block_size;     // elements per block (1 for F32/F16/BF16)
  int64_t block_bytes;    // bytes per block
  bool is_weight;         // matmul_kernels() has a kernel for weights in this format
  Format activation;      // the format a matmul with these weights takes its activations in
};

// Every format drift's kernels know.
inline constexpr Format kAllFormats[] = {
    Format::kF32,  Format::kF16,  Format::kBF16, Format::kQ4_0,   Format::kQ4_1,   Format::kQ5_0,
    Format::kQ5_1, Format::kQ8_0, Format::kQ8_1, Format::kQ2_K,   Format::kQ3_K,   Format::kQ4_K,
    Format::kQ5_K, Format::kQ6_K, Format::kQ8_K, Format::kIQ4_NL, Format::kIQ4_XS, Format::kMXFP4,
};
// The formats a weight matrix may be stored in.
inline constexpr Format kWeightFormats[] = {
    Format::kF32,  Format::kF16,    Format::kBF16,   Format::kQ4_0,  Format::kQ4_1, Format::kQ5_0,
    Format::kQ5_1, Format::kQ8_0,   Format::kQ2_K,   Format::kQ3_K,  Format::kQ4_K, Format::kQ5_K,
    Format::kQ6_K, Format::kIQ4_NL, Format::kIQ4_XS, Format::kMXFP4,
};

const FormatInfo& format_info(Format format);
// The format for a ggml type id, or nullptr if drift's kernels do not know it.
const FormatInfo* find_format(uint32_t ggml_type_id);
// Checks that a weight matrix of this ggml type with rows of k elements can be multiplied:
// the type is a supported weight format and k is a positive multiple of its block size.
Expected<Format> weight_format_for(uint32_t ggml_type_id, int64_t k);

// Bytes of one row of k elements (k a multiple of the block size).
int64_t row_bytes(Format format, int64_t k);

}  // namespace drift::kernels
