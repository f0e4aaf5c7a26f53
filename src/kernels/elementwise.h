// Elementwise fp32 operations (one rounding each, identical on every ISA).
#pragma once

#include <cstdint>

#include "util/cpu_features.h"

namespace drift::kernels {

// All buffers [n]; y may alias an input.
void add(Isa isa, const float* a, const float* b, float* y, int64_t n);  // y = a + b
void mul(Isa isa, const float* a, const float* b, float* y, int64_t n);  // y = a * b
void scale(Isa isa, const float* x, float s, float* y, int64_t n);       // y = x * s

}  // namespace drift::kernels
