// Dequantization: a row of any format back to fp32 (scalar; used for embedding lookups and tests).
#pragma once

#include <cstdint>

#include "kernels/format.h"

namespace drift::kernels {

// dst[i] = the value element i of `src` encodes, for i in [0, k); k is a multiple of the format's
// block size. src: one row, k / block_size blocks of `format`; dst: [k] floats.
//
// The arithmetic is ggml's dequantize_row_* (and the gguf Python package's), one rounding per
// operation in this order: Q4_0/Q5_0/Q8_0 q*d; Q4_1/Q5_1 q*d + m; Q4_K/Q5_K (d*sc)*q - dmin*mn;
// Q6_K (d*sc)*q; Q8_1/Q8_K q*d; Q2_K (d*sc)*q - dmin*mn; Q3_K, IQ4_XS (d*sc)*q; IQ4_NL d*v;
// MXFP4 v*d (d = 2^(e - 128)).
// F16/BF16 are exact.
void dequantize_row(Format format, const void* src, float* dst, int64_t k);

// The 6-bit scale and min of sub-block j (0..7) of a Q4_K/Q5_K super-block.
void unpack_scale_min_k4(const uint8_t* scales, int j, uint8_t* scale, uint8_t* min);

}  // namespace drift::kernels
