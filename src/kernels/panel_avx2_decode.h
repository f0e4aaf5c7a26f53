// Internal: the AVX2 panel kernels for one token (decode), included by panel_avx2.cc. A panel's
// 16 rows go through in one pass, so each 64-byte line of a tile is used whole as it arrives (the
// two 8-row halves' quants share a line) and the token's activation broadcasts serve both halves;
// the lines ahead are prefetched (panel_prefetch.h). Same integer sums and float sequence as the
// half kernels, so the results are bitwise those of panel.h's canonical order.
#pragma once

#include "kernels/panel_avx2_simd.h"
#include "kernels/panel_prefetch.h"

namespace drift::kernels::avx2 {
namespace {

// Decode: both halves of a tile before the next, the tiles ahead prefetched.
template <class F>
void panel32_one_token(const typename F::Tile* tiles, int64_t nb, const typename F::ABlock* a,
                       const PanelSums32* sums, float* y, int64_t valid) {
  __m256 acc[2], summ[2];
  for (int h = 0; h < 2; ++h) acc[h] = summ[h] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const typename F::Tile& tile = tiles[b];
    prefetch_ahead(&tile, 0, 1);
    const PanelSums32& s = sums[b];
    for (int h = 0; h < 2; ++h) {
      __m256i w[8];
      F::unpack(tile, h, w);
      __m256i p = block_product<F>(w, a[b].qs);
      if constexpr (F::kOffset)
        p = _mm256_sub_epi32(p, _mm256_set1_epi32(s.sum << F::kOffsetShift));
      const __m256 scale = _mm256_mul_ps(weight_scales(tile, h), _mm256_set1_ps(s.d));
      acc[h] = _mm256_fmadd_ps(scale, _mm256_cvtepi32_ps(p), acc[h]);
      if constexpr (F::kHasMin)
        summ[h] = _mm256_fmadd_ps(load_fp16x8(tile.m + 8 * h), _mm256_set1_ps(s.s), summ[h]);
    }
  }
  for (int h = 0; h < 2; ++h)
    store8(y + 8 * h, F::kHasMin ? _mm256_add_ps(acc[h], summ[h]) : acc[h], valid - 8 * h);
}

// Decode (one token): all 16 rows of a panel in one pass, so that each 64-byte line of a tile is
// used whole as it arrives (the two halves' quants share a line) and the token's activation
// broadcasts serve both halves.
void panel_q4_k_one_token(const TileQ4_K* tiles, int64_t nb, const BlockQ8_K* a,
                          const PanelSumsK* sums, float* y, int64_t valid) {
  __m256 acc[2], summ[2];
  for (int h = 0; h < 2; ++h) acc[h] = summ[h] = _mm256_setzero_ps();
  const __m256i m4 = _mm256_set1_epi8(15);
  for (int64_t b = 0; b < nb; ++b) {
    const TileQ4_K& tile = tiles[b];
    __m256i l_sum[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
    for (int j = 0; j < 8; ++j) {
      prefetch_ahead(&tile, j, 8);
      const int8_t* aq = a[b].qs + 32 * j;
      __m256i s16[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
      for (int g = 0; g < 4; ++g) {
        const __m256i lo = broadcast4(aq + 4 * g), hi = broadcast4(aq + 16 + 4 * g);
        for (int h = 0; h < 2; ++h) {
          const __m256i v = load256(tile.qs[j][g] + 32 * h);
          s16[h] = _mm256_add_epi16(
              s16[h], _mm256_add_epi16(
                          _mm256_maddubs_epi16(_mm256_and_si256(v, m4), lo),
                          _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(v, 4), m4), hi)));
        }
      }
      for (int h = 0; h < 2; ++h)
        l_sum[h] = _mm256_add_epi32(l_sum[h],
                                    _mm256_madd_epi16(s16[h], scale_pairs_u8(tile.sc[j] + 8 * h)));
    }
    const PanelSumsK& s = sums[b];
    const __m256 da = _mm256_set1_ps(s.d);
    for (int h = 0; h < 2; ++h) {
      __m256i m_sum = _mm256_setzero_si256();
      for (int i = 0; i < 4; ++i) {
        int32_t pair;
        std::memcpy(&pair, s.bsums32 + 2 * i, 4);
        const __m256i mn = _mm256_cvtepu8_epi16(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(tile.mn[i][8 * h])));
        m_sum = _mm256_add_epi32(m_sum, _mm256_madd_epi16(mn, _mm256_set1_epi32(pair)));
      }
      acc[h] = _mm256_fmadd_ps(_mm256_mul_ps(load_fp16x8(tile.d + 8 * h), da),
                               _mm256_cvtepi32_ps(l_sum[h]), acc[h]);
      summ[h] = _mm256_fmadd_ps(_mm256_mul_ps(load_fp16x8(tile.dmin + 8 * h), da),
                                _mm256_cvtepi32_ps(m_sum), summ[h]);
    }
  }
  store8(y, _mm256_sub_ps(acc[0], summ[0]), valid);
  store8(y + 8, _mm256_sub_ps(acc[1], summ[1]), valid - 8);
}

