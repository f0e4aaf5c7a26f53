// The low-bit formats' scalar reference dot products (the canonical order of matmul.h written out
// plainly; every SIMD kernel is tested bitwise against these) and their dequantizers.
#include <cmath>

#include "kernels/fp16.h"
#include "kernels/lowbit_dispatch.h"
#include "kernels/lowbit_quants.h"
#include "kernels/matmul.h"
#include "kernels/matmul_rows.h"

namespace drift::kernels {
namespace {

// ---- Dot products with Q8_K / Q8_0 activations.

float dot_q2_k(const void* w_row, const void* x_row, int64_t k) {
  const auto* w = static_cast<const BlockQ2_K*>(w_row);
  const auto* a = static_cast<const BlockQ8_K*>(x_row);
  float acc = 0.0f, summ = 0.0f;
  int q[kQKK], scale[16], min[16];
  for (int64_t b = 0; b < k / kQKK; ++b) {
    unpack_q2_k(w[b], q, scale, min);
    int32_t l_sum = 0, m_sum = 0;
    for (int e = 0; e < kQKK; ++e) l_sum += scale[e / 16] * q[e] * a[b].qs[e];
    for (int j = 0; j < 16; ++j) m_sum += min[j] * a[b].bsums[j];
    acc = std::fma(fp16_to_f32(w[b].d) * a[b].d, static_cast<float>(l_sum), acc);
    summ = std::fma(fp16_to_f32(w[b].dmin) * a[b].d, static_cast<float>(m_sum), summ);
  }
  return acc - summ;
}

float dot_q3_k(const void* w_row, const void* x_row, int64_t k) {
  const auto* w = static_cast<const BlockQ3_K*>(w_row);
  const auto* a = static_cast<const BlockQ8_K*>(x_row);
  float acc = 0.0f;
  int q[kQKK], scale[16];
  for (int64_t b = 0; b < k / kQKK; ++b) {
    unpack_q3_k(w[b], q, scale);
    int32_t l_sum = 0;
    for (int e = 0; e < kQKK; ++e) l_sum += scale[e / 16] * q[e] * a[b].qs[e];
    acc = std::fma(fp16_to_f32(w[b].d) * a[b].d, static_cast<float>(l_sum), acc);
  }
  return acc;
}

float dot_iq4_nl(const void* w_row, const void* x_row, int64_t k) {
  const auto* w = static_cast<const BlockIQ4_NL*>(w_row);
  const auto* a = static_cast<const BlockQ8_0*>(x_row);
  float acc = 0.0f;
  int v[kQK];
  for (int64_t b = 0; b < k / kQK; ++b) {
    unpack_iq4_nl(w[b], v);
    int32_t p = 0;
    for (int e = 0; e < kQK; ++e) p += v[e] * a[b].qs[e];
    acc = std::fma(fp16_to_f32(w[b].d) * fp16_to_f32(a[b].d), static_cast<float>(p), acc);
  }
  return acc;
}

float dot_mxfp4(const void* w_row, const void* x_row, int64_t k) {
  const auto* w = static_cast<const BlockMXFP4*>(w_row);
  const auto* a = static_cast<const BlockQ8_0*>(x_row);
  float acc = 0.0f;
  int v[kQK];
  for (int64_t b = 0; b < k / kQK; ++b) {
    unpack_mxfp4(w[b], v);
    int32_t p = 0;
    for (int e = 0; e < kQK; ++e) p += v[e] * a[b].qs[e];
    acc = std::fma(mxfp4_scale(w[b].e) * fp16_to_f32(a[b].d), static_cast<float>(p), acc);
  }
  return acc;
}

float dot_iq4_xs(const void* w_row, const void* x_row, int64_t k) {
  const auto* w = static_cast<const BlockIQ4_XS*>(w_row);
  const auto* a = static_cast<const BlockQ8_K*>(x_row);
  float acc = 0.0f;
  int v[kQKK], scale[8];
  for (int64_t b = 0; b < k / kQKK; ++b) {
    unpack_iq4_xs(w[b], v, scale);
    int32_t l_sum = 0;
    for (int e = 0; e < kQKK; ++e) l_sum += scale[e / 32] * v[e] * a[b].qs[e];
    acc = std::fma(fp16_to_f32(w[b].d) * a[b].d, static_cast<float>(l_sum), acc);
  }
  return acc;
}

// ---- Dequantization: ggml's dequantize_row_* arithmetic (one rounding per operation, in the
// order written).

void dequantize_q2_k(const BlockQ2_K* x, float* y, int64_t nb) {
  int q[kQKK], scale[16], min[16];
  for (int64_t i = 0; i < nb; ++i, y += kQKK) {
    unpack_q2_k(x[i], q, scale, min);
    const float d = fp16_to_f32(x[i].d), dmin = fp16_to_f32(x[i].dmin);
    for (int e = 0; e < kQKK; ++e) {
      const float dl = d * static_cast<float>(scale[e / 16]);
      const float ml = dmin * static_cast<float>(min[e / 16]);
      y[e] = dl * static_cast<float>(q[e]) - ml;
    }
  }
}

void dequantize_q3_k(const BlockQ3_K* x, float* y, int64_t nb) {
  int q[kQKK], scale[16];
  for (int64_t i = 0; i < nb; ++i, y += kQKK) {
    unpack_q3_k(x[i], q, scale);
    const float d = fp16_to_f32(x[i].d);
    for (int e = 0; e < kQKK; ++e)
      y[e] = d * static_cast<float>(scale[e / 16]) * static_cast<float>(q[e]);
  }
}

void dequantize_iq4_nl(const BlockIQ4_NL* x, float* y, int64_t nb) {
  int v[kQK];
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    unpack_iq4_nl(x[i], v);
    const float d = fp16_to_f32(x[i].d);
    for (int e = 0; e < kQK; ++e) y[e] = d * static_cast<float>(v[e]);
  }
}

void dequantize_mxfp4(const BlockMXFP4* x, float* y, int64_t nb) {
  int v[kQK];
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    unpack_mxfp4(x[i], v);
    const float d = mxfp4_scale(x[i].e);
    for (int e = 0; e < kQK; ++e) y[e] = static_cast<float>(v[e]) * d;
  }
}

