#include "kernels/quantize.h"

#include <cmath>
#include <cstring>

#include "kernels/dispatch.h"
#include "kernels/fp16.h"

namespace drift::kernels {
namespace {

float block_amax(const float* x, int64_t n) {
  float amax = 0.0f;
  for (int64_t j = 0; j < n; ++j) {
    const float a = std::fabs(x[j]);
    amax = amax > a ? amax : a;
  }
  return amax;
}

// ggml's nearest_int: round half to even through the fp32 adder (valid for |v| < 2^22).
int nearest_int(float v) {
  const float shifted = v + 12582912.0f;
  int32_t i;
  std::memcpy(&i, &shifted, sizeof i);
  return (i & 0x007fffff) - 0x00400000;
}

}  // namespace

void quantize_row_q8_0_ref(const float* x, BlockQ8_0* y, int64_t k) {
  for (int64_t i = 0; i < k / kQK; ++i, x += kQK) {
    const float d = block_amax(x, kQK) / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = f32_to_fp16(d);
    for (int j = 0; j < kQK; ++j) y[i].qs[j] = static_cast<int8_t>(std::round(x[j] * id));
  }
}

void quantize_row_q8_1_ref(const float* x, BlockQ8_1* y, int64_t k) {
  for (int64_t i = 0; i < k / kQK; ++i, x += kQK) {
    const float d = block_amax(x, kQK) / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = f32_to_fp16(d);
    int sum = 0;
    for (int j = 0; j < kQK; ++j) {
      y[i].qs[j] = static_cast<int8_t>(std::round(x[j] * id));
      sum += y[i].qs[j];
    }
    y[i].s = f32_to_fp16(static_cast<float>(sum) * d);
  }
}

void quantize_row_q8_K_ref(const float* x, BlockQ8_K* y, int64_t k) {
  for (int64_t i = 0; i < k / kQKK; ++i, x += kQKK) {
    float max = 0.0f;
    float amax = 0.0f;
    for (int j = 0; j < kQKK; ++j) {
      const float a = std::fabs(x[j]);
      if (a > amax) {
        amax = a;
        max = x[j];
      }
    }
    if (amax == 0.0f) {
      std::memset(&y[i], 0, sizeof y[i]);
      continue;
    }
    const float iscale = -127.0f / max;
    for (int j = 0; j < kQKK; ++j) {
      const int v = nearest_int(iscale * x[j]);
      y[i].qs[j] = static_cast<int8_t>(v < 127 ? v : 127);
    }
    for (int g = 0; g < kQKK / 16; ++g) {
      int sum = 0;
      for (int j = 0; j < 16; ++j) sum += y[i].qs[16 * g + j];
      y[i].bsums[g] = static_cast<int16_t>(sum);
    }
    y[i].d = 1.0f / iscale;
  }
}

void quantize_row_q8_0(Isa isa, const float* x, BlockQ8_0* y, int64_t k) {
  if (isa != Isa::kScalar) return avx2::quantize_row_q8_0(x, y, k);
  quantize_row_q8_0_ref(x, y, k);
}

void quantize_row_q8_1(Isa isa, const float* x, BlockQ8_1* y, int64_t k) {
  if (isa != Isa::kScalar) return avx2::quantize_row_q8_1(x, y, k);
  quantize_row_q8_1_ref(x, y, k);
}

void quantize_row_q8_K(Isa isa, const float* x, BlockQ8_K* y, int64_t k) {
  if (isa != Isa::kScalar) return avx2::quantize_row_q8_K(x, y, k);
  quantize_row_q8_K_ref(x, y, k);
}

int64_t activation_row_bytes(Format weight_format, int64_t k) {
  return row_bytes(format_info(weight_format).activation, k);
}

void quantize_activations(Isa isa, Format weight_format, const float* x, int64_t x_row_stride,
                          int64_t n_rows, int64_t k, void* out, int64_t out_row_bytes) {
  auto* dst = static_cast<uint8_t*>(out);
  for (int64_t r = 0; r < n_rows; ++r, x += x_row_stride, dst += out_row_bytes) {
    switch (format_info(weight_format).activation) {
      case Format::kF32:
        std::memcpy(dst, x, static_cast<size_t>(k) * sizeof(float));
        break;
      case Format::kF16:
        convert_f32_to_fp16(isa, x, reinterpret_cast<uint16_t*>(dst), k);
        break;
      case Format::kBF16:
        convert_f32_to_bf16(isa, x, reinterpret_cast<uint16_t*>(dst), k);
        break;
      case Format::kQ8_0:
        quantize_row_q8_0(isa, x, reinterpret_cast<BlockQ8_0*>(dst), k);
        break;
      case Format::kQ8_1:
        quantize_row_q8_1(isa, x, reinterpret_cast<BlockQ8_1*>(dst), k);
        break;
      case Format::kQ8_K:
        quantize_row_q8_K(isa, x, reinterpret_cast<BlockQ8_K*>(dst), k);
        break;
      default:
        assert(false && "not an activation format");
    }
  }
}

}  // namespace drift::kernels
