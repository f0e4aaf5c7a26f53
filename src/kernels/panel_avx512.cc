// AVX-512 VNNI panel kernels: the canonical order of panel.h with the 16 rows of a panel in the
// 16 int32 lanes of a register. Per block, each group of 4 elements is one vpdpbusd of the
// unsigned weight codes of 16 rows with the token's 4 activation bytes broadcast; the block's
// integer sum P then takes one convert, one scale multiply and one fma for 16 rows. A tile of up
// to kT tokens shares each unpacked block (the weights are read and unpacked once per tile).
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/lowbit_quants.h"
#include "kernels/panel.h"
#include "kernels/panel_dispatch.h"
#include "kernels/panel_layout.h"
#include "kernels/panel_prefetch.h"

namespace drift::kernels::avx512 {
namespace {

__m512i load512(const void* p) { return _mm512_loadu_si512(p); }
__m512 load_fp16x16(const uint16_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
__m512i broadcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

// Tokens of one tile: activation blocks and their panel sums.
template <class ABlock, class Sums>
struct TokenRows {
  const ABlock* a;
  const Sums* s;
};

__mmask16 row_mask(int64_t valid) {
  return valid >= 16 ? __mmask16{0xffff} : static_cast<__mmask16>((1u << valid) - 1);
}

// ---- 32-element formats.

// Groups g and g + 4 of a nibble-packed block are the low and high nibbles of byte run g.
void unpack_nibbles(const uint8_t (*qs)[64], __m512i (&w)[8]) {
  const __m512i m4 = _mm512_set1_epi8(15);
#pragma GCC unroll 4
  for (int g = 0; g < 4; ++g) {
    const __m512i v = load512(qs[g]);
    w[g] = _mm512_and_si512(v, m4);
    w[g + 4] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
  }
}

struct Q4_0 {
  using Tile = TileQ4_0;
  using ABlock = BlockQ8_0;
  static constexpr bool kHasMin = false;
  static constexpr int kOffsetShift = 3;  // codes q = w + 8
  static void unpack(const Tile& t, __m512i (&w)[8]) { unpack_nibbles(t.qs, w); }
};
struct Q4_1 {
  using Tile = TileQ4_1;
  using ABlock = BlockQ8_1;
  static constexpr bool kHasMin = true;
  static constexpr int kOffsetShift = -1;  // codes are the quants
  static void unpack(const Tile& t, __m512i (&w)[8]) { unpack_nibbles(t.qs, w); }
};
// The fifth bits of group l as 0x10 bytes: bit 4r + i of qh[l] is byte 4r + i's.
template <class Tile>
void add_fifth_bits(const Tile& t, __m512i (&w)[8]) {
  const __m512i bit = _mm512_set1_epi8(0x10);
  for (int l = 0; l < 8; ++l) w[l] = _mm512_or_si512(w[l], _mm512_maskz_mov_epi8(t.qh[l], bit));
}

struct Q5_0 {
  using Tile = TileQ5_0;
  using ABlock = BlockQ8_0;
  static constexpr bool kHasMin = false;
  static constexpr int kOffsetShift = 4;  // codes q = w + 16
  static void unpack(const Tile& t, __m512i (&w)[8]) {
    unpack_nibbles(t.qs, w);
    add_fifth_bits(t, w);
  }
};
struct Q5_1 {
  using Tile = TileQ5_1;
  using ABlock = BlockQ8_1;
  static constexpr bool kHasMin = true;
  static constexpr int kOffsetShift = -1;
  static void unpack(const Tile& t, __m512i (&w)[8]) {
    unpack_nibbles(t.qs, w);
    add_fifth_bits(t, w);
  }
};
struct Q8_0 {
  using Tile = TileQ8_0;
  using ABlock = BlockQ8_0;
  static constexpr bool kHasMin = false;
  static constexpr int kOffsetShift = 7;  // codes w + 128
  static void unpack(const Tile& t, __m512i (&w)[8]) {
    for (int l = 0; l < 8; ++l) w[l] = load512(t.qs[l]);
  }
};

// IQ4_NL: the codes' codebook values plus 128 (1..241, unsigned for vpdpbusd).
struct IQ4_NL {
  using Tile = TileIQ4_NL;
  using ABlock = BlockQ8_0;
  static constexpr bool kHasMin = false;
  static constexpr int kOffsetShift = 7;  // codes v + 128
  static void unpack(const Tile& t, __m512i (&w)[8]) {
    unpack_nibbles(t.qs, w);
    const __m512i table = _mm512_broadcast_i32x4(_mm_add_epi8(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIQ4Values)), _mm_set1_epi8(-128)));
    for (int l = 0; l < 8; ++l) w[l] = _mm512_shuffle_epi8(table, w[l]);
  }
};

// MXFP4: the codes' doubled E2M1 values plus 16 (4..28, unsigned for vpdpbusd).
struct MXFP4 {
  using Tile = TileMXFP4;
  using ABlock = BlockQ8_0;
  static constexpr bool kHasMin = false;
  static constexpr int kOffsetShift = 4;  // codes v + 16
  static void unpack(const Tile& t, __m512i (&w)[8]) {
    unpack_nibbles(t.qs, w);
    const __m512i table = _mm512_broadcast_i32x4(_mm_add_epi8(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(kMXFP4Values)), _mm_set1_epi8(16)));
    for (int l = 0; l < 8; ++l) w[l] = _mm512_shuffle_epi8(table, w[l]);
  }
};

