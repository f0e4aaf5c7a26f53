#include "kernels/attention_ops.h"

#include <cmath>

#include "kernels/dispatch.h"
#include "kernels/fp16.h"

namespace drift::kernels {
namespace {

float reduce16(const float* acc) {
  float v[8], u[4];
  for (int i = 0; i < 8; ++i) v[i] = acc[i] + acc[i + 8];
  for (int i = 0; i < 4; ++i) u[i] = v[i] + v[i + 4];
  return (u[0] + u[2]) + (u[1] + u[3]);
}

}  // namespace

float dot_f32(Isa isa, const float* a, const float* b, int64_t n) {
  if (isa != Isa::kScalar) return avx2::dot_f32(a, b, n);
  float acc[16] = {};
  for (int64_t i = 0; i < n; ++i) acc[i % 16] = std::fma(a[i], b[i], acc[i % 16]);
  return reduce16(acc);
}

float dot_f32_f16(Isa isa, const float* q, const uint16_t* k, int64_t n) {
  if (isa != Isa::kScalar) return avx2::dot_f32_f16(q, k, n);
  float acc[16] = {};
  for (int64_t i = 0; i < n; ++i) acc[i % 16] = std::fma(q[i], fp16_to_f32(k[i]), acc[i % 16]);
  return reduce16(acc);
}

void axpy_f16(Isa isa, float alpha, const uint16_t* v, float* acc, int64_t n) {
  if (isa != Isa::kScalar) return avx2::axpy_f16(alpha, v, acc, n);
  for (int64_t i = 0; i < n; ++i) acc[i] = std::fma(alpha, fp16_to_f32(v[i]), acc[i]);
}

void axpy_f32(Isa isa, float alpha, const float* v, float* acc, int64_t n) {
  if (isa != Isa::kScalar) return avx2::axpy_f32(alpha, v, acc, n);
  for (int64_t i = 0; i < n; ++i) acc[i] = std::fma(alpha, v[i], acc[i]);
}

}  // namespace drift::kernels
