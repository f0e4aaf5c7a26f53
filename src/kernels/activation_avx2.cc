#include <immintrin.h>

#include "kernels/activation.h"
#include "kernels/dispatch.h"
#include "kernels/fp16.h"
#include "kernels/simd_avx2.h"

namespace drift::kernels::avx2 {

void silu(const float* x, float* y, int64_t n) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256 e = exp8(_mm256_xor_ps(v, sign));
    _mm256_storeu_ps(y + i, _mm256_div_ps(v, _mm256_add_ps(one, e)));
  }
  for (; i < n; ++i) y[i] = x[i] / (1.0f + exp_approx(-x[i]));
}

void swiglu_oai(const float* gate, const float* up, float* out, int64_t n, float alpha,
                float limit) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 hi = _mm256_set1_ps(limit), lo = _mm256_set1_ps(-limit);
  const __m256 a = _mm256_set1_ps(alpha);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    // min_ps(a, b) is (a < b ? a : b), so limit goes first: a NaN gate stays NaN (std::min).
    const __m256 x = _mm256_min_ps(hi, _mm256_loadu_ps(gate + i));
    const __m256 y = _mm256_min_ps(hi, _mm256_max_ps(lo, _mm256_loadu_ps(up + i)));
    const __m256 e = exp8(_mm256_mul_ps(a, _mm256_xor_ps(x, sign)));
    _mm256_storeu_ps(out + i,
                     _mm256_mul_ps(_mm256_div_ps(x, _mm256_add_ps(one, e)), _mm256_add_ps(y, one)));
  }
  for (; i < n; ++i) out[i] = swiglu_oai_one(gate[i], up[i], alpha, limit);
}

void gelu(const float* x, float* y, int64_t n, const uint16_t* table) {
  const __m256 lo = _mm256_set1_ps(-10.0f);
  const __m256 hi = _mm256_set1_ps(10.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256i idx = _mm256_cvtepu16_epi32(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
    // 32-bit gathers at 2-byte steps (the table has one padding entry); keep the low half.
    const __m256i g = _mm256_i32gather_epi32(reinterpret_cast<const int*>(table), idx, 2);
    const __m128i h = _mm_packus_epi32(
        _mm256_castsi256_si128(_mm256_and_si256(g, _mm256_set1_epi32(0xffff))),
        _mm256_extracti128_si256(_mm256_and_si256(g, _mm256_set1_epi32(0xffff)), 1));
    __m256 r = _mm256_cvtph_ps(h);
    r = _mm256_blendv_ps(r, v, _mm256_cmp_ps(v, hi, _CMP_GE_OQ));
    r = _mm256_blendv_ps(r, _mm256_setzero_ps(), _mm256_cmp_ps(v, lo, _CMP_LE_OQ));
    _mm256_storeu_ps(y + i, r);
  }
  for (; i < n; ++i) {
    const float v = x[i];
    y[i] = v <= -10.0f ? 0.0f : v >= 10.0f ? v : fp16_to_f32(table[f32_to_fp16(v)]);
  }
}

}  // namespace drift::kernels::avx2
