#include "kernels/activation.h"

#include <cmath>
#include <vector>

#include "kernels/dispatch.h"
#include "kernels/exp_approx.h"
#include "kernels/fp16.h"

namespace drift::kernels {

float gelu_tanh_f32(float x) {
  constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;
  constexpr float kCoefA = 0.044715f;
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + kCoefA * x * x)));
}

const uint16_t* gelu_fp16_table() {
  static const std::vector<uint16_t> table = [] {
    std::vector<uint16_t> t(65537, 0);
    for (uint32_t h = 0; h < 65536; ++h)
      t[h] = f32_to_fp16(gelu_tanh_f32(fp16_to_f32(static_cast<uint16_t>(h))));
    return t;
  }();
  return table.data();
}

void silu(Isa isa, const float* x, float* y, int64_t n) {
  if (isa != Isa::kScalar) return avx2::silu(x, y, n);
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] / (1.0f + exp_approx(-x[i]));
}

void swiglu_oai(Isa isa, const float* gate, const float* up, float* out, int64_t n, float alpha,
                float limit) {
  if (isa != Isa::kScalar) return avx2::swiglu_oai(gate, up, out, n, alpha, limit);
  for (int64_t i = 0; i < n; ++i) out[i] = swiglu_oai_one(gate[i], up[i], alpha, limit);
}

void gelu(Isa isa, const float* x, float* y, int64_t n) {
  const uint16_t* table = gelu_fp16_table();
  if (isa != Isa::kScalar) return avx2::gelu(x, y, n, table);
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    y[i] = v <= -10.0f ? 0.0f : v >= 10.0f ? v : fp16_to_f32(table[f32_to_fp16(v)]);
  }
}

}  // namespace drift::kernels
