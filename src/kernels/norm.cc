#include "kernels/norm.h"

#include <cmath>

#include "kernels/dispatch.h"

namespace drift::kernels {
namespace {

void rms_norm_scalar(const float* x, const float* w, float* y, int64_t n, float eps) {
  double lanes[8] = {};
  for (int64_t i = 0; i < n; ++i) lanes[i % 8] += static_cast<double>(x[i] * x[i]);
  double u[4];
  for (int i = 0; i < 4; ++i) u[i] = lanes[i] + lanes[i + 4];
  const double sum = (u[0] + u[2]) + (u[1] + u[3]);
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  const float scale = 1.0f / std::sqrt(mean + eps);
  for (int64_t i = 0; i < n; ++i) y[i] = w != nullptr ? (x[i] * scale) * w[i] : x[i] * scale;
}

}  // namespace

void rms_norm(Isa isa, const float* x, const float* w, float* y, int64_t n, float eps) {
  if (isa != Isa::kScalar) return avx2::rms_norm(x, w, y, n, eps);
  rms_norm_scalar(x, w, y, n, eps);
}

}  // namespace drift::kernels
