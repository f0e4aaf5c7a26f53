#include "kernels/fp16.h"

#include "kernels/dispatch.h"

namespace drift::kernels {

void convert_f32_to_fp16(Isa isa, const float* src, uint16_t* dst, int64_t n) {
  if (isa != Isa::kScalar) return avx2::convert_f32_to_fp16(src, dst, n);
  for (int64_t i = 0; i < n; ++i) dst[i] = f32_to_fp16(src[i]);
}

void convert_fp16_to_f32(Isa isa, const uint16_t* src, float* dst, int64_t n) {
  if (isa != Isa::kScalar) return avx2::convert_fp16_to_f32(src, dst, n);
  for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_f32(src[i]);
}

void convert_f32_to_bf16(Isa isa, const float* src, uint16_t* dst, int64_t n) {
  if (isa != Isa::kScalar) return avx2::convert_f32_to_bf16(src, dst, n);
  for (int64_t i = 0; i < n; ++i) dst[i] = f32_to_bf16(src[i]);
}

void convert_bf16_to_f32(Isa isa, const uint16_t* src, float* dst, int64_t n) {
  if (isa != Isa::kScalar) return avx2::convert_bf16_to_f32(src, dst, n);
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(src[i]);
}

}  // namespace drift::kernels
