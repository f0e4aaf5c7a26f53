#include <immintrin.h>

#include <cmath>
#include <cstdint>

#include "kernels/dispatch.h"

namespace drift::kernels::avx2 {

namespace {

// Lane state: the largest value seen in the lane and the index where it was first seen.
struct Lanes {
  __m256 value = _mm256_set1_ps(-INFINITY);
  __m256i index = _mm256_set1_epi32(-1);

  // Takes x[i..i+8) where strictly greater (NaN never is), so each lane keeps its first maximum.
  void update(__m256 x, __m256i i) {
    const __m256 greater = _mm256_cmp_ps(x, value, _CMP_GT_OQ);
    value = _mm256_blendv_ps(value, x, greater);
    index = _mm256_castps_si256(
        _mm256_blendv_ps(_mm256_castsi256_ps(index), _mm256_castsi256_ps(i), greater));
  }
};

}  // namespace

// -1 when no value exceeds -inf (the caller's reference decides then).
int32_t argmax(const float* x, int64_t n) {
  // Four lane sets, so that four compare-and-blend chains run at once.
  Lanes lanes[4];
  __m256i index = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i step = _mm256_set1_epi32(8);
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    for (int s = 0; s < 4; ++s) {
      lanes[s].update(_mm256_loadu_ps(x + i + 8 * s), index);
      index = _mm256_add_epi32(index, step);
    }
  }
  for (; i + 8 <= n; i += 8) {
    lanes[0].update(_mm256_loadu_ps(x + i), index);
    index = _mm256_add_epi32(index, step);
  }
  // Reduce by value, then by the smallest index among equal values.
  alignas(32) float value[32];
  alignas(32) int32_t where[32];
  for (int s = 0; s < 4; ++s) {
    _mm256_store_ps(value + 8 * s, lanes[s].value);
    _mm256_store_si256(reinterpret_cast<__m256i*>(where + 8 * s), lanes[s].index);
  }
  float best_value = -INFINITY;
  int64_t best = -1;
  for (int l = 0; l < 32; ++l) {
    if (where[l] < 0) continue;
    if (value[l] > best_value || (value[l] == best_value && where[l] < best)) {
      best_value = value[l];
      best = where[l];
    }
  }
  // The tail comes after every lane's index: only a strictly larger value takes it.
  for (; i < n; ++i)
    if (x[i] > best_value) {
      best_value = x[i];
      best = i;
    }
  return static_cast<int32_t>(best);
}

}  // namespace drift::kernels::avx2
