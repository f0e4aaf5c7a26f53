// Internal: AVX2 panel kernels that take all 16 rows of a panel in one pass for a tile of kT
// tokens, included by panel_avx2.cc. Each token's activation broadcast serves both 8-row halves
// (two vpmaddubsw per broadcast instead of one), each 64-byte line of a tile is used whole as it
// arrives, and the unpacked codes serve every token of the tile. The accumulators of a tile of
// several tokens do not fit the 16 ymm registers beside the codes; the float ones live in memory
// between super-blocks (one load and store per 256 elements), the int16 sums of a sub-block stay
// in registers. Same integer sums and float sequence as panel.h's canonical order.
#pragma once

#include "kernels/panel_avx2_simd.h"
#include "kernels/panel_prefetch.h"

namespace drift::kernels::avx2 {
namespace {

// Q4_K: per sub-block, the 8 groups' vpmaddubsw pairs add in int16 (8 * 3810 < 2^15), then one
// vpmaddwd by the sub-block's scale pairs widens them into the super-block's sum L.
template <int kT>
void panel_q4_k(const TileQ4_K* tiles, int64_t nb,
                const TokenRows<BlockQ8_K, PanelSumsK> (&tok)[kT], float* y, int64_t y_stride,
                int64_t valid, bool stream) {
  __m256 acc[kT][2], summ[kT][2];
  for (int t = 0; t < kT; ++t)
    for (int h = 0; h < 2; ++h) acc[t][h] = summ[t][h] = _mm256_setzero_ps();
  const __m256i m4 = _mm256_set1_epi8(15);
  for (int64_t b = 0; b < nb; ++b) {
    const TileQ4_K& tile = tiles[b];
    __m256i l_sum[kT][2];
    for (int t = 0; t < kT; ++t) l_sum[t][0] = l_sum[t][1] = _mm256_setzero_si256();
    for (int j = 0; j < 8; ++j) {
      if (stream) prefetch_ahead(&tile, j, 8);  // weights from memory (panel_prefetch.h)
      __m256i s16[kT][2];
      for (int t = 0; t < kT; ++t) s16[t][0] = s16[t][1] = _mm256_setzero_si256();
#pragma GCC unroll 1
      for (int g = 0; g < 4; ++g) {
        const __m256i v0 = load256(tile.qs[j][g]), v1 = load256(tile.qs[j][g] + 32);
        const __m256i lo0 = _mm256_and_si256(v0, m4), lo1 = _mm256_and_si256(v1, m4);
        for (int t = 0; t < kT; ++t) {
          const __m256i a = broadcast4(tok[t].a[b].qs + 32 * j + 4 * g);
          s16[t][0] = _mm256_add_epi16(s16[t][0], _mm256_maddubs_epi16(lo0, a));
          s16[t][1] = _mm256_add_epi16(s16[t][1], _mm256_maddubs_epi16(lo1, a));
        }
        const __m256i hi0 = _mm256_and_si256(_mm256_srli_epi16(v0, 4), m4);
        const __m256i hi1 = _mm256_and_si256(_mm256_srli_epi16(v1, 4), m4);
        for (int t = 0; t < kT; ++t) {
          const __m256i a = broadcast4(tok[t].a[b].qs + 32 * j + 16 + 4 * g);
          s16[t][0] = _mm256_add_epi16(s16[t][0], _mm256_maddubs_epi16(hi0, a));
          s16[t][1] = _mm256_add_epi16(s16[t][1], _mm256_maddubs_epi16(hi1, a));
        }
      }
      const __m256i sc0 = scale_pairs_u8(tile.sc[j]), sc1 = scale_pairs_u8(tile.sc[j] + 8);
      for (int t = 0; t < kT; ++t) {
        l_sum[t][0] = _mm256_add_epi32(l_sum[t][0], _mm256_madd_epi16(s16[t][0], sc0));
        l_sum[t][1] = _mm256_add_epi32(l_sum[t][1], _mm256_madd_epi16(s16[t][1], sc1));
      }
    }
    for (int h = 0; h < 2; ++h) {
      const Q4KHalf half(tile, h);
      for (int t = 0; t < kT; ++t) {
        half.add(tok[t].s[b], l_sum[t][h], acc[t][h], summ[t][h]);
      }
    }
  }
  for (int t = 0; t < kT; ++t)
    for (int h = 0; h < 2; ++h)
      store8(y + t * y_stride + 8 * h, _mm256_sub_ps(acc[t][h], summ[t][h]), valid - 8 * h);
}

// Q6_K: per 16-element sub-block, two groups' vpmaddubsw pairs add in int16 (2 * 16002 < 2^15)
// before the scale's vpmaddwd; the code offset 32 is taken back once per super-block.
template <int kT>
void panel_q6_k(const TileQ6_K* tiles, int64_t nb,
                const TokenRows<BlockQ8_K, PanelSumsK> (&tok)[kT], float* y, int64_t y_stride,
                int64_t valid, bool stream) {
  __m256 acc[kT][2];
  for (int t = 0; t < kT; ++t) acc[t][0] = acc[t][1] = _mm256_setzero_ps();
  const __m256i m4 = _mm256_set1_epi8(15);
  for (int64_t b = 0; b < nb; ++b) {
    const TileQ6_K& tile = tiles[b];
    __m256i l_sum[2][kT];
    for (int t = 0; t < kT; ++t) l_sum[0][t] = l_sum[1][t] = _mm256_setzero_si256();
    for (int j = 0; j < 16; ++j) {
      if (stream) prefetch_ahead(&tile, j, 16);  // weights from memory (panel_prefetch.h)
      const TileQ6_K::Sub& sub = tile.sub[j];
      const __m256i sc[2] = {scale_pairs_i8(tile.sc[j]), scale_pairs_i8(tile.sc[j] + 8)};
#pragma GCC unroll 1
      for (int pair = 0; pair < 2; ++pair) {  // groups (0, 1), then (2, 3)
        __m256i w[2][2];
        for (int h = 0; h < 2; ++h) {
          const __m256i lo0 = load256(sub.lo[0] + 32 * h), lo1 = load256(sub.lo[1] + 32 * h);
          const __m256i hi = load256(sub.hi + 32 * h);
          if (pair == 0) {
            w[h][0] =
                _mm256_or_si256(_mm256_and_si256(lo0, m4),
                                _mm256_slli_epi16(_mm256_and_si256(hi, _mm256_set1_epi8(0x03)), 4));
            w[h][1] =
                _mm256_or_si256(_mm256_and_si256(lo1, m4),
                                _mm256_slli_epi16(_mm256_and_si256(hi, _mm256_set1_epi8(0x0c)), 2));
          } else {
            w[h][0] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(lo0, 4), m4),
                                      _mm256_and_si256(hi, _mm256_set1_epi8(0x30)));
            w[h][1] = _mm256_or_si256(
                _mm256_and_si256(_mm256_srli_epi16(lo1, 4), m4),
                _mm256_srli_epi16(_mm256_and_si256(hi, _mm256_set1_epi8(static_cast<char>(0xc0))),
                                  2));
          }
        }
        for (int t = 0; t < kT; ++t) {
          const int8_t* aq = tok[t].a[b].qs + 16 * j + 8 * pair;
          const __m256i a0 = broadcast4(aq), a1 = broadcast4(aq + 4);
          for (int h = 0; h < 2; ++h) {
            const __m256i s = _mm256_add_epi16(_mm256_maddubs_epi16(w[h][0], a0),
                                               _mm256_maddubs_epi16(w[h][1], a1));
            l_sum[h][t] = _mm256_add_epi32(l_sum[h][t], _mm256_madd_epi16(s, sc[h]));
          }
        }
      }
    }
    for (int h = 0; h < 2; ++h) {
      subtract_code_offsets<5>(tile.sc, h, b, tok, l_sum[h]);
      const __m256 dw = load_fp16x8(tile.d + 8 * h);
      for (int t = 0; t < kT; ++t)
        acc[t][h] = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(tok[t].s[b].d)),
                                    _mm256_cvtepi32_ps(l_sum[h][t]), acc[t][h]);
    }
  }
  for (int t = 0; t < kT; ++t)
    for (int h = 0; h < 2; ++h) store8(y + t * y_stride + 8 * h, acc[t][h], valid - 8 * h);
}

