// How the KV cache stores one (page, layer, KV head) block of keys or of values, for each element
// type, and the scalar code that writes a token's row into it and reads an element back.
//
// A block is [data][scales]. Keys are transposed (element e of slot j next to element e of slot
// j + 1, so that a decode query scores consecutive positions in SIMD lanes), values are rows:
//   keys   data [dim][page_size]   scales [groups][page_size]   (scale of slot j, group g at
//                                                                  g * page_size + j)
//   values data [page_size][dim]   scales [page_size][groups]
// Element types: f16, bf16 (an element of magnitude below 2^-40 stored as zero: the bf16
// attention order of paged_attention.h needs it), f32 (no scales); int8: a fp16 scale per kKvGroup
// elements of a row (per row when dim is not a multiple of kKvGroup), codes in [-127, 127]; int4:
// two codes a byte, the even slot (keys) or even element (values) in the low nibble, a code
// standing for the level kKvInt4Levels[code] in units of its scale (which may be negative), and:
//   int4 keys    after the codes, a fp16 master per slot [page_size], then an int8 sub-scale per
//                kKvInt4KeyGroup elements [dim / 16][page_size]; the scale of group g of slot j is
//                float(sub) * (fp32(master) * 2^-7). A sub-scale costs half the bits of a fp16
//                scale and, searched against the row's master, rounds keys as well
//                (docs/design-notes.md).
//   int4 values  a fp16 scale per kv_value_group elements (64, or 32 when dim is not a multiple
//                of 64) [page_size][dim / group]: values' rounding costs less than keys', so they
//                take the coarser scales (docs/design-notes.md has the measurements).
//
// DEQUANTIZED ELEMENT (what attention multiplies, the same on every ISA): fp32(x) for the float
// types, float(level) * fp32(scale) for int8 and int4 values, float(level) * scale for int4 keys
// with the scale above (a product of an int8, a fp16 and a power of two: exact in fp32).
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
//
// STORES: kv_store_key / kv_store_value without an Isa are the scalar reference; with one, the int4
// stores run that ISA's code (kv_store_avx2.cc, kv_store_avx512.cc), bitwise equal to the
// reference for finite rows (the other formats take the reference).
#pragma once

#include <cstdint>

#include "util/cpu_features.h"
#include "util/error.h"

namespace drift::kernels {

enum class KvFormat : uint8_t { kF16, kBF16, kF32, kInt8, kInt4 };

inline constexpr int64_t kKvGroup = 32;           // elements per rotation and per int8 scale
inline constexpr int64_t kKvInt4KeyGroup = 16;    // key elements per int4 sub-scale
inline constexpr int64_t kKvInt4ValueGroup = 64;  // value elements per int4 scale (dim % 64 == 0)
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
// Elements of a key / value row sharing one scale: kKvGroup for int8 (dim if dim is not a
// multiple of it); for int4 kKvInt4KeyGroup (keys) and kKvInt4ValueGroup or, when dim is not a
// multiple of it, kKvGroup (values); 0 for the float types.
constexpr int64_t kv_key_group(KvFormat format, int64_t dim) {
  if (format == KvFormat::kInt8) return dim % kKvGroup == 0 ? kKvGroup : dim;
  if (format == KvFormat::kInt4) return kKvInt4KeyGroup;
  return 0;
}
constexpr int64_t kv_value_group(KvFormat format, int64_t dim) {
  if (format == KvFormat::kInt8) return dim % kKvGroup == 0 ? kKvGroup : dim;
  if (format == KvFormat::kInt4) return dim % kKvInt4ValueGroup == 0 ? kKvInt4ValueGroup : kKvGroup;
  return 0;
}
// An error unless blocks of `dim` elements x `page_size` slots can be stored in `format` (int4
// needs dim % kKvGroup == 0 and an even page size).
Status kv_format_check(KvFormat format, int64_t dim, int64_t page_size);

// Bytes of a block's data part; scales start there.
constexpr int64_t kv_data_bytes(KvFormat format, int64_t dim, int64_t page_size) {
  return dim * page_size * kv_format_bits(format) / 8;
}
// Offsets in an int4 key block: the fp16 masters, then the int8 sub-scales.
constexpr int64_t kv_int4_masters_offset(int64_t dim, int64_t page_size) {
  return kv_data_bytes(KvFormat::kInt4, dim, page_size);
}
constexpr int64_t kv_int4_subs_offset(int64_t dim, int64_t page_size) {
  return kv_int4_masters_offset(dim, page_size) + 2 * page_size;
}
// Bytes of one key / value block: data plus scales, rounded up to 4 bytes.
int64_t kv_key_block_bytes(KvFormat format, int64_t dim, int64_t page_size);
int64_t kv_value_block_bytes(KvFormat format, int64_t dim, int64_t page_size);

// Quantizes/converts one token's row x[dim] into slot `slot` of a key block (transposed) or a
// value block: the scalar reference, and the same bits through `isa`'s code.
void kv_store_key(KvFormat format, uint8_t* block, int64_t dim, int64_t page_size, int64_t slot,
                  const float* x);
void kv_store_value(KvFormat format, uint8_t* block, int64_t dim, int64_t page_size, int64_t slot,
                    const float* x);
void kv_store_key(Isa isa, KvFormat format, uint8_t* block, int64_t dim, int64_t page_size,
                  int64_t slot, const float* x);
void kv_store_value(Isa isa, KvFormat format, uint8_t* block, int64_t dim, int64_t page_size,
                    int64_t slot, const float* x);

// The dequantized element e of slot `slot` (the scalar reference of every SIMD loader).
float kv_load_key(KvFormat format, const uint8_t* block, int64_t dim, int64_t page_size,
                  int64_t slot, int64_t e);
float kv_load_value(KvFormat format, const uint8_t* block, int64_t dim, int64_t page_size,
                    int64_t slot, int64_t e);

}  // namespace drift::kernels
