#include <immintrin.h>

#include <cmath>

#include "kernels/dispatch.h"
#include "kernels/simd_avx2.h"

namespace drift::kernels::avx2 {

void softmax(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  __m256 mv = _mm256_set1_ps(-INFINITY);
  for (; i + 8 <= n; i += 8)
    mv = _mm256_max_ps(_mm256_loadu_ps(x + i), mv);  // NaN ignored, as in scalar
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mv), _mm256_extractf128_ps(mv, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
  float m = _mm_cvtss_f32(m4);
  for (; i < n; ++i) m = x[i] > m ? x[i] : m;
  if (m == -INFINITY) {
    for (i = 0; i < n; ++i) y[i] = 0.0f;
    return;
  }
  const __m256 mb = _mm256_set1_ps(m);
  __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
  for (i = 0; i + 8 <= n; i += 8) {
    const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), mb));
    _mm256_storeu_ps(y + i, e);
    lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
    hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
  }
  alignas(32) double lanes[8];
  _mm256_store_pd(lanes, lo);
  _mm256_store_pd(lanes + 4, hi);
  for (; i < n; ++i) {
    y[i] = exp_approx(x[i] - m);
    lanes[i % 8] += static_cast<double>(y[i]);
  }
  const double sum = reduce8_pd(_mm256_load_pd(lanes), _mm256_load_pd(lanes + 4));
  const float scale = static_cast<float>(1.0 / sum);
  const __m256 s = _mm256_set1_ps(scale);
  for (i = 0; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(y + i), s));
  for (; i < n; ++i) y[i] = y[i] * scale;
}

}  // namespace drift::kernels::avx2
