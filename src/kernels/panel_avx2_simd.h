// Internal: the AVX2 panel kernels' building blocks (panel_avx2.cc, panel_avx2_decode.h): loads,
// the rows-by-lanes products of unpacked codes and a token's broadcast activations, the 32-element
// formats' unpacking, and the K-quants' scale and offset arithmetic. Include only from a
// translation unit compiled for AVX2; everything here has internal linkage.
#pragma once

#include <immintrin.h>

#include <cstring>

#include "kernels/lowbit_quants.h"
#include "kernels/panel.h"
#include "kernels/panel_layout.h"

namespace drift::kernels::avx2 {
namespace {

__m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
__m256 load_fp16x8(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
__m256i broadcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}
// Unsigned codes x signed activations, four products per int32 lane.
__m256i dot4(__m256i codes, __m256i a) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(codes, a), _mm256_set1_epi16(1));
}
// Signed weights x signed activations.
__m256i dot4_signed(__m256i w, __m256i a) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(a, w)),
                           _mm256_set1_epi16(1));
}

template <class ABlock, class Sums>
struct TokenRows {
  const ABlock* a;
  const Sums* s;
};

// Stores 8 lanes, of which `valid` (< 8 only in a matrix's last panel) are real rows.
void store8(float* y, __m256 v, int64_t valid) {
  if (valid >= 8) return _mm256_storeu_ps(y, v);
  alignas(32) float tmp[8];
  _mm256_store_ps(tmp, v);
  if (valid > 0) std::memcpy(y, tmp, static_cast<size_t>(valid) * sizeof(float));
}

// Groups g and g + 4 of 8 rows (half h) of a nibble-packed block.
void unpack_nibble_pair(const uint8_t (*qs)[64], int g, int h, __m256i& lo, __m256i& hi) {
  const __m256i m4 = _mm256_set1_epi8(15);
  const __m256i v = load256(qs[g] + 32 * h);
  lo = _mm256_and_si256(v, m4);
  hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
}

// Groups 0-7 of 8 rows (half h) of a nibble-packed block.
void unpack_nibbles(const uint8_t (*qs)[64], int h, __m256i (&w)[8]) {
  for (int g = 0; g < 4; ++g) unpack_nibble_pair(qs, g, h, w[g], w[g + 4]);
}

// Group l of 8 rows (half h) of a nibble-packed block: the low nibbles of qs[l] for l < 4, the high
// ones of qs[l - 4] after.
__m256i unpack_nibble_group(const uint8_t (*qs)[64], int l, int h) {
  const __m256i v = load256(qs[l % 4] + 32 * h);
  return _mm256_and_si256(l < 4 ? v : _mm256_srli_epi16(v, 4), _mm256_set1_epi8(15));
}

// Sub-block scales of 8 rows as an int16 pair (s, s) in each int32 lane: one vpmaddwd of a lane's
// two int16 partial sums by it is s * P, with no vpmulld (two uops, ten cycles' latency).
__m256i scale_pairs(__m128i scales16) {
  return _mm256_set_m128i(_mm_unpackhi_epi16(scales16, scales16),
                          _mm_unpacklo_epi16(scales16, scales16));
}
__m256i scale_pairs_u8(const uint8_t* sc) {
  return scale_pairs(_mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sc))));
}
__m256i scale_pairs_i8(const int8_t* sc) {
  return scale_pairs(_mm_cvtepi8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sc))));
}

// ---- 32-element formats.

