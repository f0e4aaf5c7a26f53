// AVX2 panel kernels: the canonical order of panel.h on CPUs without AVX-512. A 16-row panel is
// run as two halves of 8 rows (one ymm of int32 lanes each); one token (decode) takes both halves
// in one pass (panel_avx2_decode.h). Without vpdpbusd, a group's products go through vpmaddubsw
// (unsigned codes x signed activations, pairs into int16 — no saturation: codes <= 63 and
// |a| <= 127); as many groups as the largest code allows add up in int16 before one vpmaddwd
// widens them, by ones or straight by the sub-block's scale. Q8_0's and the codebooks' signed
// values are multiplied as |w| x sign-adjusted activations, which needs no offset. The integer
// sums are exact, so they equal the AVX-512 ones and the float sequence is the same.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/lowbit_quants.h"
#include "kernels/panel.h"
#include "kernels/panel_avx2_decode.h"
#include "kernels/panel_avx2_rows16.h"
#include "kernels/panel_avx2_simd.h"
#include "kernels/panel_dispatch.h"
#include "kernels/panel_layout.h"
#include "kernels/panel_prefetch.h"

namespace drift::kernels::avx2 {
namespace {

// 4-bit codes (Q4_0, Q4_1), group by group: one nibble load gives groups g and g + 4, each used by
// every token of the tile before the next is unpacked, and each token's int16 sum of the block's 8
// groups stays in a register. Unpacking all 8 groups first (half32 below) holds them beside 2 kT
// float accumulators, more than the 16 ymm registers, and the compiler spilled them (figures in
// docs/design-notes.md, "Batched decode on AVX2"). The mins' sums run as a second pass over the
// blocks (their own fma sequence, in block order), which keeps them out of the registers too.
template <class F, int kT>
void half32_codes4(const typename F::Tile* tiles, int64_t nb, int h,
                   const TokenRows<typename F::ABlock, PanelSums32> (&tok)[kT], float* y,
                   int64_t y_stride, int64_t valid, bool stream) {
  static_assert(F::kInt16Groups == 8);
  __m256 acc[kT];
  for (int t = 0; t < kT; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const typename F::Tile& tile = tiles[b];
    if (stream && h == 0) prefetch_ahead(&tile, 0, 1);  // weights from memory
    // One group's products for every token: group 0's start each token's sum (no zeroing and
    // adding), the others add to it.
    __m256i s16[kT];
    auto add_group = [&](__m256i w, int offset, bool first) {
      for (int t = 0; t < kT; ++t) {
        const __m256i p = _mm256_maddubs_epi16(w, broadcast4(tok[t].a[b].qs + offset));
        s16[t] = first ? p : _mm256_add_epi16(s16[t], p);
      }
    };
    __m256i lo, hi;  // groups g and g + 4
    F::unpack_pair(tile, 0, h, lo, hi);
    add_group(lo, 0, true);
    add_group(hi, 16, false);
#pragma GCC unroll 1
    for (int g = 1; g < 4; ++g) {
      F::unpack_pair(tile, g, h, lo, hi);
      add_group(lo, 4 * g, false);
      add_group(hi, 16 + 4 * g, false);
    }
    const __m256 dw = weight_scales(tile, h);
    for (int t = 0; t < kT; ++t) {
      const PanelSums32& s = tok[t].s[b];
      __m256i p = _mm256_madd_epi16(s16[t], _mm256_set1_epi16(1));
      if constexpr (F::kOffset)
        p = _mm256_sub_epi32(p, _mm256_set1_epi32(s.sum << F::kOffsetShift));
      acc[t] =
          _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(s.d)), _mm256_cvtepi32_ps(p), acc[t]);
    }
  }
  if constexpr (F::kHasMin) {
    __m256 summ[kT];
    for (int t = 0; t < kT; ++t) summ[t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      const __m256 mw = load_fp16x8(tiles[b].m + 8 * h);
      for (int t = 0; t < kT; ++t)
        summ[t] = _mm256_fmadd_ps(mw, _mm256_set1_ps(tok[t].s[b].s), summ[t]);
    }
    for (int t = 0; t < kT; ++t) acc[t] = _mm256_add_ps(acc[t], summ[t]);
  }
  for (int t = 0; t < kT; ++t) store8(y + t * y_stride, acc[t], valid);
}

