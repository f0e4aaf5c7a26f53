// AVX2 panel kernels: the canonical order of panel.h on CPUs without AVX-512. A 16-row panel is
// run as two halves of 8 rows (one ymm of int32 lanes each). Without vpdpbusd, a group's products
// go through vpmaddubsw (unsigned codes x signed activations, pairs into int16 — no saturation:
// codes <= 63 and |a| <= 127) and vpmaddwd with ones into int32; Q8_0's codes are turned back into
// signed weights and multiplied as |w| x sign-adjusted activations, which needs no offset. The
// integer sums are exact, so they equal the AVX-512 ones and the float sequence is the same.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/lowbit_quants.h"
#include "kernels/panel.h"
#include "kernels/panel_dispatch.h"
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
void unpack_nibbles(const uint8_t (*qs)[64], int h, __m256i (&w)[8]) {
  const __m256i m4 = _mm256_set1_epi8(15);
  for (int g = 0; g < 4; ++g) {
    const __m256i v = load256(qs[g] + 32 * h);
    w[g] = _mm256_and_si256(v, m4);
    w[g + 4] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
  }
}

// ---- 32-element formats.

struct Q4_0 {
  using Tile = TileQ4_0;
  using ABlock = BlockQ8_0;
  static constexpr bool kHasMin = false;
  static constexpr bool kOffset = true;  // codes q = w + 8: subtract 8 * sum(a)
  static constexpr int kOffsetShift = 3;
  static void unpack(const Tile& t, int h, __m256i (&w)[8]) { unpack_nibbles(t.qs, h, w); }
  static __m256i group(__m256i w, __m256i a) { return dot4(w, a); }
};
struct Q4_1 {
  using Tile = TileQ4_1;
  using ABlock = BlockQ8_1;
  static constexpr bool kHasMin = true;
  static constexpr bool kOffset = false;
  static constexpr int kOffsetShift = 0;
  static void unpack(const Tile& t, int h, __m256i (&w)[8]) { unpack_nibbles(t.qs, h, w); }
  static __m256i group(__m256i w, __m256i a) { return dot4(w, a); }
};
// The fifth bits of group l for rows [8h, 8h + 8) as 0x10 bytes: bits 32h .. 32h + 31 of qh[l],
// bit j for byte j.
template <class Tile>
void add_fifth_bits(const Tile& t, int h, __m256i (&w)[8]) {
  // Byte j takes the byte of the 32-bit word holding bit j, then tests bit j % 8 of it.
  const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2,
                                          2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
  const __m256i select = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  for (int l = 0; l < 8; ++l) {
    const auto bits32 = static_cast<int32_t>(t.qh[l] >> (32 * h));
    const __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(bits32), spread);
    const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(bytes, select), select);
    w[l] = _mm256_or_si256(w[l], _mm256_and_si256(set, _mm256_set1_epi8(0x10)));
  }
}

struct Q5_0 {
  using Tile = TileQ5_0;
  using ABlock = BlockQ8_0;
  static constexpr bool kHasMin = false;
  static constexpr bool kOffset = true;  // codes q = w + 16: subtract 16 * sum(a)
  static constexpr int kOffsetShift = 4;
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
  static void unpack(const Tile& t, int h, __m256i (&w)[8]) {
    const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
    for (int l = 0; l < 8; ++l) w[l] = _mm256_xor_si256(load256(t.qs[l] + 32 * h), flip);
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
  static void unpack(const Tile& t, int h, __m256i (&w)[8]) {
    unpack_nibbles(t.qs, h, w);
    const __m256i table =
        _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIQ4Values)));
    for (int l = 0; l < 8; ++l) w[l] = _mm256_shuffle_epi8(table, w[l]);
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
  static void unpack(const Tile& t, int h, __m256i (&w)[8]) {
    unpack_nibbles(t.qs, h, w);
    const __m256i table = _mm256_broadcastsi128_si256(_mm_add_epi8(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(kMXFP4Values)), _mm_set1_epi8(16)));
    for (int l = 0; l < 8; ++l) w[l] = _mm256_shuffle_epi8(table, w[l]);
  }
  static __m256i group(__m256i w, __m256i a) { return dot4(w, a); }
};