struct Q4_0 {
  using Tile = TileQ4_0;
  using ABlock = BlockQ8_0;
  static constexpr bool kHasMin = false;
  static constexpr bool kOffset = true;  // codes q = w + 8: subtract 8 * sum(a)
  static constexpr int kOffsetShift = 3;
  static constexpr int kInt16Groups = 8;  // see block_product
  static void unpack(const Tile& t, int h, __m256i (&w)[8]) { unpack_nibbles(t.qs, h, w); }
  static void unpack_pair(const Tile& t, int g, int h, __m256i& lo, __m256i& hi) {
    unpack_nibble_pair(t.qs, g, h, lo, hi);
  }
  static __m256i group(__m256i w, __m256i a) { return dot4(w, a); }
};
struct Q4_1 {
  using Tile = TileQ4_1;
  using ABlock = BlockQ8_1;
  static constexpr bool kHasMin = true;
  static constexpr bool kOffset = false;
  static constexpr int kOffsetShift = 0;
  static constexpr int kInt16Groups = 8;  // see block_product
  static void unpack(const Tile& t, int h, __m256i (&w)[8]) { unpack_nibbles(t.qs, h, w); }
  static void unpack_pair(const Tile& t, int g, int h, __m256i& lo, __m256i& hi) {
    unpack_nibble_pair(t.qs, g, h, lo, hi);
  }
  static __m256i group(__m256i w, __m256i a) { return dot4(w, a); }
};
// The fifth bits of group l for rows [8h, 8h + 8) as 0x10 bytes, added to w: bits 32h .. 32h + 31
// of qh[l], bit j for byte j.
template <class Tile>
__m256i add_fifth_bits_of(const Tile& t, int h, int l, __m256i w) {
  // Byte j takes the byte of the 32-bit word holding bit j, then tests bit j % 8 of it.
  const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2,
                                          2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
  const __m256i select = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  const auto bits32 = static_cast<int32_t>(t.qh[l] >> (32 * h));
  const __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(bits32), spread);
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(bytes, select), select);
  return _mm256_or_si256(w, _mm256_and_si256(set, _mm256_set1_epi8(0x10)));
}
template <class Tile>
void add_fifth_bits(const Tile& t, int h, __m256i (&w)[8]) {
  for (int l = 0; l < 8; ++l) w[l] = add_fifth_bits_of(t, h, l, w[l]);
}

struct Q5_0 {
  using Tile = TileQ5_0;
  using ABlock = BlockQ8_0;
  static constexpr bool kHasMin = false;
  static constexpr bool kOffset = true;  // codes q = w + 16: subtract 16 * sum(a)
  static constexpr int kOffsetShift = 4;
  static constexpr int kInt16Groups = 4;  // see block_product
  static void unpack(const Tile& t, int h, __m256i (&w)[8]) {
    unpack_nibbles(t.qs, h, w);
    add_fifth_bits(t, h, w);
  }
  static __m256i group(__m256i w, __m256i a) { return dot4(w, a); }
};
struct Q5_1 {
  using Tile = TileQ5_1;
  using ABlock = BlockQ8_1;
  static constexpr bool kHasMin = true;
  static constexpr bool kOffset = false;
  static constexpr int kOffsetShift = 0;
  static constexpr int kInt16Groups = 4;  // see block_product
  static void unpack(const Tile& t, int h, __m256i (&w)[8]) {
    unpack_nibbles(t.qs, h, w);
    add_fifth_bits(t, h, w);
  }
  static __m256i group(__m256i w, __m256i a) { return dot4(w, a); }
};
struct Q8_0 {
  using Tile = TileQ8_0;
  using ABlock = BlockQ8_0;
  static constexpr bool kHasMin = false;
  static constexpr bool kOffset = false;  // the signed weights are multiplied directly
  static constexpr int kOffsetShift = 0;
  static constexpr int kInt16Groups = 1;  // see block_product
  static void unpack(const Tile& t, int h, __m256i (&w)[8]) {
    const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
    for (int l = 0; l < 8; ++l) w[l] = _mm256_xor_si256(load256(t.qs[l] + 32 * h), flip);
  }
  static __m256i unpack_group(const Tile& t, int l, int h) {
    return _mm256_xor_si256(load256(t.qs[l] + 32 * h), _mm256_set1_epi8(static_cast<char>(0x80)));
  }
  static __m256i group(__m256i w, __m256i a) { return dot4_signed(w, a); }
};

