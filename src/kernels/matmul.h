// Matrix multiplication of a weight matrix with a batch of activation rows in the file's row
// layout, for every weight format, on every ISA. The model uses it for the formats without a
// panel layout (kernels/panel.h repacks the others at load, with a faster order of its own); the
// dot products here also serve tests and tools that read rows directly.
//
// How a caller runs a linear layer Y = X W^T:
//
//   // once, at load: rows of k elements in a supported format
//   DRIFT_ASSIGN_OR_RETURN(Format wf, weight_format_for(ggml_type, k));
//   const MatmulFn matmul = matmul_kernels(isa).matmul(wf);
//   // per step: quantize the activations once into the weight format's activation format ...
//   quantize_activations(isa, wf, x, k, n_tokens, k, xq, activation_row_bytes(wf, k));
//   MatmulArgs args{w, row_bytes(wf, k), xq, activation_row_bytes(wf, k), y, n_rows, k, n_tokens};
//   // ... and let each thread of the pool compute a slice of the output rows:
//   matmul(args, row_begin, row_end);
//
// NUMERICAL CONTRACT. Y[t][r] is a fixed function of weight row r and activation row t alone: it
// does not depend on n_tokens, on t's position in the batch, on where [row_begin, row_end) falls,
// or on which other rows and tokens are computed with it (the multi-token kernels that reuse a
// weight block for several tokens perform, per token, exactly the single-token sequence of
// operations). For the quantized formats it is also the same on every ISA — scalar, AVX2 and
// AVX-512 give bitwise identical results — because all of them evaluate this canonical order:
//
//   32-element formats (Q4_0, Q5_0, Q8_0 x Q8_0; Q4_1, Q5_1 x Q8_1), block b of nb:
//     p[b][l] = sum of w[e] * a[e] over e in [4l, 4l + 4)   for lane l in [0, 8)  (exact int32)
//     s[b]    = fp32(d_w[b]) * fp32(d_a[b])                                       (one rounding)
//     acc[(b % 2) * 8 + l] = fma(s[b], float(p[b][l]), acc[...])   in order of b, from +0
//     Q4_1, Q5_1 only: summ[b % 2] = fma(fp32(m_w[b]), fp32(s_a[b]), summ[b % 2])  likewise
//     result = reduce16(acc)   (Q4_1, Q5_1: reduce16(acc) + (summ[0] + summ[1]))
//   K-quants (Q4_K, Q5_K, Q6_K x Q8_K), super-block b, 8 integer lanes (all exact int32):
//     L[l] = sum over elements e with (e % 32) / 4 == l of scale[sub-block of e] * q[e] * a[e]
//            (Q6_K: q is the unsigned 6-bit value, and L[l] -= 32 * (scale[2l] * bsums[2l] +
//            scale[2l+1] * bsums[2l+1]), which accounts for its -32)
//     M[i] = min[2i] * (bsums[4i] + bsums[4i+1]) + min[2i+1] * (bsums[4i+2] + bsums[4i+3])
//            (Q4_K, Q5_K; i < 4)
//     acc[l]  = fma(fp32(d_w[b]) * d_a[b], float(L[l]), acc[l])      in order of b, from +0
//     summ[i] = fma(fp32(dmin_w[b]) * d_a[b], float(M[i]), summ[i])  in order of b, from +0
//     result = reduce8(acc) - reduce4(summ)   (Q6_K: reduce8(acc))
//   Low-bit formats, (super-)block b in order (sc, mn the sub-block scales and mins as the block
//   defines them, Q3_K's and IQ4_XS's scales signed; v the IQ4 codebook values; all exact int32):
//     Q2_K x Q8_K:   L = sum over e of sc[e / 16] * q[e] * a[e];  M = sum over j < 16 of
//                    mn[j] * bsums[j];  acc = fma(fp32(d_w[b]) * d_a[b], float(L), acc);
//                    summ = fma(fp32(dmin_w[b]) * d_a[b], float(M), summ);  result = acc - summ
//     Q3_K x Q8_K:   L = sum over e of sc[e / 16] * q[e] * a[e] (q in [-4, 3]); acc likewise
//     IQ4_XS x Q8_K: L = sum over e of sc[e / 32] * v[e] * a[e]; acc likewise
//     IQ4_NL x Q8_0: P = sum over the block of v[e] * a[e];
//                    acc = fma(fp32(d_w[b]) * fp32(d_a[b]), float(P), acc);  result = acc
//     MXFP4 x Q8_0:  as IQ4_NL with v the doubled E2M1 values and d_w = 2^(e - 128) (exact)
//   (one integer sum per block, as in panel.h's order: the two layouts give the same bits.)
//   F32, F16, BF16 (converted to fp32 exactly):
//     acc[e % 16] = fma(w[e], x[e], acc[e % 16])  in order of e, from +0;  result = reduce16(acc)
//   reduce16(acc): v[i] = acc[i] + acc[i+8] (i < 8); u[i] = v[i] + v[i+4] (i < 4);
//                  z[i] = u[i] + u[i+2] (i < 2); result = z[0] + z[1].
//   reduce8(v) = (u[0] + u[2]) + (u[1] + u[3]) with u[i] = v[i] + v[i+4];
//   reduce4(s) = (s[0] + s[2]) + (s[1] + s[3]).
// For F32, F16 and BF16 the scalar path evaluates the same order (with std::fma), so all ISAs
// agree bitwise there too.
#pragma once

#include <cstdint>

#include "kernels/format.h"
#include "util/cpu_features.h"

namespace drift::kernels {

struct MatmulArgs {
  const void* w;        // [n_rows][w_row_bytes]: row r holds k elements of the weight format
  int64_t w_row_bytes;  // >= row_bytes(format, k)
  const void* x;        // [n_tokens][x_row_bytes]: activations in the weight format's activation
                        // format (quantize_activations)
  int64_t x_row_bytes;  // >= activation_row_bytes(format, k)
  float* y;             // [n_tokens][y_row_stride]: y[t * y_row_stride + r] = row r . token t
  int64_t y_row_stride;
  int64_t k;         // elements per row, a multiple of the format's block size
  int64_t n_tokens;  // >= 0
};
// Rows, row strides and pointers must be aligned for the block structs (2 bytes; 4 for Q8_K
// activations); buffers filled by quantize_activations and GGUF tensor data are.

// Computes y[t][r] for r in [row_begin, row_end) and every t in [0, n_tokens). Writes nothing else.
using MatmulFn = void (*)(const MatmulArgs& args, int64_t row_begin, int64_t row_end);
// One weight row . one activation row, k elements; the same value MatmulFn writes.
using DotFn = float (*)(const void* w_row, const void* x_row, int64_t k);

struct FormatKernels {
  DotFn dot;
  MatmulFn matmul;
};

class MatmulKernels {
 public:
  // The kernels for weights in `format` (format_info(format).is_weight must hold).
  const FormatKernels& get(Format format) const;
  MatmulFn matmul(Format format) const;
  DotFn dot(Format format) const;

  // Filled by the per-ISA tables.
  FormatKernels f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0, q4_k, q5_k, q6_k;
  FormatKernels q2_k, q3_k, iq4_nl, iq4_xs, mxfp4;  // the low-bit formats (lowbit_dispatch.h)
};

// The kernel table for an ISA the CPU supports (see select_isa). Immutable, lives forever.
const MatmulKernels& matmul_kernels(Isa isa);

}  // namespace drift::kernels