template <class F, int kT>
void half32(const typename F::Tile* tiles, int64_t nb, int h,
            const TokenRows<typename F::ABlock, PanelSums32> (&tok)[kT], float* y, int64_t y_stride,
            int64_t valid, bool stream) {
  if constexpr (F::kInt16Groups == 8)
    return half32_codes4<F, kT>(tiles, nb, h, tok, y, y_stride, valid, stream);
  __m256 acc[kT], summ[kT];
  for (int t = 0; t < kT; ++t) acc[t] = summ[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const typename F::Tile& tile = tiles[b];
    if (stream && h == 0) prefetch_ahead(&tile, 0, 1);  // weights from memory
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
               int64_t valid, bool stream) {
  __m256 acc[kT], summ[kT];
  for (int t = 0; t < kT; ++t) acc[t] = summ[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const TileQ4_K& tile = tiles[b];
    __m256i l_sum[kT];
    for (int t = 0; t < kT; ++t) l_sum[t] = _mm256_setzero_si256();
    for (int j = 0; j < 8; ++j) {
      if (stream && h == 0) prefetch_ahead(&tile, j, 8);  // weights from memory
      __m256i w[8];
      unpack_nibbles(tile.qs[j], h, w);
      const __m256i sc = scale_pairs_u8(tile.sc[j] + 8 * h);
      for (int t = 0; t < kT; ++t) {
        // 4-bit codes: the 8 groups' vpmaddubsw pairs add up in int16 (<= 8 * 3810 < 2^15).
        const int8_t* aq = tok[t].a[b].qs + 32 * j;
        __m256i s16 = _mm256_maddubs_epi16(w[0], broadcast4(aq));
        for (int l = 1; l < 8; ++l)
          s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(w[l], broadcast4(aq + 4 * l)));
        l_sum[t] = _mm256_add_epi32(l_sum[t], _mm256_madd_epi16(s16, sc));
      }
    }
    const Q4KHalf half(tile, h);
    for (int t = 0; t < kT; ++t) {
      half.add(tok[t].s[b], l_sum[t], acc[t], summ[t]);
    }
  }
  for (int t = 0; t < kT; ++t) store8(y + t * y_stride, _mm256_sub_ps(acc[t], summ[t]), valid);
}

