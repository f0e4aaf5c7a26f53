// Panel matmul: weights repacked at load into panels of 16 rows whose quants interleave so that
// one SIMD register holds four consecutive elements of each of the 16 rows, and a GEMM that
// reuses every unpacked weight block for several tokens in registers.
//
// Why a second layout: in the file's row layout a register holds 64 elements of one row, so each
// block's integer lane sums must be converted and scaled per (row, token) pair, and a block is
// unpacked again for every token. With rows across the lanes, the quants of 16 rows multiply a
// broadcast group of 4 activation bytes in one instruction (vpdpbusd), a whole block's products
// accumulate as exact integers, and the float work is one convert, multiply and fma per block for
// 16 rows at once. A panel is unpacked once per block and used for up to kPanelTokens tokens.
//
// How a caller runs a linear layer with panels:
//
//   // once, at load (panel_supported(format)):
//   std::vector<uint8_t> p(panel_matrix_bytes(format, rows, k));
//   repack_panels(format, w, row_bytes, rows, k, p.data());
//   const PanelMatmulFn fn = panel_matmul(isa, format);
//   // per step: quantize the activations as for matmul.h, then their per-block sums:
//   quantize_activations(isa, format, x, x_stride, n, k, xq, xq_row_bytes);
//   prepare_panel_sums(format, xq, xq_row_bytes, n, k, sums, sums_row_bytes);
//   fn(PanelArgs{...}, panel_begin, panel_end);   // each thread a range of 16-row panels
//
// NUMERICAL CONTRACT (the panel path's canonical order). Y[t][r] depends on weight row r and
// activation row t alone, never on the batch, the tile or the thread split, and every ISA (scalar,
// AVX2, AVX-512) computes it bitwise identically by this sequence, from acc = summ = +0:
//   Q4_0, Q5_0, Q8_0, IQ4_NL, MXFP4 x Q8_0 (w = q - 8, q - 16, the int8 quant, resp. the
//   codebook value of the code; MXFP4's fp32(d_w) is 2^(e - 128), mxfp4_scale), block b in order:
//     P = sum over the 32 elements of w[e] * a[e]                               (exact int32)
//     acc = fma(fp32(d_w[b]) * fp32(d_a[b]), float(P), acc)        result = acc
//   Q4_1, Q5_1 x Q8_1 (q unsigned):
//     P as above with q; acc likewise; summ = fma(fp32(m_w[b]), fp32(s_a[b]), summ)
//     result = acc + summ
//   Q4_K x Q8_K, super-block b in order (sc, mn the 6-bit scales and mins of sub-block j):
//     L = sum_j sc[j] * P_j,  P_j = sum over sub-block j's 32 elements of q * a  (exact int32)
//     M = sum_j mn[j] * (bsums[2j] + bsums[2j + 1])                             (exact int32)
//     acc = fma(fp32(d_w[b]) * d_a[b], float(L), acc)
//     summ = fma(fp32(dmin_w[b]) * d_a[b], float(M), summ)          result = acc - summ
//   Q6_K x Q8_K: L = sum over the 16 sub-blocks j of sc[j] * (P_j - 32 * bsums[j]) with q the
//     unsigned 6-bit value; acc = fma(fp32(d_w[b]) * d_a[b], float(L), acc); result = acc.
//   Q2_K x Q8_K: L = sum over the 16 sub-blocks j of sc[j] * P_j, M = sum over j of
//     mn[j] * bsums[j]; acc and summ as Q4_K's; result = acc - summ.
//   Q3_K x Q8_K: L = sum over the 16 sub-blocks j of sc[j] * P_j with sc signed and P_j over the
//     signed quants; acc = fma(fp32(d_w[b]) * d_a[b], float(L), acc); result = acc.
//   IQ4_XS x Q8_K: L = sum over the 8 sub-blocks j of sc[j] * P_j with sc the signed scale and
//     P_j over the codebook values; acc = fma(fp32(d_w[b]) * d_a[b], float(L), acc); result = acc.
// The integer sums cannot overflow: |a| <= 127 (quantize.h), so |P| < 2^16 and |L| < 2^28.
// This differs from matmul.h's order (there, 8 or 16 float lanes per pair), so a matrix gives the
// same results whichever ISA runs it only if every ISA takes the same path: panel_supported() is
// true or false for a format on every ISA alike.
#pragma once