void panel_q6_k_one_token(const TileQ6_K* tiles, int64_t nb, const BlockQ8_K* a,
                          const PanelSumsK* sums, float* y, int64_t valid) {
  __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
  const __m256i m4 = _mm256_set1_epi8(15);
  for (int64_t b = 0; b < nb; ++b) {
    const TileQ6_K& tile = tiles[b];
    __m256i l_sum[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
    for (int j = 0; j < 16; ++j) {
      prefetch_ahead(&tile, j, 16);
      const TileQ6_K::Sub& sub = tile.sub[j];
      const int8_t* aq = a[b].qs + 16 * j;
      const __m256i a0 = broadcast4(aq), a1 = broadcast4(aq + 4);
      const __m256i a2 = broadcast4(aq + 8), a3 = broadcast4(aq + 12);
      for (int h = 0; h < 2; ++h) {
        const __m256i lo0 = load256(sub.lo[0] + 32 * h), lo1 = load256(sub.lo[1] + 32 * h);
        const __m256i hi = load256(sub.hi + 32 * h);
        const __m256i w0 =
            _mm256_or_si256(_mm256_and_si256(lo0, m4),
                            _mm256_slli_epi16(_mm256_and_si256(hi, _mm256_set1_epi8(0x03)), 4));
        const __m256i w1 =
            _mm256_or_si256(_mm256_and_si256(lo1, m4),
                            _mm256_slli_epi16(_mm256_and_si256(hi, _mm256_set1_epi8(0x0c)), 2));
        const __m256i w2 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(lo0, 4), m4),
                                           _mm256_and_si256(hi, _mm256_set1_epi8(0x30)));
        const __m256i w3 = _mm256_or_si256(
            _mm256_and_si256(_mm256_srli_epi16(lo1, 4), m4),
            _mm256_srli_epi16(_mm256_and_si256(hi, _mm256_set1_epi8(static_cast<char>(0xc0))), 2));
        const __m256i sc = scale_pairs_i8(tile.sc[j] + 8 * h);
        const __m256i s01 =
            _mm256_add_epi16(_mm256_maddubs_epi16(w0, a0), _mm256_maddubs_epi16(w1, a1));
        const __m256i s23 =
            _mm256_add_epi16(_mm256_maddubs_epi16(w2, a2), _mm256_maddubs_epi16(w3, a3));
        l_sum[h] = _mm256_add_epi32(
            l_sum[h], _mm256_add_epi32(_mm256_madd_epi16(s01, sc), _mm256_madd_epi16(s23, sc)));
      }
    }
    const TokenRows<BlockQ8_K, PanelSumsK> tok[1] = {{a, sums}};
    for (int h = 0; h < 2; ++h) {
      __m256i l[1] = {l_sum[h]};
      subtract_code_offsets<5>(tile.sc, h, b, tok, l);
      acc[h] =
          _mm256_fmadd_ps(_mm256_mul_ps(load_fp16x8(tile.d + 8 * h), _mm256_set1_ps(sums[b].d)),
                          _mm256_cvtepi32_ps(l[0]), acc[h]);
    }
  }
  store8(y, acc[0], valid);
  store8(y + 8, acc[1], valid - 8);
}

// IQ4_XS decode: all 16 rows per pass, as panel_q4_k_one_token.
void panel_iq4_xs_one_token(const TileIQ4_XS* tiles, int64_t nb, const BlockQ8_K* a,
                            const PanelSumsK* sums, float* y, int64_t valid) {
  __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
  const __m256i table =
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIQ4Values)));
  for (int64_t b = 0; b < nb; ++b) {
    const TileIQ4_XS& tile = tiles[b];
    __m256i l_sum[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
    for (int j = 0; j < 8; ++j) {
      prefetch_ahead(&tile, j, 8);
      const int8_t* aq = a[b].qs + 32 * j;
      for (int h = 0; h < 2; ++h) {
        __m256i w[8];
        unpack_nibbles(tile.qs[j], h, w);
        const __m256i sc = scale_pairs_i8(tile.sc[j] + 8 * h);
        __m256i p = _mm256_setzero_si256();
        for (int l = 0; l < 8; ++l) {
          const __m256i v = _mm256_shuffle_epi8(table, w[l]);
          p = _mm256_add_epi32(
              p,
              _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(v),
                                                     _mm256_sign_epi8(broadcast4(aq + 4 * l), v)),
                                sc));
        }
        l_sum[h] = _mm256_add_epi32(l_sum[h], p);
      }
    }
    const __m256 da = _mm256_set1_ps(sums[b].d);
    for (int h = 0; h < 2; ++h)
      acc[h] = _mm256_fmadd_ps(_mm256_mul_ps(load_fp16x8(tile.d + 8 * h), da),
                               _mm256_cvtepi32_ps(l_sum[h]), acc[h]);
  }
  store8(y, acc[0], valid);
  store8(y + 8, acc[1], valid - 8);
}

}  // namespace
}  // namespace drift::kernels::avx2
