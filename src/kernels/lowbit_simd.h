// Internal: the low-bit formats' SIMD dot products, written once for 256-bit registers and
// instantiated by matmul_lowbit_avx2.cc and matmul_lowbit_avx512.cc with that ISA's integer
// product (the `Products` policy). Include only from a translation unit compiled with AVX2 (and,
// for the VNNI policy, AVX-512 VL + VNNI); everything here has internal linkage.
//
// Each kernel evaluates matmul.h's canonical order: a (super-)block's integer sum L is exact
// whichever way it is added up, so the vector lanes may group the products freely; the float
// sequence per block is the scalar one, so results are bitwise equal to matmul_lowbit.cc's.
//
// Products<P>::scaled(u, a, s0, s1): 8 int32 lanes, lane i = sum of u[4i + j] * a[4i + j] over
// j < 4, times s0 for lanes 0..3 (elements 0..15) and s1 for lanes 4..7 (elements 16..31); u are
// unsigned bytes <= 127, a signed bytes. Signed weights w are passed as u = |w|, a = sign(a, w).
#pragma once

#include <immintrin.h>

#include <cmath>

#include "kernels/fp16.h"
#include "kernels/lowbit_quants.h"
#include "kernels/matmul.h"
#include "kernels/matmul_rows.h"

namespace drift::kernels {
namespace {

__m256i lowbit_load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

int32_t lowbit_hsum(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

// The 32 values of a 16-entry codebook (kIQ4Values, kMXFP4Values) that 16 bytes of nibble codes
// stand for: low nibbles are elements [0, 16), high [16, 32).
__m256i lowbit_codebook_values(const uint8_t* qs, const int8_t* codebook) {
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m256i codes =
      _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(bytes, 4), bytes), _mm256_set1_epi8(15));
  const __m256i table =
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codebook)));
  return _mm256_shuffle_epi8(table, codes);
}

__m256i lowbit_iq4_values(const uint8_t* qs) { return lowbit_codebook_values(qs, kIQ4Values); }

// Unsigned 2-bit fields g (bits 2g, 2g + 1) of 32 bytes.
__m256i lowbit_two_bit_field(__m256i bytes, int g) {
  return _mm256_and_si256(_mm256_srli_epi16(bytes, 2 * g), _mm256_set1_epi8(3));
}

template <class Products>
__m256i signed_scaled(__m256i w, __m256i a, int s0, int s1) {
  return Products::scaled(_mm256_sign_epi8(w, w), _mm256_sign_epi8(a, w), s0, s1);
}

template <class Products>
float lowbit_dot_q2_k(const void* w_row, const void* x_row, int64_t k) {
  const auto* w = static_cast<const BlockQ2_K*>(w_row);
  const auto* a = static_cast<const BlockQ8_K*>(x_row);
  float acc = 0.0f, summ = 0.0f;
  for (int64_t b = 0; b < k / kQKK; ++b) {
    __m256i l_sum = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      const __m256i bytes = lowbit_load256(w[b].qs + 32 * h);
      for (int g = 0; g < 4; ++g) {
        const int j = 8 * h + 2 * g;  // sub-blocks j, j + 1
        l_sum =
            _mm256_add_epi32(l_sum, Products::scaled(lowbit_two_bit_field(bytes, g),
                                                     lowbit_load256(a[b].qs + 128 * h + 32 * g),
                                                     w[b].scales[j] & 15, w[b].scales[j + 1] & 15));
      }
    }
    const __m128i sc = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w[b].scales));
    const __m256i mins =
        _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sc, 4), _mm_set1_epi8(15)));
    const int32_t m_sum = lowbit_hsum(_mm256_madd_epi16(mins, lowbit_load256(a[b].bsums)));
    acc = std::fma(fp16_to_f32(w[b].d) * a[b].d, static_cast<float>(lowbit_hsum(l_sum)), acc);
    summ = std::fma(fp16_to_f32(w[b].dmin) * a[b].d, static_cast<float>(m_sum), summ);
  }
  return acc - summ;
}

