#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "kernels/dispatch.h"
#include "kernels/fp16.h"
#include "kernels/simd_avx2.h"

namespace drift::kernels::avx2 {
namespace {

__m256 load_f16x8(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// Dot product with lanes i % 16; the tail is zero-padded (adding +0 to an accumulator that is
// never -0 changes nothing).
template <class Load>
float dot16(const float* a, const void* b, int64_t n, Load load_b) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), load_b(b, i), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), load_b(b, i + 8), acc1);
  }
  if (i < n) {
    alignas(32) float ap[16] = {}, bp[16] = {};
    for (int64_t j = i; j < n; ++j) {
      ap[j - i] = a[j];
      bp[j - i] = load_b.scalar(b, j);
    }
    acc0 = _mm256_fmadd_ps(_mm256_load_ps(ap), _mm256_load_ps(bp), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_load_ps(ap + 8), _mm256_load_ps(bp + 8), acc1);
  }
  return reduce16(acc0, acc1);
}

struct LoadF32 {
  __m256 operator()(const void* p, int64_t i) const {
    return _mm256_loadu_ps(static_cast<const float*>(p) + i);
  }
  float scalar(const void* p, int64_t i) const { return static_cast<const float*>(p)[i]; }
};
struct LoadF16 {
  __m256 operator()(const void* p, int64_t i) const {
    return load_f16x8(static_cast<const uint16_t*>(p) + i);
  }
  float scalar(const void* p, int64_t i) const {
    return fp16_to_f32(static_cast<const uint16_t*>(p)[i]);
  }
};

}  // namespace

float dot_f32(const float* a, const float* b, int64_t n) { return dot16(a, b, n, LoadF32{}); }

float dot_f32_f16(const float* q, const uint16_t* k, int64_t n) {
  return dot16(q, k, n, LoadF16{});
}

void axpy_f16(float alpha, const uint16_t* v, float* acc, int64_t n) {
  const __m256 a = _mm256_set1_ps(alpha);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(a, load_f16x8(v + i), _mm256_loadu_ps(acc + i)));
  for (; i < n; ++i) acc[i] = std::fma(alpha, fp16_to_f32(v[i]), acc[i]);
}

void axpy_f32(float alpha, const float* v, float* acc, int64_t n) {
  const __m256 a = _mm256_set1_ps(alpha);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(a, _mm256_loadu_ps(v + i), _mm256_loadu_ps(acc + i)));
  for (; i < n; ++i) acc[i] = std::fma(alpha, v[i], acc[i]);
}

}  // namespace drift::kernels::avx2