// fp32(d_w) of the 16 rows: the fp16 scales, or MXFP4's 2^(e - 128) (mxfp4_scale), which
// vscalefps computes exactly for every byte, the subnormals of e < 2 and e = 255's 2^127 included.
template <class Tile>
__m512 weight_scales(const Tile& t) {
  return load_fp16x16(t.d);
}
__m512 weight_scales(const TileMXFP4& t) {
  const __m512i e = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(t.e)));
  return _mm512_scalef_ps(_mm512_set1_ps(1.0f),
                          _mm512_cvtepi32_ps(_mm512_sub_epi32(e, _mm512_set1_epi32(128))));
}

template <class F, int kT>
void tile32(const typename F::Tile* tiles, int64_t nb,
            const TokenRows<typename F::ABlock, PanelSums32> (&tok)[kT], float* y, int64_t y_stride,
            __mmask16 mask, bool stream) {
  __m512 acc[kT], summ[kT];
#pragma GCC unroll 16
  for (int t = 0; t < kT; ++t) acc[t] = summ[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const typename F::Tile& tile = tiles[b];
    if (stream) prefetch_ahead(&tile, 0, 1);  // weights from memory (panel_prefetch.h)
    __m512i w[8];
    F::unpack(tile, w);
    const __m512 dw = weight_scales(tile);
#pragma GCC unroll 16
    for (int t = 0; t < kT; ++t) {
      const int8_t* aq = tok[t].a[b].qs;
      __m512i p0 = _mm512_setzero_si512(), p1 = _mm512_setzero_si512();
#pragma GCC unroll 8
      for (int l = 0; l < 8; l += 2) {
        p0 = _mm512_dpbusd_epi32(p0, w[l], broadcast4(aq + 4 * l));
        p1 = _mm512_dpbusd_epi32(p1, w[l + 1], broadcast4(aq + 4 * l + 4));
      }
      __m512i p = _mm512_add_epi32(p0, p1);
      const PanelSums32& s = tok[t].s[b];
      if constexpr (F::kOffsetShift >= 0)
        p = _mm512_sub_epi32(p, _mm512_set1_epi32(s.sum << F::kOffsetShift));
      const __m512 scale = _mm512_mul_ps(dw, _mm512_set1_ps(s.d));
      acc[t] = _mm512_fmadd_ps(scale, _mm512_cvtepi32_ps(p), acc[t]);
      if constexpr (F::kHasMin)
        summ[t] = _mm512_fmadd_ps(load_fp16x16(tile.m), _mm512_set1_ps(s.s), summ[t]);
    }
  }
#pragma GCC unroll 16
  for (int t = 0; t < kT; ++t) {
    const __m512 out = F::kHasMin ? _mm512_add_ps(acc[t], summ[t]) : acc[t];
    _mm512_mask_storeu_ps(y + t * y_stride, mask, out);
  }
}

