// Internal: AVX2 helpers shared by the *_avx2.cc files. Internal linkage (see format.h).
#pragma once

#include <immintrin.h>

#include "kernels/exp_approx.h"

namespace drift::kernels::avx2 {
namespace {

// exp_approx on 8 lanes, bit-identical to the scalar definition.
inline __m256 exp8(__m256 x) {
  const __m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
  const __m256 xc = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(kExpLo)), _mm256_set1_ps(kExpHi));
  const __m256 round = _mm256_set1_ps(kExpRound);
  const __m256 n = _mm256_sub_ps(_mm256_fmadd_ps(xc, _mm256_set1_ps(kExpLog2e), round), round);
  const __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kExpLn2Lo),
                                    _mm256_fnmadd_ps(n, _mm256_set1_ps(kExpLn2Hi), xc));
  __m256 p = _mm256_fmadd_ps(_mm256_set1_ps(kExpC5), r, _mm256_set1_ps(kExpC4));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kExpC3));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kExpC2));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kExpC1));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kExpC0));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r);
  p = _mm256_add_ps(p, _mm256_set1_ps(1.0f));
  const __m256i ni = _mm256_cvtps_epi32(n);  // exact: n is an integer
  // n / 2 truncating toward zero, as C++ integer division does.
  const __m256i n1 = _mm256_srai_epi32(_mm256_add_epi32(ni, _mm256_srli_epi32(ni, 31)), 1);
  const __m256i n2 = _mm256_sub_epi32(ni, n1);
  const __m256i bias = _mm256_set1_epi32(127);
  const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
  const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
  const __m256 e = _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
  return _mm256_blendv_ps(e, x, nan);
}

// Horizontal sum of 8 doubles held as two registers (lanes [0, 4) and [4, 8)) in the canonical
// order (u[i] = s[i] + s[i+4]; (u0 + u2) + (u1 + u3)).
inline double reduce8_pd(__m256d lo, __m256d hi) {
  const __m256d u = _mm256_add_pd(lo, hi);
  const __m128d z = _mm_add_pd(_mm256_castpd256_pd128(u), _mm256_extractf128_pd(u, 1));
  return _mm_cvtsd_f64(_mm_add_sd(z, _mm_unpackhi_pd(z, z)));
}

// reduce16 of matmul.h for lanes [0, 8) in a and [8, 16) in b.
inline float reduce16(__m256 a, __m256 b) {
  const __m256 v = _mm256_add_ps(a, b);
  const __m128 u = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  __m128 z = _mm_add_ps(u, _mm_movehl_ps(u, u));
  z = _mm_add_ss(z, _mm_movehdup_ps(z));
  return _mm_cvtss_f32(z);
}

// bf16_operand (fp16.h) on 8 lanes, bit-identical: round to nearest even on the bits, NaN made
// quiet as f32_to_bf16 does, magnitudes below 2^-40 to a zero of their sign.
inline __m256 bf16_operand8(__m256 x) {
  const __m256i b = _mm256_castps_si256(x);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(b, 16), _mm256_set1_epi32(1));
  __m256i r = _mm256_add_epi32(b, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), lsb));
  const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(x, x, _CMP_UNORD_Q));
  r = _mm256_blendv_epi8(r, _mm256_or_si256(b, _mm256_set1_epi32(64 << 16)), nan);
  r = _mm256_and_si256(r, _mm256_set1_epi32(static_cast<int>(0xffff0000u)));
  const __m256i tiny = _mm256_cmpgt_epi32(_mm256_set1_epi32(0x2B800000),
                                          _mm256_and_si256(r, _mm256_set1_epi32(0x7fffffff)));
  return _mm256_castsi256_ps(
      _mm256_andnot_si256(_mm256_and_si256(tiny, _mm256_set1_epi32(0x7fffffff)), r));
}

}  // namespace
}  // namespace drift::kernels::avx2
