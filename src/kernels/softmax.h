// Softmax over one row, as ggml's soft_max computes it (max subtraction, double sum, one scale):
//   m = max(x);  e[i] = exp_approx(x[i] - m);  sum = sum over i of double(e[i])
//   y[i] = e[i] * float(1.0 / sum)
// exp_approx (exp_approx.h) replaces ggml's expf / vectorised exp; the double sum runs in 8 lanes
// (lane i % 8) reduced by a fixed tree, so every ISA gives the same bits. A row that is all -inf
// (fully masked) gives zeros.
#pragma once

#include <cstdint>

#include "util/cpu_features.h"

namespace drift::kernels {

// x, y: [n], n >= 1 (y may equal x).
void softmax(Isa isa, const float* x, float* y, int64_t n);

}  // namespace drift::kernels