// ---- K-quants.

template <int kT>
void tile_q4_k(const TileQ4_K* tiles, int64_t nb, const TokenRows<BlockQ8_K, PanelSumsK> (&tok)[kT],
               float* y, int64_t y_stride, __mmask16 mask, bool stream) {
  __m512 acc[kT], summ[kT];
#pragma GCC unroll 16
  for (int t = 0; t < kT; ++t) acc[t] = summ[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const TileQ4_K& tile = tiles[b];
    __m512i l_sum[kT];
#pragma GCC unroll 16
    for (int t = 0; t < kT; ++t) l_sum[t] = _mm512_setzero_si512();
    for (int j = 0; j < 8; ++j) {
      if (stream) prefetch_ahead(&tile, j, 8);  // weights from memory (panel_prefetch.h)
      __m512i w[8];
      unpack_nibbles(tile.qs[j], w);
      const __m512i sc =
          _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(tile.sc[j])));
#pragma GCC unroll 16
      for (int t = 0; t < kT; ++t) {
        const int8_t* aq = tok[t].a[b].qs + 32 * j;
        __m512i p0 = _mm512_setzero_si512(), p1 = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int l = 0; l < 8; l += 2) {
          p0 = _mm512_dpbusd_epi32(p0, w[l], broadcast4(aq + 4 * l));
          p1 = _mm512_dpbusd_epi32(p1, w[l + 1], broadcast4(aq + 4 * l + 4));
        }
        l_sum[t] = _mm512_add_epi32(l_sum[t], _mm512_mullo_epi32(_mm512_add_epi32(p0, p1), sc));
      }
    }
    const __m512 dw = load_fp16x16(tile.d);
    const __m512 dmw = load_fp16x16(tile.dmin);
    __m512i mn[4];  // int16 pairs (mn[2i], mn[2i + 1]) per row lane
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i)
      mn[i] =
          _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(tile.mn[i])));
#pragma GCC unroll 16
    for (int t = 0; t < kT; ++t) {
      const PanelSumsK& s = tok[t].s[b];
      __m512i m_sum = _mm512_setzero_si512();
#pragma GCC unroll 4
      for (int i = 0; i < 4; ++i) {
        int32_t pair;
        std::memcpy(&pair, s.bsums32 + 2 * i, 4);
        m_sum = _mm512_add_epi32(m_sum, _mm512_madd_epi16(mn[i], _mm512_set1_epi32(pair)));
      }
      const __m512 da = _mm512_set1_ps(s.d);
      acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(dw, da), _mm512_cvtepi32_ps(l_sum[t]), acc[t]);
      summ[t] = _mm512_fmadd_ps(_mm512_mul_ps(dmw, da), _mm512_cvtepi32_ps(m_sum), summ[t]);
    }
  }
#pragma GCC unroll 16
  for (int t = 0; t < kT; ++t)
    _mm512_mask_storeu_ps(y + t * y_stride, mask, _mm512_sub_ps(acc[t], summ[t]));
}