// A block's P for 8 rows: the 8 groups' products of rows-by-lanes weights w and the token's 32
// activations aq, one int32 lane per row.
template <class F>
__m256i block_product(const __m256i (&w)[8], const int8_t* aq) {
  __m256i p = F::group(w[0], broadcast4(aq));
  for (int l = 1; l < 8; ++l) p = _mm256_add_epi32(p, F::group(w[l], broadcast4(aq + 4 * l)));
  return p;
}
// MXFP4's codes are small enough to add four groups' vpmaddubsw pairs in int16 before widening:
// |pair| <= 2 * 28 * 127 = 7112, four of them <= 28448 < 2^15, so the sums stay exact.
template <>
__m256i block_product<MXFP4>(const __m256i (&w)[8], const int8_t* aq) {
  __m256i lo = _mm256_maddubs_epi16(w[0], broadcast4(aq));
  __m256i hi = _mm256_maddubs_epi16(w[4], broadcast4(aq + 16));
  for (int l = 1; l < 4; ++l) {
    lo = _mm256_add_epi16(lo, _mm256_maddubs_epi16(w[l], broadcast4(aq + 4 * l)));
    hi = _mm256_add_epi16(hi, _mm256_maddubs_epi16(w[l + 4], broadcast4(aq + 16 + 4 * l)));
  }
  const __m256i ones = _mm256_set1_epi16(1);
  return _mm256_add_epi32(_mm256_madd_epi16(lo, ones), _mm256_madd_epi16(hi, ones));
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

template <class F, int kT>
void half32(const typename F::Tile* tiles, int64_t nb, int h,
            const TokenRows<typename F::ABlock, PanelSums32> (&tok)[kT], float* y, int64_t y_stride,
            int64_t valid) {
  __m256 acc[kT], summ[kT];
  for (int t = 0; t < kT; ++t) acc[t] = summ[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const typename F::Tile& tile = tiles[b];
    __m256i w[8];
    F::unpack(tile, h, w);
    const __m256 dw = weight_scales(tile, h);
    for (int t = 0; t < kT; ++t) {
      __m256i p = block_product<F>(w, tok[t].a[b].qs);
      const PanelSums32& s = tok[t].s[b];
      if constexpr (F::kOffset)
        p = _mm256_sub_epi32(p, _mm256_set1_epi32(s.sum << F::kOffsetShift));
      const __m256 scale = _mm256_mul_ps(dw, _mm256_set1_ps(s.d));
      acc[t] = _mm256_fmadd_ps(scale, _mm256_cvtepi32_ps(p), acc[t]);
      if constexpr (F::kHasMin)
        summ[t] = _mm256_fmadd_ps(load_fp16x8(tile.m + 8 * h), _mm256_set1_ps(s.s), summ[t]);
    }
  }
  for (int t = 0; t < kT; ++t)
    store8(y + t * y_stride, F::kHasMin ? _mm256_add_ps(acc[t], summ[t]) : acc[t], valid);
}

// ---- K-quants.

template <int kT>
void half_q4_k(const TileQ4_K* tiles, int64_t nb, int h,
               const TokenRows<BlockQ8_K, PanelSumsK> (&tok)[kT], float* y, int64_t y_stride,
               int64_t valid) {
  __m256 acc[kT], summ[kT];
  for (int t = 0; t < kT; ++t) acc[t] = summ[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const TileQ4_K& tile = tiles[b];
    __m256i l_sum[kT];
    for (int t = 0; t < kT; ++t) l_sum[t] = _mm256_setzero_si256();
    for (int j = 0; j < 8; ++j) {
      __m256i w[8];
      unpack_nibbles(tile.qs[j], h, w);
      const __m256i sc = _mm256_cvtepu8_epi32(
          _mm_loadl_epi64(reinterpret_cast<const __m128i*>(tile.sc[j] + 8 * h)));
      for (int t = 0; t < kT; ++t) {
        const int8_t* aq = tok[t].a[b].qs + 32 * j;
        __m256i p = dot4(w[0], broadcast4(aq));
        for (int l = 1; l < 8; ++l) p = _mm256_add_epi32(p, dot4(w[l], broadcast4(aq + 4 * l)));
        l_sum[t] = _mm256_add_epi32(l_sum[t], _mm256_mullo_epi32(p, sc));
      }
    }
    const __m256 dw = load_fp16x8(tile.d + 8 * h);
    const __m256 dmw = load_fp16x8(tile.dmin + 8 * h);
    __m256i mn[4];
    for (int i = 0; i < 4; ++i)
      mn[i] = _mm256_cvtepu8_epi16(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(tile.mn[i][8 * h])));
    for (int t = 0; t < kT; ++t) {
      const PanelSumsK& s = tok[t].s[b];
      __m256i m_sum = _mm256_setzero_si256();
      for (int i = 0; i < 4; ++i) {
        int32_t pair;
        std::memcpy(&pair, s.bsums32 + 2 * i, 4);
        m_sum = _mm256_add_epi32(m_sum, _mm256_madd_epi16(mn[i], _mm256_set1_epi32(pair)));
      }
      const __m256 da = _mm256_set1_ps(s.d);
      acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, da), _mm256_cvtepi32_ps(l_sum[t]), acc[t]);
      summ[t] = _mm256_fmadd_ps(_mm256_mul_ps(dmw, da), _mm256_cvtepi32_ps(m_sum), summ[t]);
    }
  }
  for (int t = 0; t < kT; ++t) store8(y + t * y_stride, _mm256_sub_ps(acc[t], summ[t]), valid);
}

