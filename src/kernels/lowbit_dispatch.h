// Internal: the kernels of the low-bit weight formats (Q2_K, Q3_K, IQ4_NL, IQ4_XS, MXFP4), kept in
// files of their own; each ISA's matmul table takes them from here.
#pragma once

#include <cstdint>

#include "kernels/format.h"

namespace drift::kernels {

class MatmulKernels;

// Fills the q2_k, q3_k, iq4_nl, iq4_xs and mxfp4 entries of an ISA's table.
void add_lowbit_kernels_scalar(MatmulKernels& table);
namespace avx2 {
void add_lowbit_kernels(MatmulKernels& table);
}  // namespace avx2
namespace avx512 {
void add_lowbit_kernels(MatmulKernels& table);
}  // namespace avx512

// dequantize_row for the low-bit formats: nb blocks of `format` into nb * block_size floats.
void dequantize_lowbit(Format format, const void* src, float* dst, int64_t nb);

}  // namespace drift::kernels