template <class Products>
float lowbit_dot_q3_k(const void* w_row, const void* x_row, int64_t k) {
  const auto* w = static_cast<const BlockQ3_K*>(w_row);
  const auto* a = static_cast<const BlockQ8_K*>(x_row);
  float acc = 0.0f;
  for (int64_t b = 0; b < k / kQKK; ++b) {
    int scale[16];
    for (int j = 0; j < 16; ++j) scale[j] = unpack_scale_q3_k(w[b].scales, j) - 32;
    const __m256i hmask = lowbit_load256(w[b].hmask);
    __m256i l_sum = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      const __m256i bytes = lowbit_load256(w[b].qs + 32 * h);
      for (int g = 0; g < 4; ++g) {
        // q = low2 - 4 where the high bit is clear.
        const __m256i bit = _mm256_set1_epi8(static_cast<char>(1 << (4 * h + g)));
        const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(hmask, bit), bit);
        const __m256i q = _mm256_sub_epi8(lowbit_two_bit_field(bytes, g),
                                          _mm256_andnot_si256(set, _mm256_set1_epi8(4)));
        const int j = 8 * h + 2 * g;
        l_sum = _mm256_add_epi32(
            l_sum, signed_scaled<Products>(q, lowbit_load256(a[b].qs + 128 * h + 32 * g), scale[j],
                                           scale[j + 1]));
      }
    }
    acc = std::fma(fp16_to_f32(w[b].d) * a[b].d, static_cast<float>(lowbit_hsum(l_sum)), acc);
  }
  return acc;
}

template <class Products>
float lowbit_dot_iq4_nl(const void* w_row, const void* x_row, int64_t k) {
  const auto* w = static_cast<const BlockIQ4_NL*>(w_row);
  const auto* a = static_cast<const BlockQ8_0*>(x_row);
  float acc = 0.0f;
  for (int64_t b = 0; b < k / kQK; ++b) {
    const __m256i p =
        signed_scaled<Products>(lowbit_iq4_values(w[b].qs), lowbit_load256(a[b].qs), 1, 1);
    acc = std::fma(fp16_to_f32(w[b].d) * fp16_to_f32(a[b].d), static_cast<float>(lowbit_hsum(p)),
                   acc);
  }
  return acc;
}

template <class Products>
float lowbit_dot_mxfp4(const void* w_row, const void* x_row, int64_t k) {
  const auto* w = static_cast<const BlockMXFP4*>(w_row);
  const auto* a = static_cast<const BlockQ8_0*>(x_row);
  float acc = 0.0f;
  for (int64_t b = 0; b < k / kQK; ++b) {
    const __m256i p = signed_scaled<Products>(lowbit_codebook_values(w[b].qs, kMXFP4Values),
                                              lowbit_load256(a[b].qs), 1, 1);
    acc = std::fma(mxfp4_scale(w[b].e) * fp16_to_f32(a[b].d), static_cast<float>(lowbit_hsum(p)),
                   acc);
  }
  return acc;
}

template <class Products>
float lowbit_dot_iq4_xs(const void* w_row, const void* x_row, int64_t k) {
  const auto* w = static_cast<const BlockIQ4_XS*>(w_row);
  const auto* a = static_cast<const BlockQ8_K*>(x_row);
  float acc = 0.0f;
  for (int64_t b = 0; b < k / kQKK; ++b) {
    __m256i l_sum = _mm256_setzero_si256();
    for (int j = 0; j < 8; ++j) {
      const int s = unpack_scale_iq4_xs(w[b], j);
      l_sum =
          _mm256_add_epi32(l_sum, signed_scaled<Products>(lowbit_iq4_values(w[b].qs + 16 * j),
                                                          lowbit_load256(a[b].qs + 32 * j), s, s));
    }
    acc = std::fma(fp16_to_f32(w[b].d) * a[b].d, static_cast<float>(lowbit_hsum(l_sum)), acc);
  }
  return acc;
}

template <class Products>
void add_lowbit_kernels_with(MatmulKernels& t) {
  constexpr DotFn q2 = lowbit_dot_q2_k<Products>, q3 = lowbit_dot_q3_k<Products>;
  constexpr DotFn nl = lowbit_dot_iq4_nl<Products>, xs = lowbit_dot_iq4_xs<Products>;
  constexpr DotFn fp4 = lowbit_dot_mxfp4<Products>;
  t.q2_k = FormatKernels{q2, matmul_rows<q2>};
  t.q3_k = FormatKernels{q3, matmul_rows<q3>};
  t.iq4_nl = FormatKernels{nl, matmul_rows<nl>};
  t.iq4_xs = FormatKernels{xs, matmul_rows<xs>};
  t.mxfp4 = FormatKernels{fp4, matmul_rows<fp4>};
}

}  // namespace
}  // namespace drift::kernels