template <int kT>
void half_q6_k(const TileQ6_K* tiles, int64_t nb, int h,
               const TokenRows<BlockQ8_K, PanelSumsK> (&tok)[kT], float* y, int64_t y_stride,
               int64_t valid) {
  __m256 acc[kT];
  for (int t = 0; t < kT; ++t) acc[t] = _mm256_setzero_ps();
  const __m256i m4 = _mm256_set1_epi8(15);
  for (int64_t b = 0; b < nb; ++b) {
    const TileQ6_K& tile = tiles[b];
    __m256i l_sum[kT];
    for (int t = 0; t < kT; ++t) l_sum[t] = _mm256_setzero_si256();
    for (int j = 0; j < 16; ++j) {
      const TileQ6_K::Sub& sub = tile.sub[j];
      const __m256i lo0 = load256(sub.lo[0] + 32 * h), lo1 = load256(sub.lo[1] + 32 * h);
      const __m256i hi = load256(sub.hi + 32 * h);
      __m256i w[4];
      w[0] = _mm256_or_si256(_mm256_and_si256(lo0, m4),
                             _mm256_slli_epi16(_mm256_and_si256(hi, _mm256_set1_epi8(0x03)), 4));
      w[1] = _mm256_or_si256(_mm256_and_si256(lo1, m4),
                             _mm256_slli_epi16(_mm256_and_si256(hi, _mm256_set1_epi8(0x0c)), 2));
      w[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(lo0, 4), m4),
                             _mm256_and_si256(hi, _mm256_set1_epi8(0x30)));
      w[3] = _mm256_or_si256(
          _mm256_and_si256(_mm256_srli_epi16(lo1, 4), m4),
          _mm256_srli_epi16(_mm256_and_si256(hi, _mm256_set1_epi8(static_cast<char>(0xc0))), 2));
      const __m256i sc = _mm256_cvtepi8_epi32(
          _mm_loadl_epi64(reinterpret_cast<const __m128i*>(tile.sc[j] + 8 * h)));
      for (int t = 0; t < kT; ++t) {
        const int8_t* aq = tok[t].a[b].qs + 16 * j;
        __m256i p = _mm256_add_epi32(dot4(w[0], broadcast4(aq)), dot4(w[1], broadcast4(aq + 4)));
        p = _mm256_add_epi32(
            p, _mm256_add_epi32(dot4(w[2], broadcast4(aq + 8)), dot4(w[3], broadcast4(aq + 12))));
        p = _mm256_sub_epi32(p, _mm256_set1_epi32(tok[t].s[b].offsets6[j]));
        l_sum[t] = _mm256_add_epi32(l_sum[t], _mm256_mullo_epi32(p, sc));
      }
    }
    const __m256 dw = load_fp16x8(tile.d + 8 * h);
    for (int t = 0; t < kT; ++t)
      acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(tok[t].s[b].d)),
                               _mm256_cvtepi32_ps(l_sum[t]), acc[t]);
  }
  for (int t = 0; t < kT; ++t) store8(y + t * y_stride, acc[t], valid);
}

