#include <immintrin.h>

#include <cmath>

#include "kernels/dispatch.h"
#include "kernels/simd_avx2.h"

namespace drift::kernels::avx2 {

void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps) {
  __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256 sq = _mm256_mul_ps(v, v);
    lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(sq)));
    hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(sq, 1)));
  }
  double sum;
  if (i < n) {
    alignas(32) double lanes[8];
    _mm256_store_pd(lanes, lo);
    _mm256_store_pd(lanes + 4, hi);
    for (; i < n; ++i) lanes[i % 8] += static_cast<double>(x[i] * x[i]);
    sum = reduce8_pd(_mm256_load_pd(lanes), _mm256_load_pd(lanes + 4));
  } else {
    sum = reduce8_pd(lo, hi);
  }
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  const float scale = 1.0f / std::sqrt(mean + eps);
  const __m256 s = _mm256_set1_ps(scale);
  i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + i), s);
    if (w != nullptr) v = _mm256_mul_ps(v, _mm256_loadu_ps(w + i));
    _mm256_storeu_ps(y + i, v);
  }
  for (; i < n; ++i) y[i] = w != nullptr ? (x[i] * scale) * w[i] : x[i] * scale;
}

}  // namespace drift::kernels::avx2
