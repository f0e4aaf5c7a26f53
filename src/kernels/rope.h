// Rotary position embedding as ggml's rope (ggml_rope_cache_init + rotate_pairs), without YaRN
// (ext_factor = 0).
//
// For a token at position p, rope_cache fills cache[2i], cache[2i+1] (i < n_dims/2) with
//   theta_i = freq_scale * (theta / ff[i]),  theta = float(p) * theta_scale^i computed as ggml does
//   (theta starts at float(p) and is multiplied by theta_scale = powf(freq_base, -2.0f / n_dims)
//   once per pair), cache = {cosf(theta_i) * attn_factor, sinf(theta_i) * attn_factor}.
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
};

// cache: [n_dims] floats, interleaved cos/sin.
void rope_cache(const RopeParams& params, int64_t position, float* cache);

// x: [n_heads][head_stride] floats, each head's first n_dims values rotated in place.
void rope_apply(Isa isa, RopeLayout layout, const float* cache, int64_t n_dims, float* x,
                int64_t n_heads, int64_t head_stride);

}  // namespace drift::kernels
