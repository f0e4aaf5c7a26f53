#include "kernels/elementwise.h"

#include "kernels/dispatch.h"

namespace drift::kernels {

void add(Isa isa, const float* a, const float* b, float* y, int64_t n) {
  if (isa != Isa::kScalar) return avx2::add(a, b, y, n);
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
}

void mul(Isa isa, const float* a, const float* b, float* y, int64_t n) {
  if (isa != Isa::kScalar) return avx2::mul(a, b, y, n);
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] * b[i];
}

void scale(Isa isa, const float* x, float s, float* y, int64_t n) {
  if (isa != Isa::kScalar) return avx2::scale(x, s, y, n);
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * s;
}

}  // namespace drift::kernels
