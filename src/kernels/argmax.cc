#include "kernels/argmax.h"

#include <cmath>

#include "kernels/dispatch.h"

namespace drift::kernels {
namespace {

int32_t argmax_scalar(const float* x, int64_t n) {
  int64_t best = -1;
  for (int64_t i = 0; i < n; ++i)
    if (!std::isnan(x[i]) && (best < 0 || x[i] > x[best])) best = i;
  return best < 0 ? 0 : static_cast<int32_t>(best);
}

}  // namespace

int32_t argmax(Isa isa, const float* x, int64_t n) {
  if (isa != Isa::kScalar) {
    // The lanes only see values above -inf; a row whose maximum is -inf (or NaN only) is
    // answered by the reference, which takes its first non-NaN entry.
    const int32_t i = avx2::argmax(x, n);
    if (i >= 0) return i;
  }
  return argmax_scalar(x, n);
}

}  // namespace drift::kernels