// The int32 products P of a 32-element block for 16 rows and kT tokens, p[t][h] for half h.
// 4-bit codes add all 8 groups' vpmaddubsw pairs in int16 (8 * 3810 < 2^15) before one vpmaddwd
// widens them; signed values (Q8_0, IQ4_NL) widen each group on its own.
template <class F, int kT>
void block_products16(const typename F::Tile& tile, const int8_t* const (&aq)[kT],
                      __m256i (&p)[kT][2]) {
  const __m256i ones = _mm256_set1_epi16(1);
  for (int t = 0; t < kT; ++t) p[t][0] = p[t][1] = _mm256_setzero_si256();
  if constexpr (F::kInt16Groups == 1) {
#pragma GCC unroll 1
    for (int g = 0; g < 8; ++g) {  // group g: the low codes of pair g, or the high ones of g - 4
      __m256i w[2], magnitude[2];
      for (int h = 0; h < 2; ++h) {
        w[h] = F::unpack_group(tile, g, h);
        magnitude[h] = _mm256_abs_epi8(w[h]);
      }
      for (int t = 0; t < kT; ++t) {
        const __m256i a = broadcast4(aq[t] + 4 * g);
        for (int h = 0; h < 2; ++h)
          p[t][h] = _mm256_add_epi32(
              p[t][h], _mm256_madd_epi16(
                           _mm256_maddubs_epi16(magnitude[h], _mm256_sign_epi8(a, w[h])), ones));
      }
    }
  } else {
    static_assert(F::kInt16Groups == 8, "5-bit codes and MXFP4 keep the halves (kRows16Tokens32)");
    __m256i s16[kT][2];
    for (int t = 0; t < kT; ++t) s16[t][0] = s16[t][1] = _mm256_setzero_si256();
#pragma GCC unroll 1
    for (int g = 0; g < 4; ++g) {
      __m256i lo[2], hi[2];  // groups g and g + 4
      for (int h = 0; h < 2; ++h) F::unpack_pair(tile, g, h, lo[h], hi[h]);
      for (int t = 0; t < kT; ++t) {
        const __m256i a = broadcast4(aq[t] + 4 * g);
        for (int h = 0; h < 2; ++h)
          s16[t][h] = _mm256_add_epi16(s16[t][h], _mm256_maddubs_epi16(lo[h], a));
      }
      for (int t = 0; t < kT; ++t) {
        const __m256i a = broadcast4(aq[t] + 16 + 4 * g);
        for (int h = 0; h < 2; ++h)
          s16[t][h] = _mm256_add_epi16(s16[t][h], _mm256_maddubs_epi16(hi[h], a));
      }
    }
    for (int t = 0; t < kT; ++t)
      for (int h = 0; h < 2; ++h) p[t][h] = _mm256_madd_epi16(s16[t][h], ones);
  }
}

