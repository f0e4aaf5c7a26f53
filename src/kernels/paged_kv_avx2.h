// Internal: 8-lane loaders of paged K/V elements, dequantized in registers exactly as
// kv_load_key / kv_load_value (kv_format.h) compute them, for the AVX2 and AVX-512 attention
// files. One template instance per KvFormat, so the format costs no branch in the inner loops.
// Internal linkage (see format.h).
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "kernels/kv_format.h"
#include "kernels/paged_attention.h"

namespace drift::kernels::paged_kv {
namespace {

// The block (key or value) of page table entry p / page_size.
inline const uint8_t* block_of(const uint8_t* base, int64_t stride, const int32_t* page_table,
                               int64_t page_size, int64_t p) {
  return base + page_table[p / page_size] * stride;
}

// The value block and slot of consecutive positions, stepped without a division: a 64-bit
// division (p / page_size, p % page_size) costs more cycles than converting a row of 64 values,
// and the value loops ran one per 8 or 16 elements of every row.
class ValueRowCursor {
 public:
  ValueRowCursor(const PagedKv& kv, int64_t p)
      : kv_(kv), page_(p / kv.page_size), slot_(p % kv.page_size) {}
  const uint8_t* block() const { return kv_.values + kv_.page_table[page_] * kv_.page_stride; }
  int64_t slot() const { return slot_; }
  int64_t page() const { return page_; }
  void next() {
    if (++slot_ == kv_.page_size) {
      slot_ = 0;
      ++page_;
    }
  }

 private:
  const PagedKv& kv_;
  int64_t page_;
  int64_t slot_;
};

// Prefetches into L2, one cache line at a time, the bytes [begin, end) of a block (`block` its
// first byte). A decode reads one page's block (1-2 KB) and then jumps a whole page stride (every
// layer and head of a page) to the next page's block: runs too short for the hardware prefetcher,
// so each block's first lines waited on memory. Measured on a one-thread harness (64-dim heads,
// 4,096 positions, 90 heads in KvPages' layout): int8 decode attention read 5.4 GB/s and ran
// slower than f16 although it reads half the bytes; 16 pages ahead into L2 took it from 259k to
// 175k cycles per head and f16 from 222k to 213k (8 and 32 pages ahead did no better; into L1 f16
// lost).
inline void prefetch_bytes(const uint8_t* block, int64_t begin, int64_t end) {
  const uintptr_t first = (reinterpret_cast<uintptr_t>(block) + begin) & ~uintptr_t{63};
  const uintptr_t last = reinterpret_cast<uintptr_t>(block) + end;
  for (uintptr_t line = first; line < last; line += 64)
    _mm_prefetch(reinterpret_cast<const char*>(line), _MM_HINT_T1);
}

// How far ahead of the position being read the decode paths prefetch blocks.
inline constexpr int64_t kPrefetchPositions = 256;

// Keeps the blocks of pages up to `ahead` pages past the one being read requested from memory,
// each exactly once, for a pass over pages [first_page, last_page]: the whole block, or (a value
// pass over some of the dimensions, values_of) only the lines of those dimensions in every row
// and the block's scales. A pass over part of the dimensions that prefetched whole rows read the
// rest from memory for nothing: the other dimensions' pass (another thread's part of a decode, or
// the next 64 of a wide head, after the rows have left L2) reads them again.
class BlockPrefetcher {
 public:
  BlockPrefetcher(const uint8_t* base, const PagedKv& kv, int64_t block_bytes, int64_t last_page,
                  int64_t ahead)
      : base_(base), kv_(kv), block_bytes_(block_bytes), end_(last_page + 1), ahead_(ahead) {}
  // For a pass over value dimensions [d0, d0 + width) of rows of DV elements in `format`.
  static BlockPrefetcher values_of(const PagedKv& kv, KvFormat format, int64_t DV, int64_t d0,
                                   int64_t width, int64_t last_page, int64_t ahead) {
    BlockPrefetcher share(kv.values, kv, kv_value_block_bytes(format, DV, kv.page_size), last_page,
                          ahead);
    const int64_t bits = kv_format_bits(format);
    if (width < DV) {
      share.row_bytes_ = DV * bits / 8;
      share.row_begin_ = d0 * bits / 8;
      share.row_end_ = ((d0 + width) * bits + 7) / 8;
      share.scales_begin_ = kv_data_bytes(format, DV, kv.page_size);
    }
    return share;
  }
  // Call with the page about to be read; pages are visited in increasing order.
  void at(int64_t page) {
    const int64_t to = std::min(end_, page + 1 + ahead_);
    if (next_ < page) next_ = page;
    if (next_ >= to) return;
    for (int64_t p = next_; p < to; ++p) {
      const uint8_t* block = base_ + kv_.page_table[p] * kv_.page_stride;
      if (row_bytes_ == 0) {
        prefetch_bytes(block, 0, block_bytes_);
        continue;
      }
      for (int64_t r = 0; r < kv_.page_size; ++r)
        prefetch_bytes(block, r * row_bytes_ + row_begin_, r * row_bytes_ + row_end_);
      if (scales_begin_ < block_bytes_) prefetch_bytes(block, scales_begin_, block_bytes_);
    }
    next_ = to;
  }

