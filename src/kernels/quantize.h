// Activation quantization: fp32 rows into the format a weight matrix's matmul takes them in.
//
// The quantizers reproduce llama.cpp's reference ones (ggml-quants.c), which is also what the gguf
// Python package implements for Q8_0:
//   Q8_0/Q8_1: d = amax / 127, id = d ? 1/d : 0, q = roundf(x * id) (ties away from zero),
//              d stored as fp16; Q8_1 also stores s = fp16(d * sum(q)).
//   Q8_K:      max = the first element of largest magnitude, iscale = -127 / max,
//              q = min(127, round-half-even(iscale * x)), d = 1 / iscale (fp32), bsums.
// (llama.cpp's own AVX2 Q8_0/Q8_1 quantizers use 127/amax and ties-to-even and so differ from its
// reference in rare ties; drift's SIMD paths produce exactly the reference blocks.)
// Inputs must be finite. Every quantized value lies in [-127, 127]; the SIMD dot products rely on
// that (activations blocks come from these functions).
#pragma once

#include <cstdint>

#include "kernels/format.h"
#include "util/cpu_features.h"

namespace drift::kernels {

// Scalar references. x: [k] floats, k a multiple of the block size; y: k / block_size blocks.
void quantize_row_q8_0_ref(const float* x, BlockQ8_0* y, int64_t k);
void quantize_row_q8_1_ref(const float* x, BlockQ8_1* y, int64_t k);
void quantize_row_q8_K_ref(const float* x, BlockQ8_K* y, int64_t k);

// The same on the given ISA; identical bytes to the references.
void quantize_row_q8_0(Isa isa, const float* x, BlockQ8_0* y, int64_t k);
void quantize_row_q8_1(Isa isa, const float* x, BlockQ8_1* y, int64_t k);
void quantize_row_q8_K(Isa isa, const float* x, BlockQ8_K* y, int64_t k);

// Bytes of one activation row of k elements for a matmul with weights in `weight_format`.
int64_t activation_row_bytes(Format weight_format, int64_t k);

// Converts n_rows rows of activations for a matmul with weights in `weight_format`:
// F32 copies, F16/BF16 round to nearest even, the quantized formats use the quantizers above.
// x: [n_rows][x_row_stride] floats (k used per row); out: [n_rows][out_row_bytes] bytes,
// out_row_bytes >= activation_row_bytes(weight_format, k) and a multiple of 4.
void quantize_activations(Isa isa, Format weight_format, const float* x, int64_t x_row_stride,
                          int64_t n_rows, int64_t k, void* out, int64_t out_row_bytes);

}  // namespace drift::kernels