template <int kT>
void tile_q6_k(const TileQ6_K* tiles, int64_t nb, const TokenRows<BlockQ8_K, PanelSumsK> (&tok)[kT],
               float* y, int64_t y_stride, __mmask16 mask, bool stream) {
  __m512 acc[kT];
#pragma GCC unroll 16
  for (int t = 0; t < kT; ++t) acc[t] = _mm512_setzero_ps();
  const __m512i m4 = _mm512_set1_epi8(15);
  for (int64_t b = 0; b < nb; ++b) {
    const TileQ6_K& tile = tiles[b];
    __m512i l_sum[kT];
#pragma GCC unroll 16
    for (int t = 0; t < kT; ++t) l_sum[t] = _mm512_setzero_si512();
    for (int j = 0; j < 16; ++j) {
      if (stream) prefetch_ahead(&tile, j, 16);  // weights from memory (panel_prefetch.h)
      const TileQ6_K::Sub& sub = tile.sub[j];
      const __m512i lo0 = load512(sub.lo[0]), lo1 = load512(sub.lo[1]), hi = load512(sub.hi);
      __m512i w[4];
      w[0] = _mm512_or_si512(_mm512_and_si512(lo0, m4),
                             _mm512_slli_epi16(_mm512_and_si512(hi, _mm512_set1_epi8(0x03)), 4));
      w[1] = _mm512_or_si512(_mm512_and_si512(lo1, m4),
                             _mm512_slli_epi16(_mm512_and_si512(hi, _mm512_set1_epi8(0x0c)), 2));
      w[2] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(lo0, 4), m4),
                             _mm512_and_si512(hi, _mm512_set1_epi8(0x30)));
      w[3] = _mm512_or_si512(
          _mm512_and_si512(_mm512_srli_epi16(lo1, 4), m4),
          _mm512_srli_epi16(_mm512_and_si512(hi, _mm512_set1_epi8(static_cast<char>(0xc0))), 2));
      const __m512i sc =
          _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(tile.sc[j])));
#pragma GCC unroll 16
      for (int t = 0; t < kT; ++t) {
        const int8_t* aq = tok[t].a[b].qs + 16 * j;
        __m512i p0 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w[0], broadcast4(aq));
        __m512i p1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w[1], broadcast4(aq + 4));
        p0 = _mm512_dpbusd_epi32(p0, w[2], broadcast4(aq + 8));
        p1 = _mm512_dpbusd_epi32(p1, w[3], broadcast4(aq + 12));
        const __m512i p =
            _mm512_sub_epi32(_mm512_add_epi32(p0, p1), _mm512_set1_epi32(tok[t].s[b].offsets6[j]));
        l_sum[t] = _mm512_add_epi32(l_sum[t], _mm512_mullo_epi32(p, sc));
      }
    }
    const __m512 dw = load_fp16x16(tile.d);
#pragma GCC unroll 16
    for (int t = 0; t < kT; ++t)
      acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_set1_ps(tok[t].s[b].d)),
                               _mm512_cvtepi32_ps(l_sum[t]), acc[t]);
  }
#pragma GCC unroll 16
  for (int t = 0; t < kT; ++t) _mm512_mask_storeu_ps(y + t * y_stride, mask, acc[t]);
}

// IQ4_XS: sub-block j's codes as codebook values + 128 (unsigned for vpdpbusd); the + 128 is
// taken back as 128 * bsums32[j].
template <int kT>
void tile_iq4_xs(const TileIQ4_XS* tiles, int64_t nb,
                 const TokenRows<BlockQ8_K, PanelSumsK> (&tok)[kT], float* y, int64_t y_stride,
                 __mmask16 mask, bool stream) {
  __m512 acc[kT];
#pragma GCC unroll 16
  for (int t = 0; t < kT; ++t) acc[t] = _mm512_setzero_ps();
  const __m512i table = _mm512_broadcast_i32x4(_mm_add_epi8(
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIQ4Values)), _mm_set1_epi8(-128)));
  for (int64_t b = 0; b < nb; ++b) {
    const TileIQ4_XS& tile = tiles[b];
    __m512i l_sum[kT];
#pragma GCC unroll 16
    for (int t = 0; t < kT; ++t) l_sum[t] = _mm512_setzero_si512();
    for (int j = 0; j < 8; ++j) {
      if (stream) prefetch_ahead(&tile, j, 8);  // weights from memory (panel_prefetch.h)
      __m512i w[8];
      unpack_nibbles(tile.qs[j], w);
#pragma GCC unroll 8
      for (int l = 0; l < 8; ++l) w[l] = _mm512_shuffle_epi8(table, w[l]);
      const __m512i sc =
          _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(tile.sc[j])));
