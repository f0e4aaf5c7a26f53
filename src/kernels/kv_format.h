// How the KV cache stores one (page, layer, KV head) block of keys or of values, for each element
// type, and the scalar code that writes a token's row into it and reads an element back.
//
// A block is [data][scales]. Keys are transposed (element e of slot j next to element e of slot
// j + 1, so that a decode query scores consecutive positions in SIMD lanes), values are rows:
//   keys   data [dim][page_size]   scales [groups][page_size]   (scale of slot j, group g at
//                                                                  g * page_size + j)
//   values data [page_size][dim]   scales [page_size][groups]
// Element types: f16, bf16, f32 (no scales); int8: a fp16 scale per kKvGroup elements of a row
// (per row when dim is not a multiple of kKvGroup); int4: a fp16 scale per kKvInt4Group elements,
// two codes a byte, the even slot (keys) or even element (values) in the low nibble. x ~= level *
// scale with level the code itself in [-127, 127] (int8) or kKvInt4Levels[code] for the 4-bit
// code (int4, whose scale may be negative).
//
// DEQUANTIZED ELEMENT (what attention multiplies, the same on every ISA): fp32(x) for the float
// types, float(level) * fp32(scale) for int8/int4 — one rounding, exact in SIMD too.
//
// ROTATED ROWS (int8/int4 with dim % kKvGroup == 0): each group of kKvGroup elements of a key or
// value row is stored as H x, H the normalised 32x32 Hadamard matrix (orthogonal and symmetric: H H
// = I). Keys have a few channels far larger than the rest; with 7 levels a side, one scale per
// group would round every other channel of the group to 0. H spreads each channel over the whole
// group, so the group's largest magnitude is close to its typical one. Attention needs no
// un-rotation per element: q . k = (H q) . (H k), and sum_p w_p (H v_p) = H (sum_p w_p v_p), so it
// rotates its queries in and its outputs back (paged_attention.cc). Measured in
// docs/design-notes.md: without it int4 loses 26% perplexity on SmolLM2, int8 with one scale per
// 256-wide Gemma row 1.1%.
#pragma once

#include <cstdint>

#include "util/error.h"

namespace drift::kernels {

enum class KvFormat : uint8_t { kF16, kBF16, kF32, kInt8, kInt4 };

inline constexpr int64_t kKvGroup = 32;      // elements per rotation and per int8 scale
inline constexpr int64_t kKvInt4Group = 16;  // elements per int4 scale (docs/design-notes.md)
// The value of each int4 code, in units of the scale: a codebook denser near zero (llama.cpp's
// IQ4_NL levels), because rotated K/V elements are close to normally distributed and evenly
// spaced levels spend most codes on rare large values. Ascending, so the nearest is found in order.
inline constexpr int8_t kKvInt4Levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                             1,    13,   25,  38,  53,  69,  89,  113};

// Whether rows of `dim` elements are stored rotated.
inline bool kv_format_rotated(KvFormat format, int64_t dim) {
  return (format == KvFormat::kInt8 || format == KvFormat::kInt4) && dim % kKvGroup == 0;
}
// x[n] <- H x for each group of kKvGroup elements (n a multiple of it): the fast
// Walsh-Hadamard butterflies, then the 1/sqrt(32) normalisation. One scalar definition that every
// ISA's attention calls, so rotated queries and outputs are the same bits everywhere.
void kv_rotate(float* x, int64_t n);

// Bits of one stored element (scales excluded). Inline with the two below: the SIMD loaders ask
// for them per row, and a call (plus the division by an unknown group) there made int8 decode
// attention slower than f16.
constexpr int64_t kv_format_bits(KvFormat format) {
  switch (format) {
    case KvFormat::kF32:
      return 32;
    case KvFormat::kInt8:
      return 8;
    case KvFormat::kInt4:
      return 4;
    default:
      return 16;
  }
}
// Elements sharing one scale: kKvGroup for int8 (dim if dim is not a multiple of it),
// kKvInt4Group for int4, 0 for the float types.
constexpr int64_t kv_group_size(KvFormat format, int64_t dim) {
  if (format == KvFormat::kInt8) return dim % kKvGroup == 0 ? kKvGroup : dim;
  if (format == KvFormat::kInt4) return kKvInt4Group;
  return 0;
}
// An error unless blocks of `dim` elements x `page_size` slots can be stored in `format` (int4
// needs dim % kKvGroup == 0 and an even page size).
Status kv_format_check(KvFormat format, int64_t dim, int64_t page_size);

// Bytes of a block's data part; scales start there.
constexpr int64_t kv_data_bytes(KvFormat format, int64_t dim, int64_t page_size) {
  return dim * page_size * kv_format_bits(format) / 8;
}
// Bytes of one block: data plus fp16 scales, rounded up to 4 bytes.
int64_t kv_block_bytes(KvFormat format, int64_t dim, int64_t page_size);

// Quantizes/converts one token's row x[dim] into slot `slot` of a key block (transposed) or a
// value block.
void kv_store_key(KvFormat format, uint8_t* block, int64_t dim, int64_t page_size, int64_t slot,
                  const float* x);
void kv_store_value(KvFormat format, uint8_t* block, int64_t dim, int64_t page_size, int64_t slot,
                    const float* x);

// The dequantized element e of slot `slot` (the scalar reference of every SIMD loader).
float kv_load_key(KvFormat format, const uint8_t* block, int64_t dim, int64_t page_size,
                  int64_t slot, int64_t e);
float kv_load_value(KvFormat format, const uint8_t* block, int64_t dim, int64_t page_size,
                    int64_t slot, int64_t e);

}  // namespace drift::kernels