// IQ4_NL: the codes' signed codebook values, multiplied as Q8_0's weights are.
struct IQ4_NL {
  using Tile = TileIQ4_NL;
  using ABlock = BlockQ8_0;
  static constexpr bool kHasMin = false;
  static constexpr bool kOffset = false;
  static constexpr int kOffsetShift = 0;
  static constexpr int kInt16Groups = 1;  // see block_product
  static void unpack(const Tile& t, int h, __m256i (&w)[8]) {
    unpack_nibbles(t.qs, h, w);
    const __m256i table =
        _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIQ4Values)));
    for (int l = 0; l < 8; ++l) w[l] = _mm256_shuffle_epi8(table, w[l]);
  }
  static __m256i unpack_group(const Tile& t, int l, int h) {
    const __m256i table =
        _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIQ4Values)));
    return _mm256_shuffle_epi8(table, unpack_nibble_group(t.qs, l, h));
  }
  static __m256i group(__m256i w, __m256i a) { return dot4_signed(w, a); }
};

// MXFP4: the codes' doubled E2M1 values plus 16 (4..28), multiplied as unsigned codes.
struct MXFP4 {
  using Tile = TileMXFP4;
  using ABlock = BlockQ8_0;
  static constexpr bool kHasMin = false;
  static constexpr bool kOffset = true;  // codes v + 16: subtract 16 * sum(a)
  static constexpr int kOffsetShift = 4;
  static constexpr int kInt16Groups = 4;  // see block_product
  static void unpack(const Tile& t, int h, __m256i (&w)[8]) {
    unpack_nibbles(t.qs, h, w);
    const __m256i table = _mm256_broadcastsi128_si256(_mm_add_epi8(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(kMXFP4Values)), _mm_set1_epi8(16)));
    for (int l = 0; l < 8; ++l) w[l] = _mm256_shuffle_epi8(table, w[l]);
  }
  static __m256i group(__m256i w, __m256i a) { return dot4(w, a); }
};

// A block's P for 8 rows: the 8 groups' products of rows-by-lanes weights w and the token's 32
// activations aq, one int32 lane per row. Unsigned codes small enough for it add F::kInt16Groups
// groups' vpmaddubsw pairs in int16 before one vpmaddwd widens them: a pair is at most
// 2 * max_code * 127, so 8 groups of 4-bit codes (<= 30480) and 4 of 5-bit codes or MXFP4's
// (<= 31496) stay below 2^15 and the sums stay exact. Signed weights (kInt16Groups 1) widen each
// group: a pair of |w| <= 127 is already up to 32258.
template <class F>
__m256i block_product(const __m256i (&w)[8], const int8_t* aq) {
  constexpr int kRun = F::kInt16Groups;
  if constexpr (kRun == 1) {
    __m256i p = F::group(w[0], broadcast4(aq));
    for (int l = 1; l < 8; ++l) p = _mm256_add_epi32(p, F::group(w[l], broadcast4(aq + 4 * l)));
    return p;
  } else {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i p = _mm256_setzero_si256();
    for (int l0 = 0; l0 < 8; l0 += kRun) {
      __m256i s = _mm256_maddubs_epi16(w[l0], broadcast4(aq + 4 * l0));
      for (int l = l0 + 1; l < l0 + kRun; ++l)
        s = _mm256_add_epi16(s, _mm256_maddubs_epi16(w[l], broadcast4(aq + 4 * l)));
      p = _mm256_add_epi32(p, _mm256_madd_epi16(s, ones));
    }
    return p;
  }
}

// fp32(d_w) of rows [8h, 8h + 8): the fp16 scales, or MXFP4's 2^(e - 128) built as mxfp4_scale
// builds it: (e - 1) << 23, and for e < 2 the subnormal bit 0x00200000 << e.
template <class Tile>
__m256 weight_scales(const Tile& t, int h) {
  return load_fp16x8(t.d + 8 * h);
}
__m256 weight_scales(const TileMXFP4& t, int h) {
  const __m256i e =
      _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(t.e + 8 * h)));
  const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
  const __m256i subnormal = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);
  const __m256i small = _mm256_cmpgt_epi32(_mm256_set1_epi32(2), e);
  return _mm256_castsi256_ps(_mm256_blendv_epi8(normal, subnormal, small));
}

