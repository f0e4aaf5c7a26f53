// Rotary position embedding as ggml's rope (ggml_rope_cache_init + rope_yarn + rotate_pairs).
//
// For a token at position p, rope_cache fills cache[2i], cache[2i+1] (i < n_dims/2) with
//   e_i = theta / ff[i],  theta = float(p) * theta_scale^i computed as ggml does (theta starts at
//   float(p) and is multiplied by theta_scale = powf(freq_base, -2.0f / n_dims) once per pair);
//   theta_i = freq_scale * e_i, and with YaRN (ext_factor != 0), mixed back towards the
//   unscaled e_i for the fast-rotating pairs:
//     ramp = 1 - clamp((i - corr_dims[0]) / max(0.001f, corr_dims[1] - corr_dims[0]), 0, 1)
//     theta_i = freq_scale * e_i * (1 - ramp * ext_factor) + e_i * (ramp * ext_factor)
//     m = attn_factor * (1 + 0.1f * logf(1 / freq_scale))      (without YaRN: m = attn_factor)
//   cache = {cosf(theta_i) * m, sinf(theta_i) * m}.
// rope_apply rotates each head's first n_dims values in place (the others are left as they are):
//   kRopeNormal (llama.cpp's LLAMA_ROPE_TYPE_NORM, used for LLM_ARCH_LLAMA/SmolLM2): pairs
//     (2i, 2i+1);
//   kRopeNeox (LLAMA_ROPE_TYPE_NEOX, used for GEMMA3, Qwen2): pairs (i, i + n_dims/2);
//   x0' = x0 * cos - x1 * sin,  x1' = x0 * sin + x1 * cos   (separate roundings, no fma).
// The cache is computed once per token and reused for all heads (and layers with the same
// parameters). rope_apply gives the same bits on every ISA.
#pragma once

#include <cstdint>

#include "util/cpu_features.h"

namespace drift::kernels {

enum class RopeLayout {
  kRopeNormal,
  kRopeNeox,
};

struct RopeParams {
  int64_t n_dims = 0;                   // rotated dimensions per head (even, <= head_dim)
  float freq_base = 10000;              // rope.freq_base
  float freq_scale = 1;                 // 1 / rope.scaling.factor for linear scaling
  float attn_factor = 1;                // multiplies cos and sin
  const float* freq_factors = nullptr;  // [n_dims / 2] (llama3-style rope_freqs) or nullptr
  float ext_factor = 0;                 // YaRN: 0 off, 1 on
  float corr_dims[2] = {0, 0};          // YaRN: the pairs between which the ramp falls
};

// YaRN's correction range for these RoPE dimensions (ggml_rope_yarn_corr_dims): the pairs that
// rotate beta_fast resp. beta_slow times over the original context, floored / ceiled, clamped
// to [0, n_dims - 1].
void rope_yarn_corr_dims(int64_t n_dims, int64_t n_ctx_orig, float freq_base, float beta_fast,
                         float beta_slow, float dims[2]);

// cache: [n_dims] floats, interleaved cos/sin.
void rope_cache(const RopeParams& params, int64_t position, float* cache);

// x: [n_heads][head_stride] floats, each head's first n_dims values rotated in place.
void rope_apply(Isa isa, RopeLayout layout, const float* cache, int64_t n_dims, float* x,
                int64_t n_heads, int64_t head_stride);

}  // namespace drift::kernels
