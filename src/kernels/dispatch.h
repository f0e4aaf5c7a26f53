// Internal: the ISA-specific entry points, one namespace per ISA. Each is defined in a *_avx2.cc or
// *_avx512.cc file compiled with that ISA's flags, and is called only after the dispatcher in the
// matching portable .cc file has been asked for that ISA (which the caller checked the CPU has).
#pragma once

#include <cstdint>

#include "kernels/format.h"

namespace drift::kernels {

class MatmulKernels;

namespace avx2 {
void convert_f32_to_fp16(const float* src, uint16_t* dst, int64_t n);
void convert_fp16_to_f32(const uint16_t* src, float* dst, int64_t n);
void convert_f32_to_bf16(const float* src, uint16_t* dst, int64_t n);
void convert_bf16_to_f32(const uint16_t* src, float* dst, int64_t n);

void quantize_row_q8_0(const float* x, BlockQ8_0* y, int64_t k);
void quantize_row_q8_1(const float* x, BlockQ8_1* y, int64_t k);
void quantize_row_q8_K(const float* x, BlockQ8_K* y, int64_t k);

const MatmulKernels& matmul_kernels();
}  // namespace avx2

namespace avx512 {
const MatmulKernels& matmul_kernels();
}  // namespace avx512

}  // namespace drift::kernels