// The unsigned codes' offset o = 2^kShift (Q6_K's 32, Q3_K's 4), taken back once per super-block:
// l_sum -= o * sum over the 16 sub-blocks j of sc[j] * bsums[j], the signed scales of sub-blocks
// 2i and 2i + 1 as one int16 pair per row lane.
template <int kShift, int kT>
void subtract_code_offsets(const int8_t (*sc)[16], int h, int64_t b,
                           const TokenRows<BlockQ8_K, PanelSumsK> (&tok)[kT],
                           __m256i (&l_sum)[kT]) {
  __m256i offset[kT];
  for (int t = 0; t < kT; ++t) offset[t] = _mm256_setzero_si256();
  for (int i = 0; i < 8; ++i) {
    const __m128i s0 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(sc[2 * i] + 8 * h));
    const __m128i s1 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(sc[2 * i + 1] + 8 * h));
    const __m256i pairs = _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(s0, s1));
    for (int t = 0; t < kT; ++t) {
      int32_t bsum_pair;
      std::memcpy(&bsum_pair, tok[t].a[b].bsums + 2 * i, 4);
      offset[t] =
          _mm256_add_epi32(offset[t], _mm256_madd_epi16(pairs, _mm256_set1_epi32(bsum_pair)));
    }
  }
  for (int t = 0; t < kT; ++t)
    l_sum[t] = _mm256_sub_epi32(l_sum[t], _mm256_slli_epi32(offset[t], kShift));
}

// The int16 sum of a 16-element sub-block's four groups of codes <= 7 (Q2_K, Q3_K):
// 4 * 2 * 7 * 127 < 2^15.
__m256i sub_block16_sum16(const __m256i (&w)[4], const int8_t* aq) {
  return _mm256_add_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(w[0], broadcast4(aq)),
                                           _mm256_maddubs_epi16(w[1], broadcast4(aq + 4))),
                          _mm256_add_epi16(_mm256_maddubs_epi16(w[2], broadcast4(aq + 8)),
                                           _mm256_maddubs_epi16(w[3], broadcast4(aq + 12))));
}

// One 8-row half of a Q4_K super-block after its codes: the rows' scales and mins, then each
// token's float sums (Q4KHalf::add), in the order of the scalar reference.
struct Q4KHalf {
  __m256 dw, dmw;
  __m256i mn[4];

  Q4KHalf(const TileQ4_K& tile, int h)
      : dw(load_fp16x8(tile.d + 8 * h)), dmw(load_fp16x8(tile.dmin + 8 * h)) {
    for (int i = 0; i < 4; ++i)
      mn[i] = _mm256_cvtepu8_epi16(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(tile.mn[i][8 * h])));
  }

  // acc += d * da * l_sum; summ += dmin * da * (mins x the token's sub-block sums).
  void add(const PanelSumsK& s, __m256i l_sum, __m256& acc, __m256& summ) const {
    __m256i m_sum = _mm256_setzero_si256();
    for (int i = 0; i < 4; ++i) {
      int32_t pair;
      std::memcpy(&pair, s.bsums32 + 2 * i, 4);
      m_sum = _mm256_add_epi32(m_sum, _mm256_madd_epi16(mn[i], _mm256_set1_epi32(pair)));
    }
    const __m256 da = _mm256_set1_ps(s.d);
    acc = _mm256_fmadd_ps(_mm256_mul_ps(dw, da), _mm256_cvtepi32_ps(l_sum), acc);
    summ = _mm256_fmadd_ps(_mm256_mul_ps(dmw, da), _mm256_cvtepi32_ps(m_sum), summ);
  }
};

}  // namespace
}  // namespace drift::kernels::avx2