#pragma GCC unroll 16
      for (int t = 0; t < kT; ++t) {
        const int8_t* aq = tok[t].a[b].qs + 32 * j;
        __m512i p0 = _mm512_setzero_si512(), p1 = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int l = 0; l < 8; l += 2) {
          p0 = _mm512_dpbusd_epi32(p0, w[l], broadcast4(aq + 4 * l));
          p1 = _mm512_dpbusd_epi32(p1, w[l + 1], broadcast4(aq + 4 * l + 4));
        }
        const __m512i p = _mm512_sub_epi32(_mm512_add_epi32(p0, p1),
                                           _mm512_set1_epi32(128 * tok[t].s[b].bsums32[j]));
        l_sum[t] = _mm512_add_epi32(l_sum[t], _mm512_mullo_epi32(p, sc));
      }
    }
    const __m512 dw = load_fp16x16(tile.d);
#pragma GCC unroll 16
    for (int t = 0; t < kT; ++t)
      acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_set1_ps(tok[t].s[b].d)),
                               _mm512_cvtepi32_ps(l_sum[t]), acc[t]);
  }
#pragma GCC unroll 16
  for (int t = 0; t < kT; ++t) _mm512_mask_storeu_ps(y + t * y_stride, mask, acc[t]);
}

// Q2_K: 2-bit codes straight into vpdpbusd; the mins as int16 pairs (mn[2i], mn[2i + 1]) per row
// against the token's bsums pair, as Q4_K's.
template <int kT>
void tile_q2_k(const TileQ2_K* tiles, int64_t nb, const TokenRows<BlockQ8_K, PanelSumsK> (&tok)[kT],
               float* y, int64_t y_stride, __mmask16 mask, bool stream) {
  __m512 acc[kT], summ[kT];
#pragma GCC unroll 16
  for (int t = 0; t < kT; ++t) acc[t] = summ[t] = _mm512_setzero_ps();
  const __m512i m2 = _mm512_set1_epi8(3);
  const __m128i m4 = _mm_set1_epi8(15);
  for (int64_t b = 0; b < nb; ++b) {
    const TileQ2_K& tile = tiles[b];
    if (stream) prefetch_ahead(&tile, 0, 1);  // weights from memory (panel_prefetch.h)
    __m512i l_sum[kT];
#pragma GCC unroll 16
    for (int t = 0; t < kT; ++t) l_sum[t] = _mm512_setzero_si512();
    for (int j = 0; j < 16; ++j) {
      const __m512i v = load512(tile.qs[j]);
      __m512i w[4];
#pragma GCC unroll 4
      for (int g = 0; g < 4; ++g) w[g] = _mm512_and_si512(_mm512_srli_epi16(v, 2 * g), m2);
      const __m512i sc = _mm512_cvtepu8_epi32(
          _mm_and_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(tile.scales[j])), m4));
#pragma GCC unroll 16
      for (int t = 0; t < kT; ++t) {
        const int8_t* aq = tok[t].a[b].qs + 16 * j;
        __m512i p0 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w[0], broadcast4(aq));
        __m512i p1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w[1], broadcast4(aq + 4));
        p0 = _mm512_dpbusd_epi32(p0, w[2], broadcast4(aq + 8));
        p1 = _mm512_dpbusd_epi32(p1, w[3], broadcast4(aq + 12));
        l_sum[t] = _mm512_add_epi32(l_sum[t], _mm512_mullo_epi32(_mm512_add_epi32(p0, p1), sc));
      }
    }
    __m512i mn[8];  // int16 pairs (mn[2i], mn[2i + 1]) per row lane
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) {
      const __m128i a0 =
          _mm_srli_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(tile.scales[2 * i])), 4);
      const __m128i a1 = _mm_srli_epi16(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(tile.scales[2 * i + 1])), 4);
      const __m128i lo = _mm_unpacklo_epi8(_mm_and_si128(a0, m4), _mm_and_si128(a1, m4));
      const __m128i hi = _mm_unpackhi_epi8(_mm_and_si128(a0, m4), _mm_and_si128(a1, m4));
      mn[i] = _mm512_cvtepu8_epi16(_mm256_set_m128i(hi, lo));
    }
    const __m512 dw = load_fp16x16(tile.d);
    const __m512 dmw = load_fp16x16(tile.dmin);
