#include <immintrin.h>

#include "kernels/dispatch.h"

namespace drift::kernels::avx2 {
namespace {

// GCC 12 turns x*c -/+ y*s (in vector or in vectorised scalar code, also written as mul + xor +
// add) into vfmaddsub even with -ffp-contract=off. Hiding the products behind an empty asm keeps
// the two roundings the scalar reference performs.
__m256 opaque(__m256 v) {
  asm("" : "+x"(v));
  return v;
}
float opaque(float v) {
  asm("" : "+x"(v));
  return v;
}

void rotate_scalar(float* a, float* b, float c, float s) {
  const float x0 = *a, x1 = *b;
  *a = opaque(x0 * c) - opaque(x1 * s);
  *b = opaque(x0 * s) + opaque(x1 * c);
}

}  // namespace

void rope_apply(RopeLayout layout, const float* cache, int64_t n_dims, float* x, int64_t n_heads,
                int64_t head_stride) {
  const int64_t half = n_dims / 2;
  for (int64_t h = 0; h < n_heads; ++h) {
    float* v = x + h * head_stride;
    int64_t i = 0;
    if (layout == RopeLayout::kRopeNormal) {
      // 4 pairs per register: v = [x0 x1 ...], cache = [c s ...].
      for (; i + 4 <= half; i += 4) {
        const __m256 xv = _mm256_loadu_ps(v + 2 * i);
        const __m256 cs = _mm256_loadu_ps(cache + 2 * i);
        const __m256 c = _mm256_moveldup_ps(cs);                                // c c
        const __m256 s = _mm256_movehdup_ps(cs);                                // s s
        const __m256 swapped = _mm256_permute_ps(xv, _MM_SHUFFLE(2, 3, 0, 1));  // x1 x0
        // even lanes: x0 c - x1 s; odd lanes: x1 c + x0 s (= x0 s + x1 c).
        _mm256_storeu_ps(v + 2 * i, _mm256_addsub_ps(opaque(_mm256_mul_ps(xv, c)),
                                                     opaque(_mm256_mul_ps(swapped, s))));
      }
    } else {
      for (; i + 8 <= half; i += 8) {
        const __m256 cs0 = _mm256_loadu_ps(cache + 2 * i);
        const __m256 cs1 = _mm256_loadu_ps(cache + 2 * i + 8);
        // De-interleave: shuffle gives [c0 c1 c4 c5 | c2 c3 c6 c7] order per 128-bit lane.
        const __m256 c = _mm256_castpd_ps(_mm256_permute4x64_pd(
            _mm256_castps_pd(_mm256_shuffle_ps(cs0, cs1, _MM_SHUFFLE(2, 0, 2, 0))),
            _MM_SHUFFLE(3, 1, 2, 0)));
        const __m256 s = _mm256_castpd_ps(_mm256_permute4x64_pd(
            _mm256_castps_pd(_mm256_shuffle_ps(cs0, cs1, _MM_SHUFFLE(3, 1, 3, 1))),
            _MM_SHUFFLE(3, 1, 2, 0)));
        const __m256 x0 = _mm256_loadu_ps(v + i);
        const __m256 x1 = _mm256_loadu_ps(v + i + half);
        _mm256_storeu_ps(v + i,
                         _mm256_sub_ps(opaque(_mm256_mul_ps(x0, c)), opaque(_mm256_mul_ps(x1, s))));
        _mm256_storeu_ps(v + i + half,
                         _mm256_add_ps(opaque(_mm256_mul_ps(x0, s)), opaque(_mm256_mul_ps(x1, c))));
      }
    }
    for (; i < half; ++i) {
      if (layout == RopeLayout::kRopeNormal)
        rotate_scalar(v + 2 * i, v + 2 * i + 1, cache[2 * i], cache[2 * i + 1]);
      else
        rotate_scalar(v + i, v + i + half, cache[2 * i], cache[2 * i + 1]);
    }
  }
}

}  // namespace drift::kernels::avx2
