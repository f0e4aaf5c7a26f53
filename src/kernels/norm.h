// RMSNorm as ggml computes it (ggml_compute_forward_rms_norm_f32, then the weight multiply):
//   sum  = sum over i of double(x[i] * x[i])      (fp32 products, accumulated in double)
//   mean = float(sum / n);  scale = 1.0f / sqrtf(mean + eps)
//   y[i] = (x[i] * scale) * w[i]                  (w == nullptr: y[i] = x[i] * scale)
// The double sum runs in 8 lanes (lane i % 8, in order of i) reduced by a fixed tree, so every ISA
// gives the same bits. (Gemma's "1 + w" is already folded into its GGUF norm weights.)
#pragma once

#include <cstdint>

#include "util/cpu_features.h"

namespace drift::kernels {

// x, y: [n] (y may equal x); w: [n] or nullptr; eps >= 0.
void rms_norm(Isa isa, const float* x, const float* w, float* y, int64_t n, float eps);

}  // namespace drift::kernels