#pragma GCC unroll 16
    for (int t = 0; t < kT; ++t) {
      const int16_t* bsums = tok[t].a[b].bsums;
      __m512i m_sum = _mm512_setzero_si512();
#pragma GCC unroll 8
      for (int i = 0; i < 8; ++i) {
        int32_t pair;
        std::memcpy(&pair, bsums + 2 * i, 4);
        m_sum = _mm512_add_epi32(m_sum, _mm512_madd_epi16(mn[i], _mm512_set1_epi32(pair)));
      }
      const __m512 da = _mm512_set1_ps(tok[t].s[b].d);
      acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(dw, da), _mm512_cvtepi32_ps(l_sum[t]), acc[t]);
      summ[t] = _mm512_fmadd_ps(_mm512_mul_ps(dmw, da), _mm512_cvtepi32_ps(m_sum), summ[t]);
    }
  }
#pragma GCC unroll 16
  for (int t = 0; t < kT; ++t)
    _mm512_mask_storeu_ps(y + t * y_stride, mask, _mm512_sub_ps(acc[t], summ[t]));
}

// Q3_K: the unsigned codes q + 4 into vpdpbusd; the + 4 is taken back as 4 * bsums[j]
// (offsets6[j] / 8).
template <int kT>
void tile_q3_k(const TileQ3_K* tiles, int64_t nb, const TokenRows<BlockQ8_K, PanelSumsK> (&tok)[kT],
               float* y, int64_t y_stride, __mmask16 mask, bool stream) {
  __m512 acc[kT];
#pragma GCC unroll 16
  for (int t = 0; t < kT; ++t) acc[t] = _mm512_setzero_ps();
  const __m512i m2 = _mm512_set1_epi8(3);
  const __m512i bit = _mm512_set1_epi8(4);
  for (int64_t b = 0; b < nb; ++b) {
    const TileQ3_K& tile = tiles[b];
    if (stream) prefetch_ahead(&tile, 0, 1);  // weights from memory (panel_prefetch.h)
    __m512i l_sum[kT];
#pragma GCC unroll 16
    for (int t = 0; t < kT; ++t) l_sum[t] = _mm512_setzero_si512();
    for (int j = 0; j < 16; ++j) {
      const TileQ3_K::Pair& pair = tile.pair[j / 2];
      const __m512i v = load512(pair.lo[j % 2]);
      const __m512i hi = _mm512_srli_epi16(load512(pair.hi), 4 * (j % 2));
      __m512i w[4];
#pragma GCC unroll 4
      for (int g = 0; g < 4; ++g) {
        // high bit g of the nibble, moved to bit 2 (shift right by g, left by 2).
        const __m512i h = g <= 2 ? _mm512_slli_epi16(hi, 2 - g) : _mm512_srli_epi16(hi, g - 2);
        w[g] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(v, 2 * g), m2),
                               _mm512_and_si512(h, bit));
      }
      const __m512i sc =
          _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(tile.sc[j])));
#pragma GCC unroll 16
      for (int t = 0; t < kT; ++t) {
        const int8_t* aq = tok[t].a[b].qs + 16 * j;
        __m512i p0 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w[0], broadcast4(aq));
        __m512i p1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w[1], broadcast4(aq + 4));
        p0 = _mm512_dpbusd_epi32(p0, w[2], broadcast4(aq + 8));
        p1 = _mm512_dpbusd_epi32(p1, w[3], broadcast4(aq + 12));
        const __m512i p = _mm512_sub_epi32(_mm512_add_epi32(p0, p1),
                                           _mm512_set1_epi32(tok[t].s[b].offsets6[j] >> 3));
        l_sum[t] = _mm512_add_epi32(l_sum[t], _mm512_mullo_epi32(p, sc));
      }
    }
    const __m512 dw = load_fp16x16(tile.d);
#pragma GCC unroll 16
    for (int t = 0; t < kT; ++t)
      acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_set1_ps(tok[t].s[b].d)),
                               _mm512_cvtepi32_ps(l_sum[t]), acc[t]);
  }
