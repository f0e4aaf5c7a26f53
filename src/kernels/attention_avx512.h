// Internal: AVX-512 helpers of the attention files (paged_attention_avx512.cc and its bf16
// part). Internal linkage (see format.h).
#pragma once

#include <immintrin.h>

#include <cmath>
#include <cstdint>

#include "kernels/exp_approx.h"

namespace drift::kernels::avx512 {
namespace {

// exp_approx on 16 lanes, bit-identical: the operations of exp_approx.h, with 2^n applied by
// vscalefps (one rounding, as the scalar path's two exact power-of-two factors give).
inline __m512 exp16(__m512 x) {
  const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  const __m512 xc = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(kExpLo)), _mm512_set1_ps(kExpHi));
  const __m512 round = _mm512_set1_ps(kExpRound);
  const __m512 n = _mm512_sub_ps(_mm512_fmadd_ps(xc, _mm512_set1_ps(kExpLog2e), round), round);
  const __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kExpLn2Lo),
                                    _mm512_fnmadd_ps(n, _mm512_set1_ps(kExpLn2Hi), xc));
  __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(kExpC5), r, _mm512_set1_ps(kExpC4));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kExpC3));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kExpC2));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kExpC1));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kExpC0));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r);
  p = _mm512_add_ps(p, _mm512_set1_ps(1.0f));
  return _mm512_mask_mov_ps(_mm512_scalef_ps(p, n), nan, x);
}

// In place, a 16x16 transpose: lane j of a[i] becomes lane i of a[j].
inline void transpose16(__m512 (&a)[16]) {
  __m512 t[16];
  for (int i = 0; i < 16; i += 2) {  // pairs of rows interleaved
    t[i] = _mm512_unpacklo_ps(a[i], a[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(a[i], a[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {  // 4x4 blocks within each 128-bit lane
    a[i] = _mm512_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    a[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    a[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    a[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  // Then the 4x4 arrangement of those 128-bit blocks.
  const __m512i lo = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27);
  const __m512i hi = _mm512_setr_epi32(4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31);
  for (int g = 0; g < 2; ++g)
    for (int r = 0; r < 4; ++r) {
      t[8 * g + r] = _mm512_permutex2var_ps(a[8 * g + r], lo, a[8 * g + 4 + r]);
      t[8 * g + 4 + r] = _mm512_permutex2var_ps(a[8 * g + r], hi, a[8 * g + 4 + r]);
    }
  const __m512i lo2 = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
  const __m512i hi2 =
      _mm512_setr_epi32(8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
  for (int r = 0; r < 8; ++r) {
    a[r] = _mm512_permutex2var_ps(t[r], lo2, t[8 + r]);
    a[8 + r] = _mm512_permutex2var_ps(t[r], hi2, t[8 + r]);
  }
}

__mmask16 visible(__m512i first, __m512i last, int64_t p) {
  const __m512i pv = _mm512_set1_epi32(static_cast<int32_t>(p));
  return _mm512_cmple_epi32_mask(first, pv) & _mm512_cmple_epi32_mask(pv, last);
}

// The prefill paths' scores of positions [pb, pb + 16) for 16 query lanes (acc[i]: query i,
// the positions in the lanes): transposed into one row of 16 queries per position, scaled, -inf
// where a lane does not see the position, stored at scores + (p - base) * 16 up to p1; the
// lanes' running max raised.
inline void store_lane_scores(__m512 (&acc)[16], int64_t pb, int64_t p1, __m512i first,
                              __m512i last, __m512 scale, float* scores, int64_t base, __m512* m) {
  const __m512 neg_inf = _mm512_set1_ps(-INFINITY);
  transpose16(acc);  // acc[j]: position pb + j of every query
  for (int64_t j = 0; j < 16 && pb + j <= p1; ++j) {
    const __m512 s =
        _mm512_mask_mov_ps(neg_inf, visible(first, last, pb + j), _mm512_mul_ps(acc[j], scale));
    _mm512_store_ps(scores + (pb + j - base) * 16, s);
    *m = _mm512_max_ps(*m, s);
  }
}

// The decode paths' scores of positions [pb, pb + 16 B) for N queries (acc[b][i]: positions
// pb + 16 b + lane of query i): scaled, -inf outside [first, last], stored at
// scores + i * span + (p - base); each query's running max raised.
template <int B, int N>
inline void store_position_scores(const __m512 (&acc)[B][N], int64_t pb, int64_t first,
                                  int64_t last, __m512 scale, float* scores, int64_t span,
                                  int64_t base, __m512* m) {
  const __m512 neg_inf = _mm512_set1_ps(-INFINITY);
  const __m512i lane_index =
      _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  for (int b = 0; b < B; ++b) {
    const int64_t p = pb + 16 * b;
    const __m512i pos = _mm512_add_epi32(_mm512_set1_epi32(static_cast<int32_t>(p)), lane_index);
    const __mmask16 inside =
        _mm512_cmple_epi32_mask(_mm512_set1_epi32(static_cast<int32_t>(first)), pos) &
        _mm512_cmple_epi32_mask(pos, _mm512_set1_epi32(static_cast<int32_t>(last)));
    for (int i = 0; i < N; ++i) {
      const __m512 sc = _mm512_mask_mov_ps(neg_inf, inside, _mm512_mul_ps(acc[b][i], scale));
      _mm512_store_ps(scores + i * span + (p - base), sc);
      m[i] = _mm512_max_ps(m[i], sc);
    }
  }
}

// bf16_operand (fp16.h) on 16 lanes, bit-identical: round to nearest even on the bits, NaN made
// quiet as f32_to_bf16 does, magnitudes below 2^-40 to a zero of their sign.
inline __m512 bf16_operand16(__m512 x) {
  const __m512i b = _mm512_castps_si512(x);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(b, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_add_epi32(b, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), lsb));
  const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  r = _mm512_mask_or_epi32(r, nan, b, _mm512_set1_epi32(64 << 16));
  r = _mm512_and_si512(r, _mm512_set1_epi32(static_cast<int>(0xffff0000u)));
  const __mmask16 tiny = _mm512_cmplt_epi32_mask(_mm512_and_si512(r, _mm512_set1_epi32(0x7fffffff)),
                                                 _mm512_set1_epi32(0x2B800000));
  return _mm512_castsi512_ps(
      _mm512_mask_and_epi32(r, tiny, r, _mm512_set1_epi32(static_cast<int>(0x80000000u))));
}

}  // namespace
}  // namespace drift::kernels::avx512
