// The kernel tables and the scalar reference kernels: the canonical order of matmul.h, written
// out plainly. Every SIMD kernel is tested bitwise against these.
#include "kernels/matmul.h"

#include <cmath>
#include <cstring>
#include <type_traits>

#include "kernels/dequantize.h"
#include "kernels/dispatch.h"
#include "kernels/fp16.h"
#include "kernels/lowbit_dispatch.h"
#include "kernels/matmul_rows.h"

namespace drift::kernels {
namespace {

float reduce16(const float* acc) {
  float v[8], u[4];
  for (int i = 0; i < 8; ++i) v[i] = acc[i] + acc[i + 8];
  for (int i = 0; i < 4; ++i) u[i] = v[i] + v[i + 4];
  const float z0 = u[0] + u[2];
  const float z1 = u[1] + u[3];
  return z0 + z1;
}

// ---- 32-element formats: unpack a weight block to its 32 integer values, in element order.

void unpack(const BlockQ4_0& b, int* q) {
  for (int j = 0; j < 16; ++j) {
    q[j] = (b.qs[j] & 15) - 8;
    q[j + 16] = (b.qs[j] >> 4) - 8;
  }
}
void unpack(const BlockQ4_1& b, int* q) {
  for (int j = 0; j < 16; ++j) {
    q[j] = b.qs[j] & 15;
    q[j + 16] = b.qs[j] >> 4;
  }
}
void unpack_q5(const uint8_t* qh_bytes, const uint8_t* qs, int offset, int* q) {
  uint32_t qh;
  std::memcpy(&qh, qh_bytes, sizeof qh);
  for (int j = 0; j < 16; ++j) {
    q[j] = ((qs[j] & 15) | static_cast<int>(((qh >> j) & 1u) << 4)) - offset;
    q[j + 16] = ((qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1u) << 4)) - offset;
  }
}
void unpack(const BlockQ5_0& b, int* q) { unpack_q5(b.qh, b.qs, 16, q); }
void unpack(const BlockQ5_1& b, int* q) { unpack_q5(b.qh, b.qs, 0, q); }
void unpack(const BlockQ8_0& b, int* q) {
  for (int j = 0; j < 32; ++j) q[j] = b.qs[j];
}

template <class WBlock, class ABlock>
float dot_blocks32(const void* w_row, const void* x_row, int64_t k) {
  const auto* w = static_cast<const WBlock*>(w_row);
  const auto* a = static_cast<const ABlock*>(x_row);
  constexpr bool kHasMin = std::is_same_v<ABlock, BlockQ8_1>;
  float acc[16] = {};
  float summ[2] = {};
  int q[kQK];
  for (int64_t b = 0; b < k / kQK; ++b) {
    unpack(w[b], q);
    const float s = fp16_to_f32(w[b].d) * fp16_to_f32(a[b].d);
    float* lanes = acc + (b % 2) * 8;
    for (int l = 0; l < 8; ++l) {
      int32_t p = 0;
      for (int e = 4 * l; e < 4 * l + 4; ++e) p += q[e] * a[b].qs[e];
      lanes[l] = std::fma(s, static_cast<float>(p), lanes[l]);
    }
    if constexpr (kHasMin)
      summ[b % 2] = std::fma(fp16_to_f32(w[b].m), fp16_to_f32(a[b].s), summ[b % 2]);
  }
  if constexpr (kHasMin) return reduce16(acc) + (summ[0] + summ[1]);
  return reduce16(acc);
}

// ---- K-quants.

// The 256 quant values of a super-block in element order and the sub-block scales (and mins).
void unpack_k(const BlockQ4_K& b, int* q, int* scale, int* min) {
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, mn;
    unpack_scale_min_k4(b.scales, j, &sc, &mn);
    scale[j] = sc;
    min[j] = mn;
  }
  for (int c = 0; c < 4; ++c)
    for (int l = 0; l < 32; ++l) {
      q[64 * c + l] = b.qs[32 * c + l] & 15;
      q[64 * c + 32 + l] = b.qs[32 * c + l] >> 4;
    }
}
void unpack_k(const BlockQ5_K& b, int* q, int* scale, int* min) {
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, mn;
    unpack_scale_min_k4(b.scales, j, &sc, &mn);
    scale[j] = sc;
    min[j] = mn;
  }
  for (int c = 0; c < 4; ++c)
    for (int l = 0; l < 32; ++l) {
      q[64 * c + l] = (b.qs[32 * c + l] & 15) | (((b.qh[l] >> (2 * c)) & 1) << 4);
      q[64 * c + 32 + l] = (b.qs[32 * c + l] >> 4) | (((b.qh[l] >> (2 * c + 1)) & 1) << 4);
    }
}
void unpack_k(const BlockQ6_K& b, int* q, int* scale) {
  for (int j = 0; j < 16; ++j) scale[j] = b.scales[j];
  for (int h = 0; h < 2; ++h) {
    const uint8_t* ql = b.ql + 64 * h;
    const uint8_t* qh = b.qh + 32 * h;
    int* out = q + 128 * h;
    for (int l = 0; l < 32; ++l) {
      out[l] = ((ql[l] & 15) | ((qh[l] >> 0) & 3) << 4) - 32;
      out[l + 32] = ((ql[l + 32] & 15) | ((qh[l] >> 2) & 3) << 4) - 32;
      out[l + 64] = ((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32;
      out[l + 96] = ((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32;
    }
  }
}

float reduce8(const float* v) {
  float u[4];
  for (int i = 0; i < 4; ++i) u[i] = v[i] + v[i + 4];
  return (u[0] + u[2]) + (u[1] + u[3]);
}

float reduce4(const float* s) { return (s[0] + s[2]) + (s[1] + s[3]); }

template <class WBlock>
float dot_q45_k(const void* w_row, const void* x_row, int64_t k) {
  const auto* w = static_cast<const WBlock*>(w_row);
  const auto* a = static_cast<const BlockQ8_K*>(x_row);
  float acc[8] = {}, summ[4] = {};
  int q[kQKK], scale[8], min[8];
  for (int64_t b = 0; b < k / kQKK; ++b) {
    unpack_k(w[b], q, scale, min);
    int32_t lane[8] = {};
    for (int j = 0; j < 8; ++j)
      for (int l = 0; l < 8; ++l) {
        int32_t p = 0;
        for (int e = 32 * j + 4 * l; e < 32 * j + 4 * l + 4; ++e) p += q[e] * a[b].qs[e];
        lane[l] += scale[j] * p;
      }
    const float dd = fp16_to_f32(w[b].d) * a[b].d;
    const float dm = fp16_to_f32(w[b].dmin) * a[b].d;
    for (int l = 0; l < 8; ++l) acc[l] = std::fma(dd, static_cast<float>(lane[l]), acc[l]);
    for (int i = 0; i < 4; ++i) {
      const int32_t m = min[2 * i] * (a[b].bsums[4 * i] + a[b].bsums[4 * i + 1]) +
                        min[2 * i + 1] * (a[b].bsums[4 * i + 2] + a[b].bsums[4 * i + 3]);
      summ[i] = std::fma(dm, static_cast<float>(m), summ[i]);
    }
  }
  return reduce8(acc) - reduce4(summ);
}

float dot_q6_k(const void* w_row, const void* x_row, int64_t k) {
  const auto* w = static_cast<const BlockQ6_K*>(w_row);
  const auto* a = static_cast<const BlockQ8_K*>(x_row);
  float acc[8] = {};
  int q[kQKK], scale[16];
  for (int64_t b = 0; b < k / kQKK; ++b) {
    unpack_k(w[b], q, scale);  // q - 32
    int32_t lane[8] = {};
    for (int e = 0; e < kQKK; ++e) lane[(e % 32) / 4] += scale[e / 16] * (q[e] + 32) * a[b].qs[e];
    for (int l = 0; l < 8; ++l)
      lane[l] -= 32 * (scale[2 * l] * a[b].bsums[2 * l] + scale[2 * l + 1] * a[b].bsums[2 * l + 1]);
    const float dd = fp16_to_f32(w[b].d) * a[b].d;
    for (int l = 0; l < 8; ++l) acc[l] = std::fma(dd, static_cast<float>(lane[l]), acc[l]);
  }
  return reduce8(acc);
}

// ---- Float formats.

float load_f32(const void* p, int64_t i) { return static_cast<const float*>(p)[i]; }
float load_f16(const void* p, int64_t i) { return fp16_to_f32(static_cast<const uint16_t*>(p)[i]); }
float load_bf16(const void* p, int64_t i) {
  return bf16_to_f32(static_cast<const uint16_t*>(p)[i]);
}

template <float (*kLoad)(const void*, int64_t)>
float dot_float(const void* w_row, const void* x_row, int64_t k) {
  float acc[16] = {};
  for (int64_t e = 0; e < k; ++e)
    acc[e % 16] = std::fma(kLoad(w_row, e), kLoad(x_row, e), acc[e % 16]);
  return reduce16(acc);
}

// ---- The matmul loop (matmul_rows.h) over each format's dot product.

template <DotFn kDot>
constexpr FormatKernels kernels() {
  return FormatKernels{kDot, matmul_rows<kDot>};
}

MatmulKernels make_scalar_kernels() {
  MatmulKernels t{};
  t.f32 = kernels<dot_float<load_f32>>();
  t.f16 = kernels<dot_float<load_f16>>();
  t.bf16 = kernels<dot_float<load_bf16>>();
  t.q4_0 = kernels<dot_blocks32<BlockQ4_0, BlockQ8_0>>();
  t.q4_1 = kernels<dot_blocks32<BlockQ4_1, BlockQ8_1>>();
  t.q5_0 = kernels<dot_blocks32<BlockQ5_0, BlockQ8_0>>();
  t.q5_1 = kernels<dot_blocks32<BlockQ5_1, BlockQ8_1>>();
  t.q8_0 = kernels<dot_blocks32<BlockQ8_0, BlockQ8_0>>();
  t.q4_k = kernels<dot_q45_k<BlockQ4_K>>();
  t.q5_k = kernels<dot_q45_k<BlockQ5_K>>();
  t.q6_k = kernels<dot_q6_k>();
  add_lowbit_kernels_scalar(t);
  return t;
}

}  // namespace

const FormatKernels& MatmulKernels::get(Format format) const {
  switch (format) {
    case Format::kF32:
      return f32;
    case Format::kF16:
      return f16;
    case Format::kBF16:
      return bf16;
    case Format::kQ4_0:
      return q4_0;
    case Format::kQ4_1:
      return q4_1;
    case Format::kQ5_0:
      return q5_0;
    case Format::kQ5_1:
      return q5_1;
    case Format::kQ8_0:
      return q8_0;
    case Format::kQ4_K:
      return q4_k;
    case Format::kQ5_K:
      return q5_k;
    case Format::kQ6_K:
      return q6_k;
    case Format::kQ2_K:
      return q2_k;
    case Format::kQ3_K:
      return q3_k;
    case Format::kIQ4_NL:
      return iq4_nl;
    case Format::kIQ4_XS:
      return iq4_xs;
    case Format::kMXFP4:
      return mxfp4;
    default:
      break;
  }
  assert(false && "not a weight format");
  return f32;
}

MatmulFn MatmulKernels::matmul(Format format) const { return get(format).matmul; }
DotFn MatmulKernels::dot(Format format) const { return get(format).dot; }

const MatmulKernels& matmul_kernels(Isa isa) {
  static const MatmulKernels scalar = make_scalar_kernels();
  switch (isa) {
    case Isa::kScalar:
      return scalar;
    case Isa::kAvx2:
      return avx2::matmul_kernels();
    case Isa::kAvx512:
      return avx512::matmul_kernels();
  }
  return scalar;
}

}  // namespace drift::kernels