 private:
  const uint8_t* base_;
  const PagedKv& kv_;
  int64_t block_bytes_;
  int64_t end_;
  int64_t ahead_;
  int64_t next_ = 0;
  // A share of the dimensions: each row's bytes [row_begin_, row_end_), then the scales from
  // scales_begin_ to the block's end. row_bytes_ == 0: the whole block.
  int64_t row_bytes_ = 0, row_begin_ = 0, row_end_ = 0, scales_begin_ = 0;
};

// The decode paths' walk over the value rows of [first, last]: add(p, row) for each, in the
// format's order (paged_attention.h: increasing, or pair-swapped for the bf16 order, 2j + 1
// before 2j), each page's blocks prefetched as its first row is reached.
template <KvFormat F, typename Add>
inline void for_each_value_row(const PagedKv& kv, BlockPrefetcher& ahead, int64_t first,
                               int64_t last, Add add) {
  ValueRowCursor row(kv, first);
  for (int64_t p = first; p <= last; ++p, row.next()) {
    if (row.slot() == 0 || p == first) ahead.at(row.page());
    if (attends_in_bf16(F) && p % 2 == 0 && p < last) {  // the pair p, p + 1: p + 1 first
      ValueRowCursor odd = row;
      odd.next();
      if (odd.slot() == 0) ahead.at(odd.page());
      add(p + 1, odd);
      add(p, row);
      ++p;
      row.next();
      continue;
    }
    add(p, row);
  }
}

// The elements of a key row sharing a scale: all of them for the float types (scale unused).
template <KvFormat F>
inline int64_t group_of(int64_t dim) {
  if constexpr (F == KvFormat::kInt8 || F == KvFormat::kInt4) return kv_key_group(F, dim);
  return dim;
}

// Index of the scale of value element d within its row's scales, and the scales per row, for
// the int formats: shifts by the group's constant size, no division (the loaders call them per
// row and 8 or 16 elements, and a 64-bit division there cost more than the conversion).
template <KvFormat F>
inline int64_t value_scale_column(int64_t dim, int64_t d) {
  if constexpr (F == KvFormat::kInt4)
    return dim % kKvInt4ValueGroup == 0 ? d / kKvInt4ValueGroup : d / kKvGroup;
  return dim % kKvGroup == 0 ? d / kKvGroup : 0;
}
template <KvFormat F>
inline int64_t value_scales_per_row(int64_t dim) {
  if constexpr (F == KvFormat::kInt4)
    return dim % kKvInt4ValueGroup == 0 ? dim / kKvInt4ValueGroup : dim / kKvGroup;
  return dim % kKvGroup == 0 ? dim / kKvGroup : 1;
}

inline __m256 fp16x8(const void* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(static_cast<const __m128i*>(p)));
}

// The int4 codebook (kKvInt4Levels) as 16 bytes, for a byte shuffle to look codes up.
inline __m128i int4_levels() {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(kKvInt4Levels));
}

// The levels of the 2n codes of n bytes (low nibble first) as int8, bytes [0, 2n) of the result.
inline __m128i int4_level_bytes(__m128i b) {
  const __m128i mask = _mm_set1_epi8(0x0f);
  const __m128i codes =
      _mm_unpacklo_epi8(_mm_and_si128(b, mask), _mm_and_si128(_mm_srli_epi16(b, 4), mask));
  return _mm_shuffle_epi8(int4_levels(), codes);
}

// 8 int4 codes from 4 bytes (low nibble first) as their levels, in fp32.
inline __m256 int4x8(const uint8_t* p) {
  int32_t word;
  __builtin_memcpy(&word, p, 4);
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(int4_level_bytes(_mm_cvtsi32_si128(word))));
}