// The 32-element formats with 4-bit codes or signed values (Q4_0, Q4_1, Q8_0, IQ4_NL): a block's P,
// then the float sequence of panel.h per block.
template <class F, int kT>
void panel32(const typename F::Tile* tiles, int64_t nb,
             const TokenRows<typename F::ABlock, PanelSums32> (&tok)[kT], float* y,
             int64_t y_stride, int64_t valid, bool stream) {
  __m256 acc[kT][2], summ[kT][2];
  for (int t = 0; t < kT; ++t)
    for (int h = 0; h < 2; ++h) acc[t][h] = summ[t][h] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const typename F::Tile& tile = tiles[b];
    if (stream) prefetch_ahead(&tile, 0, 1);  // weights from memory (panel_prefetch.h)
    const int8_t* aq[kT];
    for (int t = 0; t < kT; ++t) aq[t] = tok[t].a[b].qs;
    __m256i p[kT][2];
    block_products16<F, kT>(tile, aq, p);
    for (int h = 0; h < 2; ++h) {
      const __m256 dw = weight_scales(tile, h);
      for (int t = 0; t < kT; ++t) {
        const PanelSums32& s = tok[t].s[b];
        __m256i ph = p[t][h];
        if constexpr (F::kOffset)
          ph = _mm256_sub_epi32(ph, _mm256_set1_epi32(s.sum << F::kOffsetShift));
        acc[t][h] = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(s.d)), _mm256_cvtepi32_ps(ph),
                                    acc[t][h]);
        if constexpr (F::kHasMin)
          summ[t][h] =
              _mm256_fmadd_ps(load_fp16x8(tile.m + 8 * h), _mm256_set1_ps(s.s), summ[t][h]);
      }
    }
  }
  for (int t = 0; t < kT; ++t)
    for (int h = 0; h < 2; ++h)
      store8(y + t * y_stride + 8 * h,
             F::kHasMin ? _mm256_add_ps(acc[t][h], summ[t][h]) : acc[t][h], valid - 8 * h);
}

