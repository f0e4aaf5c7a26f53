#include "kernels/rope.h"

#include <algorithm>
#include <cmath>

#include "kernels/dispatch.h"

namespace drift::kernels {

namespace {

// ggml's rope_yarn_ramp: 1 for the pairs below the correction range, 0 above it.
float yarn_ramp(float low, float high, int64_t i0) {
  const float y = (static_cast<float>(i0 / 2) - low) / std::max(0.001f, high - low);
  return 1.0f - std::min(1.0f, std::max(0.0f, y));
}

float yarn_corr_dim(int64_t n_dims, int64_t n_ctx_orig, float n_rot, float base) {
  return static_cast<float>(n_dims) *
         std::log(static_cast<float>(n_ctx_orig) / (n_rot * 2 * static_cast<float>(M_PI))) /
         (2 * std::log(base));
}

}  // namespace

void rope_yarn_corr_dims(int64_t n_dims, int64_t n_ctx_orig, float freq_base, float beta_fast,
                         float beta_slow, float dims[2]) {
  const float start = std::floor(yarn_corr_dim(n_dims, n_ctx_orig, beta_fast, freq_base));
  const float end = std::ceil(yarn_corr_dim(n_dims, n_ctx_orig, beta_slow, freq_base));
  dims[0] = std::max(0.0f, start);
  dims[1] = std::min(static_cast<float>(n_dims - 1), end);
}

void rope_cache(const RopeParams& p, int64_t position, float* cache) {
  const float theta_scale = std::pow(p.freq_base, -2.0f / static_cast<float>(p.n_dims));
  // YaRN's magnitude factor, the same for every pair (ggml computes it per pair).
  const float yarn_mscale =
      p.ext_factor != 0.0f ? 1.0f + 0.1f * std::log(1.0f / p.freq_scale) : 1.0f;
  float theta = static_cast<float>(position);
  for (int64_t i0 = 0; i0 < p.n_dims; i0 += 2) {
    const float ff = p.freq_factors != nullptr ? p.freq_factors[i0 / 2] : 1.0f;
    const float extrap = theta / ff;
    float t = p.freq_scale * extrap;
    float m = p.attn_factor;
    if (p.ext_factor != 0.0f) {
      const float ramp_mix = yarn_ramp(p.corr_dims[0], p.corr_dims[1], i0) * p.ext_factor;
      t = t * (1 - ramp_mix) + extrap * ramp_mix;
      m *= yarn_mscale;
    }
    cache[i0] = std::cos(t) * m;
    cache[i0 + 1] = std::sin(t) * m;
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
