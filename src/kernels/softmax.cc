#include "kernels/softmax.h"

#include <cmath>

#include "kernels/dispatch.h"
#include "kernels/exp_approx.h"

namespace drift::kernels {
namespace {

void softmax_scalar(const float* x, float* y, int64_t n) {
  float m = -INFINITY;
  for (int64_t i = 0; i < n; ++i) m = x[i] > m ? x[i] : m;
  if (m == -INFINITY) {
    for (int64_t i = 0; i < n; ++i) y[i] = 0.0f;
    return;
  }
  double lanes[8] = {};
  for (int64_t i = 0; i < n; ++i) {
    y[i] = exp_approx(x[i] - m);
    lanes[i % 8] += static_cast<double>(y[i]);
  }
  double u[4];
  for (int i = 0; i < 4; ++i) u[i] = lanes[i] + lanes[i + 4];
  const double sum = (u[0] + u[2]) + (u[1] + u[3]);
  const float scale = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) y[i] = y[i] * scale;
}

}  // namespace

void softmax(Isa isa, const float* x, float* y, int64_t n) {
  if (isa != Isa::kScalar) return avx2::softmax(x, y, n);
  softmax_scalar(x, y, n);
}

}  // namespace drift::kernels