#pragma GCC unroll 16
  for (int t = 0; t < kT; ++t) _mm512_mask_storeu_ps(y + t * y_stride, mask, acc[t]);
}

// ---- The loop over panels and token tiles.

template <class Kernel, int kT>
void run_tile(const PanelArgs& args, const typename Kernel::Tile* tiles, int64_t nb, int64_t t0,
              float* y, __mmask16 mask, bool stream) {
  TokenRows<typename Kernel::ABlock, typename Kernel::Sums> tok[kT];
#pragma GCC unroll 16
  for (int t = 0; t < kT; ++t) {
    tok[t].a =
        reinterpret_cast<const typename Kernel::ABlock*>(args.x + (t0 + t) * args.x_row_bytes);
    tok[t].s =
        reinterpret_cast<const typename Kernel::Sums*>(args.sums + (t0 + t) * args.sums_row_bytes);
  }
  Kernel::template tile<kT>(tiles, nb, tok, y + t0 * args.y_row_stride, args.y_row_stride, mask,
                            stream);
}

template <class Kernel, int kT>
void run_remainder(const PanelArgs& args, const typename Kernel::Tile* tiles, int64_t nb,
                   int64_t t0, int64_t count, float* y, __mmask16 mask, bool stream) {
  if constexpr (kT > 0) {
    if (count == kT) return run_tile<Kernel, kT>(args, tiles, nb, t0, y, mask, stream);
    run_remainder<Kernel, kT - 1>(args, tiles, nb, t0, count, y, mask, stream);
  }
}

// Panels are taken in chunks whose weights stay in L2 (kChunkBytes), and within a chunk the token
// tiles are the outer loop, so that a tile writes its outputs for the chunk's rows contiguously
// (16 floats per panel, panel after panel). Panel by panel over every token instead wrote one
// 64-byte line per token at the stride of a whole output row: for a 2048-row matrix 8 KB, which
// maps all of them to the same cache sets, so the outputs went to L3 and back, and two cores
// doing it at once halved each other's speed.
template <class Kernel>
void panel_loop(const PanelArgs& args, int64_t panel_begin, int64_t panel_end) {
  constexpr int kT = Kernel::kTokens;
  const int64_t nb = args.k / Kernel::kBlock;
  const auto* tiles = reinterpret_cast<const typename Kernel::Tile*>(args.panels);
  const int64_t panel_bytes = nb * static_cast<int64_t>(sizeof(typename Kernel::Tile));
  const int64_t chunk = std::max<int64_t>(1, kPanelChunkBytes / panel_bytes);
  for (int64_t c0 = panel_begin; c0 < panel_end; c0 += chunk) {
    const int64_t c1 = std::min(panel_end, c0 + chunk);
    // The first token tile reads the chunk's weights from memory, the later ones from L2.
    int64_t t0 = 0;
    for (; t0 + kT <= args.n_tokens; t0 += kT)
      for (int64_t p = c0; p < c1; ++p)
        run_tile<Kernel, kT>(args, tiles + p * nb, nb, t0, args.y + p * kPanelRows,
                             row_mask(args.rows - p * kPanelRows), t0 == 0);
    if (t0 < args.n_tokens)
      for (int64_t p = c0; p < c1; ++p)
        run_remainder<Kernel, kT - 1>(args, tiles + p * nb, nb, t0, args.n_tokens - t0,
                                      args.y + p * kPanelRows, row_mask(args.rows - p * kPanelRows),
                                      t0 == 0);
  }
}

