// The vector pieces attention is composed of (the model code composes them over the KV pages):
// scores q . k against fp16 (or fp32) keys, and the weighted sum of fp16 (or fp32) value rows.
//
// Dot products follow the float canonical order of matmul.h: acc[i % 16] = fma(a[i], b[i],
// acc[i % 16]) in order of i, then reduce16. axpy is one fma per element. Every ISA gives the
// same bits.
#pragma once

#include <cstdint>

#include "util/cpu_features.h"

namespace drift::kernels {

// sum of a[i] * b[i]; a, b: [n].
float dot_f32(Isa isa, const float* a, const float* b, int64_t n);
// sum of q[i] * fp16(k[i]); q: [n] fp32, k: [n] fp16 bits.
float dot_f32_f16(Isa isa, const float* q, const uint16_t* k, int64_t n);
// acc[i] = fma(alpha, fp16(v[i]), acc[i]); v: [n] fp16 bits, acc: [n].
void axpy_f16(Isa isa, float alpha, const uint16_t* v, float* acc, int64_t n);
// acc[i] = fma(alpha, v[i], acc[i]).
void axpy_f32(Isa isa, float alpha, const float* v, float* acc, int64_t n);

}  // namespace drift::kernels