#include <cstdint>

#include "kernels/format.h"
#include "util/cpu_features.h"

namespace drift::kernels {

inline constexpr int64_t kPanelRows = 16;   // weight rows per panel (one register of int32 lanes)
inline constexpr int64_t kPanelTokens = 8;  // tokens per register tile of the GEMM

// Whether `format` has a panel layout (the same answer on every ISA).
bool panel_supported(Format format);

// Bytes of one panel (16 rows x k elements) and of a whole matrix (rows rounded up to 16; the
// padding rows are zero and never written to the output).
int64_t panel_bytes(Format format, int64_t k);
int64_t panel_matrix_bytes(Format format, int64_t rows, int64_t k);

// Repacks rows [0, rows) of a matrix in its file layout (rows row_bytes apart) into panels.
// out: panel_matrix_bytes(format, rows, k) bytes, 64-byte aligned.
void repack_panels(Format format, const void* w, int64_t row_bytes, int64_t rows, int64_t k,
                   void* out);
// The same for panels [panel_begin, panel_end) only (rows [16 panel_begin, 16 panel_end)), so that
// a large matrix can be repacked by several threads.
void repack_panels(Format format, const void* w, int64_t row_bytes, int64_t rows, int64_t k,
                   void* out, int64_t panel_begin, int64_t panel_end);

// Per-block values of a quantized activation row that every panel of a matmul needs, computed once
// per step instead of once per panel. They depend on the activation format alone, so matrices
// that share an input (Q, K and V; gate and up) share them:
struct PanelSums32 {  // per 32-element block (Q8_0, Q8_1 activations)
  float d;            // fp32(d_a)
  float s;            // fp32(s_a) (Q8_1), 0 for Q8_0
  int32_t sum;        // sum of the 32 quants (Q8_0): unsigned weight codes c = w + o add
                      // o * sum to P (Q4_0: o = 8, Q5_0: 16, Q8_0 codes: 128); 0 for Q8_1
  int32_t unused;
};
struct PanelSumsK {      // per 256-element super-block (Q8_K activations)
  float d;               // d_a
  int16_t bsums32[8];    // bsums[2j] + bsums[2j + 1]: the quant sum of 32-element sub-block j
  int32_t offsets6[16];  // 32 * bsums[j]: Q6_K's -32 per 16-element sub-block
};

// Bytes of one token's sums for a k-element row.
int64_t panel_sums_row_bytes(Format format, int64_t k);

// sums: [n_tokens][sums_row_bytes] (>= panel_sums_row_bytes); xq as quantize_activations wrote it
// for weights in `format`.
void prepare_panel_sums(Format format, const void* xq, int64_t xq_row_bytes, int64_t n_tokens,
                        int64_t k, void* sums, int64_t sums_row_bytes);

struct PanelArgs {
  const uint8_t* panels;  // repack_panels output
  int64_t rows;           // real rows of the matrix (outputs are written for r < rows only)
  int64_t k;              // elements per row
  const uint8_t* x;       // [n_tokens][x_row_bytes] quantized activations
  int64_t x_row_bytes;
  const uint8_t* sums;  // [n_tokens][sums_row_bytes] prepare_panel_sums output
  int64_t sums_row_bytes;
  float* y;  // y[t * y_row_stride + r]
  int64_t y_row_stride;
  int64_t n_tokens;
};

// Computes y[t][r] for the rows of panels [panel_begin, panel_end) and every token.
using PanelMatmulFn = void (*)(const PanelArgs& args, int64_t panel_begin, int64_t panel_end);

// The kernel for `format` on `isa` (panel_supported(format) must hold).
PanelMatmulFn panel_matmul(Isa isa, Format format);

}  // namespace drift::kernels