// IQ4_XS: sub-block j's signed codebook values, multiplied as |w| x sign-adjusted activations.
template <int kT>
void half_iq4_xs(const TileIQ4_XS* tiles, int64_t nb, int h,
                 const TokenRows<BlockQ8_K, PanelSumsK> (&tok)[kT], float* y, int64_t y_stride,
                 int64_t valid) {
  __m256 acc[kT];
  for (int t = 0; t < kT; ++t) acc[t] = _mm256_setzero_ps();
  const __m256i table =
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIQ4Values)));
  for (int64_t b = 0; b < nb; ++b) {
    const TileIQ4_XS& tile = tiles[b];
    __m256i l_sum[kT];
    for (int t = 0; t < kT; ++t) l_sum[t] = _mm256_setzero_si256();
    for (int j = 0; j < 8; ++j) {
      __m256i w[8];
      unpack_nibbles(tile.qs[j], h, w);
      for (int l = 0; l < 8; ++l) w[l] = _mm256_shuffle_epi8(table, w[l]);
      const __m256i sc = _mm256_cvtepi8_epi32(
          _mm_loadl_epi64(reinterpret_cast<const __m128i*>(tile.sc[j] + 8 * h)));
      for (int t = 0; t < kT; ++t) {
        const int8_t* aq = tok[t].a[b].qs + 32 * j;
        __m256i p = dot4_signed(w[0], broadcast4(aq));
        for (int l = 1; l < 8; ++l)
          p = _mm256_add_epi32(p, dot4_signed(w[l], broadcast4(aq + 4 * l)));
        l_sum[t] = _mm256_add_epi32(l_sum[t], _mm256_mullo_epi32(p, sc));
      }
    }
    const __m256 dw = load_fp16x8(tile.d + 8 * h);
    for (int t = 0; t < kT; ++t)
      acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(tok[t].s[b].d)),
                               _mm256_cvtepi32_ps(l_sum[t]), acc[t]);
  }
  for (int t = 0; t < kT; ++t) store8(y + t * y_stride, acc[t], valid);
}

// Q2_K: 2-bit codes (unsigned) through vpmaddubsw; the mins as int16 pairs per row, as Q4_K's.
template <int kT>
void half_q2_k(const TileQ2_K* tiles, int64_t nb, int h,
               const TokenRows<BlockQ8_K, PanelSumsK> (&tok)[kT], float* y, int64_t y_stride,
               int64_t valid) {
  __m256 acc[kT], summ[kT];
  for (int t = 0; t < kT; ++t) acc[t] = summ[t] = _mm256_setzero_ps();
  const __m256i m2 = _mm256_set1_epi8(3);
  const __m128i m4 = _mm_set1_epi8(15);
  for (int64_t b = 0; b < nb; ++b) {
    const TileQ2_K& tile = tiles[b];
    __m256i l_sum[kT];
    for (int t = 0; t < kT; ++t) l_sum[t] = _mm256_setzero_si256();
    for (int j = 0; j < 16; ++j) {
      const __m256i v = load256(tile.qs[j] + 32 * h);
      __m256i w[4];
      for (int g = 0; g < 4; ++g) w[g] = _mm256_and_si256(_mm256_srli_epi16(v, 2 * g), m2);
      const __m256i sc = _mm256_cvtepu8_epi32(_mm_and_si128(
          _mm_loadl_epi64(reinterpret_cast<const __m128i*>(tile.scales[j] + 8 * h)), m4));
      for (int t = 0; t < kT; ++t) {
        const int8_t* aq = tok[t].a[b].qs + 16 * j;
        __m256i p = _mm256_add_epi32(dot4(w[0], broadcast4(aq)), dot4(w[1], broadcast4(aq + 4)));
        p = _mm256_add_epi32(
            p, _mm256_add_epi32(dot4(w[2], broadcast4(aq + 8)), dot4(w[3], broadcast4(aq + 12))));
        l_sum[t] = _mm256_add_epi32(l_sum[t], _mm256_mullo_epi32(p, sc));
      }
    }
    __m256i mn[8];  // int16 pairs (mn[2i], mn[2i + 1]) per row lane
    for (int i = 0; i < 8; ++i) {
      const __m128i a0 = _mm_and_si128(
          _mm_srli_epi16(
              _mm_loadl_epi64(reinterpret_cast<const __m128i*>(tile.scales[2 * i] + 8 * h)), 4),
          m4);
      const __m128i a1 = _mm_and_si128(
          _mm_srli_epi16(
              _mm_loadl_epi64(reinterpret_cast<const __m128i*>(tile.scales[2 * i + 1] + 8 * h)), 4),
          m4);
      mn[i] = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(a0, a1));
    }
    const __m256 dw = load_fp16x8(tile.d + 8 * h);
    const __m256 dmw = load_fp16x8(tile.dmin + 8 * h);
    for (int t = 0; t < kT; ++t) {
      const int16_t* bsums = tok[t].a[b].bsums;
      __m256i m_sum = _mm256_setzero_si256();
      for (int i = 0; i < 8; ++i) {
        int32_t pair;
        std::memcpy(&pair, bsums + 2 * i, 4);
        m_sum = _mm256_add_epi32(m_sum, _mm256_madd_epi16(mn[i], _mm256_set1_epi32(pair)));
      }
      const __m256 da = _mm256_set1_ps(tok[t].s[b].d);
      acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, da), _mm256_cvtepi32_ps(l_sum[t]), acc[t]);
      summ[t] = _mm256_fmadd_ps(_mm256_mul_ps(dmw, da), _mm256_cvtepi32_ps(m_sum), summ[t]);
    }
  }
  for (int t = 0; t < kT; ++t) store8(y + t * y_stride, _mm256_sub_ps(acc[t], summ[t]), valid);
}