void dequantize_iq4_xs(const BlockIQ4_XS* x, float* y, int64_t nb) {
  int v[kQKK], scale[8];
  for (int64_t i = 0; i < nb; ++i, y += kQKK) {
    unpack_iq4_xs(x[i], v, scale);
    const float d = fp16_to_f32(x[i].d);
    for (int e = 0; e < kQKK; ++e)
      y[e] = d * static_cast<float>(scale[e / 32]) * static_cast<float>(v[e]);
  }
}

}  // namespace

void add_lowbit_kernels_scalar(MatmulKernels& t) {
  t.q2_k = FormatKernels{dot_q2_k, matmul_rows<dot_q2_k>};
  t.q3_k = FormatKernels{dot_q3_k, matmul_rows<dot_q3_k>};
  t.iq4_nl = FormatKernels{dot_iq4_nl, matmul_rows<dot_iq4_nl>};
  t.iq4_xs = FormatKernels{dot_iq4_xs, matmul_rows<dot_iq4_xs>};
  t.mxfp4 = FormatKernels{dot_mxfp4, matmul_rows<dot_mxfp4>};
}

void dequantize_lowbit(Format format, const void* src, float* dst, int64_t nb) {
  switch (format) {
    case Format::kQ2_K:
      return dequantize_q2_k(static_cast<const BlockQ2_K*>(src), dst, nb);
    case Format::kQ3_K:
      return dequantize_q3_k(static_cast<const BlockQ3_K*>(src), dst, nb);
    case Format::kIQ4_NL:
      return dequantize_iq4_nl(static_cast<const BlockIQ4_NL*>(src), dst, nb);
    case Format::kIQ4_XS:
      return dequantize_iq4_xs(static_cast<const BlockIQ4_XS*>(src), dst, nb);
    case Format::kMXFP4:
      return dequantize_mxfp4(static_cast<const BlockMXFP4*>(src), dst, nb);
    default:
      break;
  }
}

}  // namespace drift::kernels