template <int kT>
void half_q6_k(const TileQ6_K* tiles, int64_t nb, int h,
               const TokenRows<BlockQ8_K, PanelSumsK> (&tok)[kT], float* y, int64_t y_stride,
               int64_t valid, bool stream) {
  __m256 acc[kT];
  for (int t = 0; t < kT; ++t) acc[t] = _mm256_setzero_ps();
  const __m256i m4 = _mm256_set1_epi8(15);
  for (int64_t b = 0; b < nb; ++b) {
    const TileQ6_K& tile = tiles[b];
    __m256i l_sum[kT];
    for (int t = 0; t < kT; ++t) l_sum[t] = _mm256_setzero_si256();
    for (int j = 0; j < 16; ++j) {
      if (stream && h == 0) prefetch_ahead(&tile, j, 16);  // weights from memory
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
      const __m256i sc = scale_pairs_i8(tile.sc[j] + 8 * h);
      for (int t = 0; t < kT; ++t) {
        // 6-bit codes: two groups' vpmaddubsw pairs add up in int16 (<= 2 * 16002 < 2^15).
        const int8_t* aq = tok[t].a[b].qs + 16 * j;
        const __m256i s01 = _mm256_add_epi16(_mm256_maddubs_epi16(w[0], broadcast4(aq)),
                                             _mm256_maddubs_epi16(w[1], broadcast4(aq + 4)));
        const __m256i s23 = _mm256_add_epi16(_mm256_maddubs_epi16(w[2], broadcast4(aq + 8)),
                                             _mm256_maddubs_epi16(w[3], broadcast4(aq + 12)));
        l_sum[t] = _mm256_add_epi32(
            l_sum[t], _mm256_add_epi32(_mm256_madd_epi16(s01, sc), _mm256_madd_epi16(s23, sc)));
      }
    }
    subtract_code_offsets<5>(tile.sc, h, b, tok, l_sum);
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
                 int64_t valid, bool stream) {
  __m256 acc[kT];
  for (int t = 0; t < kT; ++t) acc[t] = _mm256_setzero_ps();
  const __m256i table =
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIQ4Values)));
  for (int64_t b = 0; b < nb; ++b) {
    const TileIQ4_XS& tile = tiles[b];
    __m256i l_sum[kT];
    for (int t = 0; t < kT; ++t) l_sum[t] = _mm256_setzero_si256();
    for (int j = 0; j < 8; ++j) {
      if (stream && h == 0) prefetch_ahead(&tile, j, 8);  // weights from memory
      __m256i w[8];
      unpack_nibbles(tile.qs[j], h, w);
      __m256i magnitude[8];
      for (int l = 0; l < 8; ++l) {
        w[l] = _mm256_shuffle_epi8(table, w[l]);
        magnitude[l] = _mm256_abs_epi8(w[l]);
      }
      const __m256i sc = scale_pairs_i8(tile.sc[j] + 8 * h);
      for (int t = 0; t < kT; ++t) {
        // |w| x sign-adjusted a: a pair reaches 32258, so each group widens on its own, by the
        // scale instead of by ones.
        const int8_t* aq = tok[t].a[b].qs + 32 * j;
        __m256i p = _mm256_setzero_si256();
        for (int l = 0; l < 8; ++l)
          p = _mm256_add_epi32(
              p,
              _mm256_madd_epi16(_mm256_maddubs_epi16(
                                    magnitude[l], _mm256_sign_epi8(broadcast4(aq + 4 * l), w[l])),
                                sc));
        l_sum[t] = _mm256_add_epi32(l_sum[t], p);
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
               int64_t valid, bool stream) {
  __m256 acc[kT], summ[kT];
  for (int t = 0; t < kT; ++t) acc[t] = summ[t] = _mm256_setzero_ps();
  const __m256i m2 = _mm256_set1_epi8(3);
  const __m128i m4 = _mm_set1_epi8(15);
  for (int64_t b = 0; b < nb; ++b) {
    const TileQ2_K& tile = tiles[b];
    if (stream && h == 0) prefetch_ahead(&tile, 0, 1);  // weights from memory
    __m256i l_sum[kT];
    for (int t = 0; t < kT; ++t) l_sum[t] = _mm256_setzero_si256();
    for (int j = 0; j < 16; ++j) {
      const __m256i v = load256(tile.qs[j] + 32 * h);
      __m256i w[4];
      for (int g = 0; g < 4; ++g) w[g] = _mm256_and_si256(_mm256_srli_epi16(v, 2 * g), m2);
      const __m256i sc = scale_pairs(_mm_cvtepu8_epi16(_mm_and_si128(
          _mm_loadl_epi64(reinterpret_cast<const __m128i*>(tile.scales[j] + 8 * h)), m4)));
      for (int t = 0; t < kT; ++t)
        l_sum[t] = _mm256_add_epi32(
            l_sum[t], _mm256_madd_epi16(sub_block16_sum16(w, tok[t].a[b].qs + 16 * j), sc));
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
               int64_t valid, bool stream) {
  __m256 acc[kT];
  for (int t = 0; t < kT; ++t) acc[t] = _mm256_setzero_ps();
  const __m256i m2 = _mm256_set1_epi8(3);
  const __m256i bit = _mm256_set1_epi8(4);
  for (int64_t b = 0; b < nb; ++b) {
    const TileQ3_K& tile = tiles[b];
    if (stream && h == 0) prefetch_ahead(&tile, 0, 1);  // weights from memory
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
      const __m256i sc = scale_pairs_i8(tile.sc[j] + 8 * h);
      for (int t = 0; t < kT; ++t)
        l_sum[t] = _mm256_add_epi32(
            l_sum[t], _mm256_madd_epi16(sub_block16_sum16(w, tok[t].a[b].qs + 16 * j), sc));
    }
    subtract_code_offsets<2>(tile.sc, h, b, tok, l_sum);
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
              int64_t t0, float* y, int64_t valid, bool stream) {
  TokenRows<typename Kernel::ABlock, typename Kernel::Sums> tok[kT];
  for (int t = 0; t < kT; ++t) {
    tok[t].a =
        reinterpret_cast<const typename Kernel::ABlock*>(args.x + (t0 + t) * args.x_row_bytes);
    tok[t].s =
        reinterpret_cast<const typename Kernel::Sums*>(args.sums + (t0 + t) * args.sums_row_bytes);
  }
  Kernel::template half<kT>(tiles, nb, h, tok, y + t0 * args.y_row_stride, args.y_row_stride, valid,
                            stream);
}

// Tokens per register tile: 16 ymm registers hold a half's unpacked codes (8) beside 4 tokens'
// sums; 8 tokens spill (docs/design-notes.md, "Decode at the bandwidth wall", has the figures).
// The 4-bit codes' group-by-group order ran 4, 5 and 6 tokens within noise of each other.
inline constexpr int kAvx2PanelTokens = 4;

template <class Kernel>
void panel_loop(const PanelArgs& args, int64_t panel_begin, int64_t panel_end) {
  constexpr int kT = Kernel::kTokens;
  const int64_t nb = args.k / Kernel::kBlock;
  const auto* tiles = reinterpret_cast<const typename Kernel::Tile*>(args.panels);
  // Chunks of panels with the token tiles outside, as the AVX-512 loop (see there why).
  const int64_t panel_bytes = nb * static_cast<int64_t>(sizeof(typename Kernel::Tile));
  const int64_t chunk = std::max<int64_t>(1, kPanelChunkBytes / panel_bytes);
  // Matmuls of a few tokens take all 16 rows of a panel per pass (panel_avx2_rows16.h); the
  // formats whose 16-row kernel is also the faster one for many tokens take it for every tile.
  const bool rows16 = args.n_tokens >= 2 && args.n_tokens <= Kernel::kRows16MaxTokens;
  auto run = [&]<int kTokens>(int64_t c0, int64_t c1, int64_t t0) {
    if constexpr (kTokens > 1 && Kernel::kRows16MaxTokens > 0 &&
                  requires { &Kernel::template panel<kTokens>; }) {
      if (rows16) {
        TokenRows<typename Kernel::ABlock, typename Kernel::Sums> tok[kTokens];
        for (int t = 0; t < kTokens; ++t) {
          tok[t].a = reinterpret_cast<const typename Kernel::ABlock*>(args.x +
                                                                      (t0 + t) * args.x_row_bytes);
          tok[t].s = reinterpret_cast<const typename Kernel::Sums*>(args.sums +
                                                                    (t0 + t) * args.sums_row_bytes);
        }
        // The first token tile reads the chunk's weights from memory, the later ones from L2.
        for (int64_t p = c0; p < c1; ++p)
          Kernel::template panel<kTokens>(tiles + p * nb, nb, tok,
                                          args.y + t0 * args.y_row_stride + p * kPanelRows,
                                          args.y_row_stride, args.rows - p * kPanelRows, t0 == 0);
        return;
      }
    }
    if constexpr (kTokens == 1 && requires { &Kernel::one_token; }) {
      const TokenRows<typename Kernel::ABlock, typename Kernel::Sums> tok{
          reinterpret_cast<const typename Kernel::ABlock*>(args.x + t0 * args.x_row_bytes),
          reinterpret_cast<const typename Kernel::Sums*>(args.sums + t0 * args.sums_row_bytes)};
      for (int64_t p = c0; p < c1; ++p)
        Kernel::one_token(tiles + p * nb, nb, tok, args.y + t0 * args.y_row_stride + p * kPanelRows,
                          args.rows - p * kPanelRows);
      return;
    }
    for (int64_t p = c0; p < c1; ++p)
      for (int h = 0; h < 2; ++h) {
        const int64_t valid = args.rows - p * kPanelRows - 8 * h;
        if (valid <= 0) break;
        // The first token tile reads the chunk's weights from memory, the later ones from L2.
        run_tile<Kernel, kTokens>(args, tiles + p * nb, nb, h, t0, args.y + p * kPanelRows + 8 * h,
                                  valid, t0 == 0);
      }
  };
  for (int64_t c0 = panel_begin; c0 < panel_end; c0 += chunk) {
    const int64_t c1 = std::min(panel_end, c0 + chunk);
    int64_t t0 = 0;
    for (; t0 + kT <= args.n_tokens; t0 += kT) run.template operator()<kT>(c0, c1, t0);
    if constexpr (kT > 2)
      for (; t0 + 2 <= args.n_tokens; t0 += 2) run.template operator()<2>(c0, c1, t0);
    if (t0 < args.n_tokens) run.template operator()<1>(c0, c1, t0);
  }
}

// Up to how many tokens a 32-element format's matmul runs its 16-row kernel. Measured against the
// halves (single thread, docs/design-notes.md "Small batches and deep decodes"): signed values
// widen every group anyway and win at every size; 4-bit codes win for a few tokens and lose ~10%
// on long prompts, where the halves keep their float accumulators in registers; 5-bit codes and
// MXFP4 (two int16 runs) lose at every size.
template <class F>
inline constexpr int64_t kRows16Tokens32 = F::kInt16Groups == 1   ? INT64_MAX
                                           : F::kInt16Groups == 8 ? 8
                                                                  : 0;

template <class F>
struct Kernel32 {
  using Tile = typename F::Tile;
  using ABlock = typename F::ABlock;
  using Sums = PanelSums32;
  static constexpr int kTokens = kAvx2PanelTokens;
  static constexpr int64_t kRows16MaxTokens = kRows16Tokens32<F>;
  static constexpr int64_t kBlock = kQK;
  template <int kT>
  static void half(const Tile* tiles, int64_t nb, int h, const TokenRows<ABlock, Sums> (&tok)[kT],
                   float* y, int64_t y_stride, int64_t valid, bool stream) {
    half32<F, kT>(tiles, nb, h, tok, y, y_stride, valid, stream);
  }
  template <int kT>
  static void panel(const Tile* tiles, int64_t nb, const TokenRows<ABlock, Sums> (&tok)[kT],
                    float* y, int64_t y_stride, int64_t valid, bool stream) {
    panel32<F, kT>(tiles, nb, tok, y, y_stride, valid, stream);
  }
  static void one_token(const Tile* tiles, int64_t nb, const TokenRows<ABlock, Sums>& tok, float* y,
                        int64_t valid) {
    panel32_one_token<F>(tiles, nb, tok.a, tok.s, y, valid);
  }
};
struct KernelQ4K {
  using Tile = TileQ4_K;
  using ABlock = BlockQ8_K;
  using Sums = PanelSumsK;
  static constexpr int kTokens = kAvx2PanelTokens;
  static constexpr int64_t kRows16MaxTokens = INT64_MAX;
  static constexpr int64_t kBlock = kQKK;
  template <int kT>
  static void half(const Tile* tiles, int64_t nb, int h, const TokenRows<ABlock, Sums> (&tok)[kT],
                   float* y, int64_t y_stride, int64_t valid, bool stream) {
    half_q4_k<kT>(tiles, nb, h, tok, y, y_stride, valid, stream);
  }
  template <int kT>
  static void panel(const Tile* tiles, int64_t nb, const TokenRows<ABlock, Sums> (&tok)[kT],
                    float* y, int64_t y_stride, int64_t valid, bool stream) {
    panel_q4_k<kT>(tiles, nb, tok, y, y_stride, valid, stream);
  }
  static void one_token(const Tile* tiles, int64_t nb, const TokenRows<ABlock, Sums>& tok, float* y,
                        int64_t valid) {
    panel_q4_k_one_token(tiles, nb, tok.a, tok.s, y, valid);
  }
};
struct KernelIQ4XS {
  using Tile = TileIQ4_XS;
  using ABlock = BlockQ8_K;
  using Sums = PanelSumsK;
  static constexpr int kTokens = kAvx2PanelTokens;
  static constexpr int64_t kRows16MaxTokens = INT64_MAX;
  static constexpr int64_t kBlock = kQKK;
  template <int kT>
  static void half(const Tile* tiles, int64_t nb, int h, const TokenRows<ABlock, Sums> (&tok)[kT],
                   float* y, int64_t y_stride, int64_t valid, bool stream) {
    half_iq4_xs<kT>(tiles, nb, h, tok, y, y_stride, valid, stream);
  }
  template <int kT>
  static void panel(const Tile* tiles, int64_t nb, const TokenRows<ABlock, Sums> (&tok)[kT],
                    float* y, int64_t y_stride, int64_t valid, bool stream) {
    panel_iq4_xs<kT>(tiles, nb, tok, y, y_stride, valid, stream);
  }
  static void one_token(const Tile* tiles, int64_t nb, const TokenRows<ABlock, Sums>& tok, float* y,
                        int64_t valid) {
    panel_iq4_xs_one_token(tiles, nb, tok.a, tok.s, y, valid);
  }
};
struct KernelQ2K {
  using Tile = TileQ2_K;
  using ABlock = BlockQ8_K;
  using Sums = PanelSumsK;
  static constexpr int kTokens = kAvx2PanelTokens;
  static constexpr int64_t kRows16MaxTokens = 0;  // no 16-row kernel
  static constexpr int64_t kBlock = kQKK;
  template <int kT>
  static void half(const Tile* tiles, int64_t nb, int h, const TokenRows<ABlock, Sums> (&tok)[kT],
                   float* y, int64_t y_stride, int64_t valid, bool stream) {
    half_q2_k<kT>(tiles, nb, h, tok, y, y_stride, valid, stream);
  }
};
struct KernelQ3K {
  using Tile = TileQ3_K;
  using ABlock = BlockQ8_K;
  using Sums = PanelSumsK;
  static constexpr int kTokens = kAvx2PanelTokens;
  static constexpr int64_t kRows16MaxTokens = 0;  // no 16-row kernel
  static constexpr int64_t kBlock = kQKK;
  template <int kT>
  static void half(const Tile* tiles, int64_t nb, int h, const TokenRows<ABlock, Sums> (&tok)[kT],
                   float* y, int64_t y_stride, int64_t valid, bool stream) {
    half_q3_k<kT>(tiles, nb, h, tok, y, y_stride, valid, stream);
  }
};
struct KernelQ6K {
  using Tile = TileQ6_K;
  using ABlock = BlockQ8_K;
  using Sums = PanelSumsK;
  static constexpr int kTokens = kAvx2PanelTokens;
  static constexpr int64_t kRows16MaxTokens = INT64_MAX;
  static constexpr int64_t kBlock = kQKK;
  template <int kT>
  static void half(const Tile* tiles, int64_t nb, int h, const TokenRows<ABlock, Sums> (&tok)[kT],
                   float* y, int64_t y_stride, int64_t valid, bool stream) {
    half_q6_k<kT>(tiles, nb, h, tok, y, y_stride, valid, stream);
  }
  template <int kT>
  static void panel(const Tile* tiles, int64_t nb, const TokenRows<ABlock, Sums> (&tok)[kT],
                    float* y, int64_t y_stride, int64_t valid, bool stream) {
    panel_q6_k<kT>(tiles, nb, tok, y, y_stride, valid, stream);
  }
  static void one_token(const Tile* tiles, int64_t nb, const TokenRows<ABlock, Sums>& tok, float* y,
                        int64_t valid) {
    panel_q6_k_one_token(tiles, nb, tok.a, tok.s, y, valid);
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
