// Internal: the ISA-specific entry points, one namespace per ISA. Each is defined in a *_avx2.cc or
// *_avx512.cc file compiled with that ISA's flags, and is called only after the dispatcher in the
// matching portable .cc file has been asked for that ISA (which the caller checked the CPU has).
// The vector ops (norm, softmax, activations, elementwise, RoPE) have AVX2
// implementations only; the AVX-512 ISA uses them. The int4 KV stores have both.
#pragma once

#include <cstdint>

#include "kernels/format.h"
#include "kernels/rope.h"

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

void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps);
void softmax(const float* x, float* y, int64_t n);
int32_t argmax(const float* x, int64_t n);
void silu(const float* x, float* y, int64_t n);
void gelu(const float* x, float* y, int64_t n, const uint16_t* table);
void swiglu_oai(const float* gate, const float* up, float* out, int64_t n, float alpha,
                float limit);
void add(const float* a, const float* b, float* y, int64_t n);
void mul(const float* a, const float* b, float* y, int64_t n);
void scale(const float* x, float s, float* y, int64_t n);
void rope_apply(RopeLayout layout, const float* cache, int64_t n_dims, float* x, int64_t n_heads,
                int64_t head_stride);
// int4 KV rows (kv_format.h), bitwise kv_store_key / kv_store_value's.
void kv_store_int4_key(uint8_t* block, int64_t dim, int64_t page_size, int64_t slot,
                       const float* x);
void kv_store_int4_value(uint8_t* block, int64_t dim, int64_t page_size, int64_t slot,
                         const float* x);
}  // namespace avx2

namespace avx512 {
const MatmulKernels& matmul_kernels();
void kv_store_int4_key(uint8_t* block, int64_t dim, int64_t page_size, int64_t slot,
                       const float* x);
void kv_store_int4_value(uint8_t* block, int64_t dim, int64_t page_size, int64_t slot,
                         const float* x);
}  // namespace avx512

}  // namespace drift::kernels
