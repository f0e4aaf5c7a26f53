#include "kernels/rope.h"

#include <cmath>

#include "kernels/dispatch.h"

namespace drift::kernels {

void rope_cache(const RopeParams& p, int64_t position, float* cache) {
  const float theta_scale = std::pow(p.freq_base, -2.0f / static_cast<float>(p.n_dims));
  float theta = static_cast<float>(position);
  for (int64_t i0 = 0; i0 < p.n_dims; i0 += 2) {
    const float ff = p.freq_factors != nullptr ? p.freq_factors[i0 / 2] : 1.0f;
    const float t = p.freq_scale * (theta / ff);
    cache[i0] = std::cos(t) * p.attn_factor;
    cache[i0 + 1] = std::sin(t) * p.attn_factor;
    theta *= theta_scale;
  }
}

void rope_apply(Isa isa, RopeLayout layout, const float* cache, int64_t n_dims, float* x,
                int64_t n_heads, int64_t head_stride) {
  if (isa != Isa::kScalar) return avx2::rope_apply(layout, cache, n_dims, x, n_heads, head_stride);
  const int64_t half = n_dims / 2;
  for (int64_t h = 0; h < n_heads; ++h) {
    float* v = x + h * head_stride;
    for (int64_t i = 0; i < half; ++i) {
      const float c = cache[2 * i], s = cache[2 * i + 1];
      float* a = layout == RopeLayout::kRopeNormal ? v + 2 * i : v + i;
      float* b = layout == RopeLayout::kRopeNormal ? v + 2 * i + 1 : v + i + half;
      const float x0 = *a, x1 = *b;
      *a = x0 * c - x1 * s;
      *b = x0 * s + x1 * c;
    }
  }
}

}  // namespace drift::kernels