template <class F>
struct Kernel32 {
  using Tile = typename F::Tile;
  using ABlock = typename F::ABlock;
  using Sums = PanelSums32;
  static constexpr int kTokens = kPanelTokens;
  static constexpr int64_t kBlock = kQK;
  template <int kT>
  static void tile(const Tile* tiles, int64_t nb, const TokenRows<ABlock, Sums> (&tok)[kT],
                   float* y, int64_t y_stride, __mmask16 mask, bool stream) {
    tile32<F, kT>(tiles, nb, tok, y, y_stride, mask, stream);
  }
};
struct KernelQ4K {
  using Tile = TileQ4_K;
  using ABlock = BlockQ8_K;
  using Sums = PanelSumsK;
  static constexpr int kTokens = 4;
  static constexpr int64_t kBlock = kQKK;
  template <int kT>
  static void tile(const Tile* tiles, int64_t nb, const TokenRows<ABlock, Sums> (&tok)[kT],
                   float* y, int64_t y_stride, __mmask16 mask, bool stream) {
    tile_q4_k<kT>(tiles, nb, tok, y, y_stride, mask, stream);
  }
};
struct KernelIQ4XS {
  using Tile = TileIQ4_XS;
  using ABlock = BlockQ8_K;
  using Sums = PanelSumsK;
  static constexpr int kTokens = 4;
  static constexpr int64_t kBlock = kQKK;
  template <int kT>
  static void tile(const Tile* tiles, int64_t nb, const TokenRows<ABlock, Sums> (&tok)[kT],
                   float* y, int64_t y_stride, __mmask16 mask, bool stream) {
    tile_iq4_xs<kT>(tiles, nb, tok, y, y_stride, mask, stream);
  }
};
struct KernelQ2K {
  using Tile = TileQ2_K;
  using ABlock = BlockQ8_K;
  using Sums = PanelSumsK;
  static constexpr int kTokens = 4;
  static constexpr int64_t kBlock = kQKK;
  template <int kT>
  static void tile(const Tile* tiles, int64_t nb, const TokenRows<ABlock, Sums> (&tok)[kT],
                   float* y, int64_t y_stride, __mmask16 mask, bool stream) {
    tile_q2_k<kT>(tiles, nb, tok, y, y_stride, mask, stream);
  }
};
struct KernelQ3K {
  using Tile = TileQ3_K;
  using ABlock = BlockQ8_K;
  using Sums = PanelSumsK;
  static constexpr int kTokens = 4;
  static constexpr int64_t kBlock = kQKK;
  template <int kT>
  static void tile(const Tile* tiles, int64_t nb, const TokenRows<ABlock, Sums> (&tok)[kT],
                   float* y, int64_t y_stride, __mmask16 mask, bool stream) {
    tile_q3_k<kT>(tiles, nb, tok, y, y_stride, mask, stream);
  }
};
struct KernelQ6K {
  using Tile = TileQ6_K;
  using ABlock = BlockQ8_K;
  using Sums = PanelSumsK;
  static constexpr int kTokens = 4;
  static constexpr int64_t kBlock = kQKK;
  template <int kT>
  static void tile(const Tile* tiles, int64_t nb, const TokenRows<ABlock, Sums> (&tok)[kT],
                   float* y, int64_t y_stride, __mmask16 mask, bool stream) {
    tile_q6_k<kT>(tiles, nb, tok, y, y_stride, mask, stream);
  }
};

}  // namespace

PanelMatmulFn panel_matmul(Format format) {
  switch (format) {
    case Format::kQ4_0:
      return panel_loop<Kernel32<Q4_0>>;
    case Format::kQ4_1:
      return panel_loop<Kernel32<Q4_1>>;
    case Format::kQ5_0:
      return panel_loop<Kernel32<Q5_0>>;
    case Format::kQ5_1:
      return panel_loop<Kernel32<Q5_1>>;
    case Format::kQ8_0:
      return panel_loop<Kernel32<Q8_0>>;
    case Format::kIQ4_NL:
      return panel_loop<Kernel32<IQ4_NL>>;
    case Format::kMXFP4:
      return panel_loop<Kernel32<MXFP4>>;
    case Format::kIQ4_XS:
      return panel_loop<KernelIQ4XS>;
    case Format::kQ2_K:
      return panel_loop<KernelQ2K>;
    case Format::kQ3_K:
      return panel_loop<KernelQ3K>;
    case Format::kQ4_K:
      return panel_loop<KernelQ4K>;
    case Format::kQ6_K:
      return panel_loop<KernelQ6K>;
    default:
      return nullptr;
  }
}

}  // namespace drift::kernels::avx512