// IQ4_XS: sub-block j's signed codebook values as |w| x sign-adjusted activations; a pair reaches
// 32258, so each group widens on its own, by the sub-block's scale pairs.
template <int kT>
void panel_iq4_xs(const TileIQ4_XS* tiles, int64_t nb,
                  const TokenRows<BlockQ8_K, PanelSumsK> (&tok)[kT], float* y, int64_t y_stride,
                  int64_t valid, bool stream) {
  __m256 acc[kT][2];
  for (int t = 0; t < kT; ++t) acc[t][0] = acc[t][1] = _mm256_setzero_ps();
  const __m256i table =
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIQ4Values)));
  for (int64_t b = 0; b < nb; ++b) {
    const TileIQ4_XS& tile = tiles[b];
    __m256i l_sum[kT][2];
    for (int t = 0; t < kT; ++t) l_sum[t][0] = l_sum[t][1] = _mm256_setzero_si256();
    for (int j = 0; j < 8; ++j) {
      if (stream) prefetch_ahead(&tile, j, 8);  // weights from memory (panel_prefetch.h)
      const __m256i sc[2] = {scale_pairs_i8(tile.sc[j]), scale_pairs_i8(tile.sc[j] + 8)};
#pragma GCC unroll 1
      for (int g = 0; g < 4; ++g) {
        for (int half_group = 0; half_group < 2; ++half_group) {  // group g, then g + 4
          __m256i w[2], magnitude[2];
          for (int h = 0; h < 2; ++h) {
            const __m256i v = load256(tile.qs[j][g] + 32 * h);
            const __m256i code = _mm256_and_si256(half_group == 0 ? v : _mm256_srli_epi16(v, 4),
                                                  _mm256_set1_epi8(15));
            w[h] = _mm256_shuffle_epi8(table, code);
            magnitude[h] = _mm256_abs_epi8(w[h]);
          }
          for (int t = 0; t < kT; ++t) {
            const __m256i a = broadcast4(tok[t].a[b].qs + 32 * j + 16 * half_group + 4 * g);
            for (int h = 0; h < 2; ++h)
              l_sum[t][h] = _mm256_add_epi32(
                  l_sum[t][h],
                  _mm256_madd_epi16(_mm256_maddubs_epi16(magnitude[h], _mm256_sign_epi8(a, w[h])),
                                    sc[h]));
          }
        }
      }
    }
    for (int h = 0; h < 2; ++h) {
      const __m256 dw = load_fp16x8(tile.d + 8 * h);
      for (int t = 0; t < kT; ++t)
        acc[t][h] = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(tok[t].s[b].d)),
                                    _mm256_cvtepi32_ps(l_sum[t][h]), acc[t][h]);
    }
  }
  for (int t = 0; t < kT; ++t)
    for (int h = 0; h < 2; ++h) store8(y + t * y_stride + 8 * h, acc[t][h], valid - 8 * h);
}

}  // namespace
}  // namespace drift::kernels::avx2
