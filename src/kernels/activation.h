// Activation functions of the FFN, matching llama.cpp's CPU backend.
//
// silu(x) = x / (1 + exp_approx(-x))   (ggml: x / (1 + expf(-x)); exp_approx is exp_approx.h's)
// gelu(x): ggml's default GELU (GGML_GELU_FP16): 0 for x <= -10, x for x >= 10, otherwise a table
//   lookup at fp16(x) of fp16(0.5 x (1 + tanh(sqrt(2/pi) x (1 + 0.044715 x^2)))), the tanh
//   approximation evaluated in fp32 with libm's tanhf when the table is built.
// swiglu_oai(g, u) (gpt-oss's clamped SwiGLU, ggml_swiglu_oai): x = min(g, limit),
//   y = clamp(u, -limit, limit), out = (x / (1 + exp_approx(alpha * -x))) * (y + 1).
// All give the same bits on every ISA (NaN inputs propagate as std::min/std::clamp let them).
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/exp_approx.h"
#include "util/cpu_features.h"

namespace drift::kernels {

// x, y: [n] (y may equal x).
void silu(Isa isa, const float* x, float* y, int64_t n);
void gelu(Isa isa, const float* x, float* y, int64_t n);
// gate, up, out: [n] (out may equal gate or up).
void swiglu_oai(Isa isa, const float* gate, const float* up, float* out, int64_t n, float alpha,
                float limit);

// One element of swiglu_oai, the scalar reference (`static inline`: see the note in format.h).
static inline float swiglu_oai_one(float g, float u, float alpha, float limit) {
  const float x = std::min(g, limit);
  const float y = std::clamp(u, -limit, limit);
  return (x / (1.0f + exp_approx(alpha * -x))) * (y + 1.0f);
}

// The fp32 formula behind the GELU table (for tests): 0.5f*x*(1.0f + tanhf(...)).
float gelu_tanh_f32(float x);
// The 65536-entry table (+1 padding entry for 32-bit gathers): fp16 bits of gelu_tanh_f32(x) for
// every fp16 bit pattern x. Built once, immutable.
const uint16_t* gelu_fp16_table();

}  // namespace drift::kernels