// Q3_K: the unsigned codes q + 4 through vpmaddubsw, the + 4 taken back as 4 * bsums[j].
template <int kT>
void half_q3_k(const TileQ3_K* tiles, int64_t nb, int h,
               const TokenRows<BlockQ8_K, PanelSumsK> (&tok)[kT], float* y, int64_t y_stride,
               int64_t valid) {
  __m256 acc[kT];
  for (int t = 0; t < kT; ++t) acc[t] = _mm256_setzero_ps();
  const __m256i m2 = _mm256_set1_epi8(3);
  const __m256i bit = _mm256_set1_epi8(4);
  for (int64_t b = 0; b < nb; ++b) {
    const TileQ3_K& tile = tiles[b];
    __m256i l_sum[kT];
    for (int t = 0; t < kT; ++t) l_sum[t] = _mm256_setzero_si256();
    for (int j = 0; j < 16; ++j) {
      const TileQ3_K::Pair& pair = tile.pair[j / 2];
      const __m256i v = load256(pair.lo[j % 2] + 32 * h);
      const __m256i hi = _mm256_srli_epi16(load256(pair.hi + 32 * h), 4 * (j % 2));
      __m256i w[4];
      for (int g = 0; g < 4; ++g) {
        const __m256i hb = g <= 2 ? _mm256_slli_epi16(hi, 2 - g) : _mm256_srli_epi16(hi, g - 2);
        w[g] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 2 * g), m2),
                               _mm256_and_si256(hb, bit));
      }
      const __m256i sc = _mm256_cvtepi8_epi32(
          _mm_loadl_epi64(reinterpret_cast<const __m128i*>(tile.sc[j] + 8 * h)));
      for (int t = 0; t < kT; ++t) {
        const int8_t* aq = tok[t].a[b].qs + 16 * j;
        __m256i p = _mm256_add_epi32(dot4(w[0], broadcast4(aq)), dot4(w[1], broadcast4(aq + 4)));
        p = _mm256_add_epi32(
            p, _mm256_add_epi32(dot4(w[2], broadcast4(aq + 8)), dot4(w[3], broadcast4(aq + 12))));
        p = _mm256_sub_epi32(p, _mm256_set1_epi32(tok[t].s[b].offsets6[j] >> 3));
        l_sum[t] = _mm256_add_epi32(l_sum[t], _mm256_mullo_epi32(p, sc));
      }
    }
    const __m256 dw = load_fp16x8(tile.d + 8 * h);
    for (int t = 0; t < kT; ++t)
      acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(tok[t].s[b].d)),
                               _mm256_cvtepi32_ps(l_sum[t]), acc[t]);
  }
  for (int t = 0; t < kT; ++t) store8(y + t * y_stride, acc[t], valid);
}

// ---- The loop over panels, halves and token tiles.

template <class Kernel, int kT>
void run_tile(const PanelArgs& args, const typename Kernel::Tile* tiles, int64_t nb, int h,
              int64_t t0, float* y, int64_t valid) {
  TokenRows<typename Kernel::ABlock, typename Kernel::Sums> tok[kT];
  for (int t = 0; t < kT; ++t) {
    tok[t].a =
        reinterpret_cast<const typename Kernel::ABlock*>(args.x + (t0 + t) * args.x_row_bytes);
    tok[t].s =
        reinterpret_cast<const typename Kernel::Sums*>(args.sums + (t0 + t) * args.sums_row_bytes);
  }
  Kernel::template half<kT>(tiles, nb, h, tok, y + t0 * args.y_row_stride, args.y_row_stride,
                            valid);
}

