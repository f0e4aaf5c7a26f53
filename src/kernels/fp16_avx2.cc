// fp16/bf16 row conversion with F16C and AVX2 (bit-identical to the scalar definitions in fp16.h).
#include <immintrin.h>

#include "kernels/dispatch.h"
#include "kernels/fp16.h"

namespace drift::kernels::avx2 {

void convert_f32_to_fp16(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
  }
  for (; i < n; ++i) dst[i] = f32_to_fp16(src[i]);
}

void convert_fp16_to_f32(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  const __m256i abs_mask = _mm256_set1_epi32(0x7fff);
  const __m256i inf = _mm256_set1_epi32(0x7c00);
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    // F16C quiets signalling NaNs; keep every NaN's bits as the scalar conversion does.
    const __m256i h32 = _mm256_cvtepu16_epi32(h);
    const __m256i is_nan = _mm256_cmpgt_epi32(_mm256_and_si256(h32, abs_mask), inf);
    const __m256i nan = _mm256_or_si256(
        _mm256_slli_epi32(_mm256_and_si256(h32, _mm256_set1_epi32(0x8000)), 16),
        _mm256_or_si256(_mm256_set1_epi32(0x7f800000),
                        _mm256_slli_epi32(_mm256_and_si256(h32, _mm256_set1_epi32(0x3ff)), 13)));
    const __m256 f =
        _mm256_blendv_ps(_mm256_cvtph_ps(h), _mm256_castsi256_ps(nan), _mm256_castsi256_ps(is_nan));
    _mm256_storeu_ps(dst + i, f);
  }
  for (; i < n; ++i) dst[i] = fp16_to_f32(src[i]);
}

void convert_f32_to_bf16(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff);
  const __m256i inf = _mm256_set1_epi32(0x7f800000);
  const __m256i one = _mm256_set1_epi32(1);
  const __m256i bias = _mm256_set1_epi32(0x7fff);
  const __m256i quiet = _mm256_set1_epi32(64);
  for (; i + 16 <= n; i += 16) {
    __m256i out[2];
    for (int h = 0; h < 2; ++h) {
      const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i + 8 * h));
      const __m256i is_nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, abs_mask), inf);
      const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), one);
      const __m256i rounded =
          _mm256_srli_epi32(_mm256_add_epi32(x, _mm256_add_epi32(bias, lsb)), 16);
      const __m256i nan = _mm256_or_si256(_mm256_srli_epi32(x, 16), quiet);
      out[h] = _mm256_blendv_epi8(rounded, nan, is_nan);
    }
    // packus works per 128-bit lane: [a0 b0 a1 b1] -> fix the order with a permute.
    const __m256i packed = _mm256_packus_epi32(out[0], out[1]);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i),
                        _mm256_permute4x64_epi64(packed, _MM_SHUFFLE(3, 1, 2, 0)));
  }
  for (; i < n; ++i) dst[i] = f32_to_bf16(src[i]);
}

void convert_bf16_to_f32(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    const __m256i x = _mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16);
    _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(x));
  }
  for (; i < n; ++i) dst[i] = bf16_to_f32(src[i]);
}

}  // namespace drift::kernels::avx2