inline __m256 int8x8(const uint8_t* p) {
  return _mm256_cvtepi32_ps(
      _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}

// Scales of group g of key slots [slot, slot + 8) (a multiple of 8), as lanes. int4: the
// sub-scales times the slots' units (kv_int4.h: float(sub) * (fp32(master) * 2^-7)).
template <KvFormat F>
inline __m256 key_scales8(const uint8_t* block, int64_t dim, int64_t page_size, int64_t slot,
                          int64_t g) {
  if constexpr (F == KvFormat::kInt8) {
    const uint8_t* scales = block + kv_data_bytes(F, dim, page_size);
    return fp16x8(scales + 2 * (g * page_size + slot));
  }
  if constexpr (F == KvFormat::kInt4) {
    const __m256 unit = _mm256_mul_ps(
        fp16x8(block + kv_int4_masters_offset(dim, page_size) + 2 * slot), _mm256_set1_ps(0x1p-7f));
    return _mm256_mul_ps(int8x8(block + kv_int4_subs_offset(dim, page_size) + g * page_size + slot),
                         unit);
  }
  return _mm256_setzero_ps();
}

// Element e of key slots [slot, slot + 8) (a multiple of 8), dequantized with `scale` (the lanes
// of key_scales8 for e's group).
template <KvFormat F>
inline __m256 keys8(const uint8_t* block, int64_t page_size, int64_t slot, int64_t e,
                    __m256 scale) {
  const int64_t i = e * page_size + slot;
  if constexpr (F == KvFormat::kF16) return fp16x8(block + 2 * i);
  if constexpr (F == KvFormat::kBF16)
    return _mm256_castsi256_ps(_mm256_slli_epi32(
        _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 2 * i))),
        16));
  if constexpr (F == KvFormat::kF32)
    return _mm256_loadu_ps(reinterpret_cast<const float*>(block) + i);
  if constexpr (F == KvFormat::kInt8) return _mm256_mul_ps(int8x8(block + i), scale);
  if constexpr (F == KvFormat::kInt4) return _mm256_mul_ps(int4x8(block + i / 2), scale);
  (void)scale;
  return _mm256_setzero_ps();
}

// Elements [d, d + width) of value slot `slot` (width <= 8, the rest 0), dequantized. A full
// width needs d % 8 == 0, so that the 8 elements share one scale group.
template <KvFormat F>
inline __m256 values8(const uint8_t* block, int64_t dim, int64_t page_size, int64_t slot, int64_t d,
                      int64_t width) {
  if (width < 8) {
    alignas(32) float tmp[8] = {};
    for (int64_t u = 0; u < width; ++u)
      tmp[u] = kv_load_value(F, block, dim, page_size, slot, d + u);
    return _mm256_load_ps(tmp);
  }
  const int64_t i = slot * dim + d;
  if constexpr (F == KvFormat::kF16) return fp16x8(block + 2 * i);
  if constexpr (F == KvFormat::kBF16)
    return _mm256_castsi256_ps(_mm256_slli_epi32(
        _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 2 * i))),
        16));
  if constexpr (F == KvFormat::kF32)
    return _mm256_loadu_ps(reinterpret_cast<const float*>(block) + i);
  if constexpr (F == KvFormat::kInt8 || F == KvFormat::kInt4) {
    const int64_t scale_index = slot * value_scales_per_row<F>(dim) + value_scale_column<F>(dim, d);
    uint16_t h;
    __builtin_memcpy(&h, block + kv_data_bytes(F, dim, page_size) + 2 * scale_index, 2);
    const __m256 scale = _mm256_set1_ps(_cvtsh_ss(h));
    if constexpr (F == KvFormat::kInt8) return _mm256_mul_ps(int8x8(block + i), scale);
    return _mm256_mul_ps(int4x8(block + i / 2), scale);
  }
  return _mm256_setzero_ps();
}

// Elements e of keys [pb, pb + 8) (pb a multiple of 8) for e in [0, D), group by group: calls
// use(e, lanes) in increasing e (the query lanes of both ISAs convert a key block with it).
template <KvFormat F, typename Use>
inline void for_each_key_row8(const PagedKv& kv, int64_t D, int64_t pb, Use use) {
  const uint8_t* block = block_of(kv.keys, kv.page_stride, kv.page_table, kv.page_size, pb);
  const int64_t slot = pb % kv.page_size, group = group_of<F>(D);
  for (int64_t g0 = 0; g0 < D; g0 += group) {
    const __m256 scale = key_scales8<F>(block, D, kv.page_size, slot, g0 / group);
    for (int64_t e = g0; e < g0 + group; ++e) use(e, keys8<F>(block, kv.page_size, slot, e, scale));
  }
}

}  // namespace
}  // namespace drift::kernels::paged_kv