template <class Kernel>
void panel_loop(const PanelArgs& args, int64_t panel_begin, int64_t panel_end) {
  constexpr int kT = 2;
  const int64_t nb = args.k / Kernel::kBlock;
  const auto* tiles = reinterpret_cast<const typename Kernel::Tile*>(args.panels);
  // Chunks of panels with the token tiles outside, as the AVX-512 loop (see there why).
  const int64_t panel_bytes = nb * static_cast<int64_t>(sizeof(typename Kernel::Tile));
  const int64_t chunk = std::max<int64_t>(1, kPanelChunkBytes / panel_bytes);
  auto run = [&]<int kTokens>(int64_t c0, int64_t c1, int64_t t0) {
    for (int64_t p = c0; p < c1; ++p)
      for (int h = 0; h < 2; ++h) {
        const int64_t valid = args.rows - p * kPanelRows - 8 * h;
        if (valid <= 0) break;
        run_tile<Kernel, kTokens>(args, tiles + p * nb, nb, h, t0, args.y + p * kPanelRows + 8 * h,
                                  valid);
      }
  };
  for (int64_t c0 = panel_begin; c0 < panel_end; c0 += chunk) {
    const int64_t c1 = std::min(panel_end, c0 + chunk);
    int64_t t0 = 0;
    for (; t0 + kT <= args.n_tokens; t0 += kT) run.template operator()<kT>(c0, c1, t0);
    if (t0 < args.n_tokens) run.template operator()<1>(c0, c1, t0);
  }
}

template <class F>
struct Kernel32 {
  using Tile = typename F::Tile;
  using ABlock = typename F::ABlock;
  using Sums = PanelSums32;
  static constexpr int64_t kBlock = kQK;
  template <int kT>
  static void half(const Tile* tiles, int64_t nb, int h, const TokenRows<ABlock, Sums> (&tok)[kT],
                   float* y, int64_t y_stride, int64_t valid) {
    half32<F, kT>(tiles, nb, h, tok, y, y_stride, valid);
  }
};
struct KernelQ4K {
  using Tile = TileQ4_K;
  using ABlock = BlockQ8_K;
  using Sums = PanelSumsK;
  static constexpr int64_t kBlock = kQKK;
  template <int kT>
  static void half(const Tile* tiles, int64_t nb, int h, const TokenRows<ABlock, Sums> (&tok)[kT],
                   float* y, int64_t y_stride, int64_t valid) {
    half_q4_k<kT>(tiles, nb, h, tok, y, y_stride, valid);
  }
};
struct KernelIQ4XS {
  using Tile = TileIQ4_XS;
  using ABlock = BlockQ8_K;
  using Sums = PanelSumsK;
  static constexpr int64_t kBlock = kQKK;
  template <int kT>
  static void half(const Tile* tiles, int64_t nb, int h, const TokenRows<ABlock, Sums> (&tok)[kT],
                   float* y, int64_t y_stride, int64_t valid) {
    half_iq4_xs<kT>(tiles, nb, h, tok, y, y_stride, valid);
  }
};
struct KernelQ2K {
  using Tile = TileQ2_K;
  using ABlock = BlockQ8_K;
  using Sums = PanelSumsK;
  static constexpr int64_t kBlock = kQKK;
  template <int kT>
  static void half(const Tile* tiles, int64_t nb, int h, const TokenRows<ABlock, Sums> (&tok)[kT],
                   float* y, int64_t y_stride, int64_t valid) {
    half_q2_k<kT>(tiles, nb, h, tok, y, y_stride, valid);
  }
};
struct KernelQ3K {
  using Tile = TileQ3_K;
  using ABlock = BlockQ8_K;
  using Sums = PanelSumsK;
  static constexpr int64_t kBlock = kQKK;
  template <int kT>
  static void half(const Tile* tiles, int64_t nb, int h, const TokenRows<ABlock, Sums> (&tok)[kT],
                   float* y, int64_t y_stride, int64_t valid) {
    half_q3_k<kT>(tiles, nb, h, tok, y, y_stride, valid);
  }
};
struct KernelQ6K {
  using Tile = TileQ6_K;
  using ABlock = BlockQ8_K;
  using Sums = PanelSumsK;
  static constexpr int64_t kBlock = kQKK;
  template <int kT>
  static void half(const Tile* tiles, int64_t nb, int h, const TokenRows<ABlock, Sums> (&tok)[kT],
                   float* y, int64_t y_stride, int64_t valid) {
    half_q6_k<kT>(tiles, nb, h, tok, y, y_stride, valid);
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

}  // namespace drift::kernels::avx2
