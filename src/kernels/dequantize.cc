#include "kernels/dequantize.h"

#include <cstring>

#include "kernels/fp16.h"
#include "kernels/lowbit_dispatch.h"

namespace drift::kernels {
namespace {

void dequantize_q4_0(const BlockQ4_0* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = fp16_to_f32(x[i].d);
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = static_cast<float>((x[i].qs[j] & 15) - 8) * d;
      y[j + 16] = static_cast<float>((x[i].qs[j] >> 4) - 8) * d;
    }
  }
}

void dequantize_q4_1(const BlockQ4_1* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = fp16_to_f32(x[i].d);
    const float m = fp16_to_f32(x[i].m);
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = static_cast<float>(x[i].qs[j] & 15) * d + m;
      y[j + 16] = static_cast<float>(x[i].qs[j] >> 4) * d + m;
    }
  }
}

// The 32 5-bit values of a Q5_0/Q5_1 block, in element order.
void unpack_q5(const uint8_t* qh_bytes, const uint8_t* qs, int* q) {
  uint32_t qh;
  std::memcpy(&qh, qh_bytes, sizeof qh);
  for (int j = 0; j < kQK / 2; ++j) {
    q[j] = (qs[j] & 15) | static_cast<int>(((qh >> j) & 1u) << 4);
    q[j + 16] = (qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1u) << 4);
  }
}

void dequantize_q5_0(const BlockQ5_0* x, float* y, int64_t nb) {
  int q[kQK];
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = fp16_to_f32(x[i].d);
    unpack_q5(x[i].qh, x[i].qs, q);
    for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(q[j] - 16) * d;
  }
}

void dequantize_q5_1(const BlockQ5_1* x, float* y, int64_t nb) {
  int q[kQK];
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = fp16_to_f32(x[i].d);
    const float m = fp16_to_f32(x[i].m);
    unpack_q5(x[i].qh, x[i].qs, q);
    for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(q[j]) * d + m;
  }
}

void dequantize_q8_0(const BlockQ8_0* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = fp16_to_f32(x[i].d);
    for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(x[i].qs[j]) * d;
  }
}

void dequantize_q8_1(const BlockQ8_1* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = fp16_to_f32(x[i].d);
    for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(x[i].qs[j]) * d;
  }
}

void dequantize_q4_k(const BlockQ4_K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_f32(x[i].d);
    const float dmin = fp16_to_f32(x[i].dmin);
    for (int c = 0; c < 4; ++c) {
      const uint8_t* q = x[i].qs + 32 * c;
      for (int h = 0; h < 2; ++h) {
        uint8_t sc, mn;
        unpack_scale_min_k4(x[i].scales, 2 * c + h, &sc, &mn);
        const float ds = d * static_cast<float>(sc);
        const float dm = dmin * static_cast<float>(mn);
        for (int l = 0; l < 32; ++l) *y++ = ds * static_cast<float>((q[l] >> (4 * h)) & 15) - dm;
      }
    }
  }
}

void dequantize_q5_k(const BlockQ5_K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_f32(x[i].d);
    const float dmin = fp16_to_f32(x[i].dmin);
    for (int c = 0; c < 4; ++c) {
      const uint8_t* q = x[i].qs + 32 * c;
      for (int h = 0; h < 2; ++h) {
        uint8_t sc, mn;
        unpack_scale_min_k4(x[i].scales, 2 * c + h, &sc, &mn);
        const float ds = d * static_cast<float>(sc);
        const float dm = dmin * static_cast<float>(mn);
        const int bit = 2 * c + h;
        for (int l = 0; l < 32; ++l) {
          const int v = ((q[l] >> (4 * h)) & 15) | (((x[i].qh[l] >> bit) & 1) << 4);
          *y++ = ds * static_cast<float>(v) - dm;
        }
      }
    }
  }
}

void dequantize_q6_k(const BlockQ6_K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_f32(x[i].d);
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = x[i].ql + 64 * h;
      const uint8_t* qh = x[i].qh + 32 * h;
      const int8_t* sc = x[i].scales + 8 * h;
      for (int l = 0; l < 32; ++l) {
        const int q[4] = {
            ((ql[l] & 15) | ((qh[l] >> 0) & 3) << 4) - 32,
            ((ql[l + 32] & 15) | ((qh[l] >> 2) & 3) << 4) - 32,
            ((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32,
            ((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32,
        };
        for (int part = 0; part < 4; ++part) {
          const float ds = d * static_cast<float>(sc[l / 16 + 2 * part]);
          y[l + 32 * part] = ds * static_cast<float>(q[part]);
        }
      }
      y += 128;
    }
  }
}

void dequantize_q8_k(const BlockQ8_K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQKK)
    for (int j = 0; j < kQKK; ++j) y[j] = static_cast<float>(x[i].qs[j]) * x[i].d;
}

}  // namespace

void unpack_scale_min_k4(const uint8_t* q, int j, uint8_t* scale, uint8_t* min) {
  if (j < 4) {
    *scale = q[j] & 63;
    *min = q[j + 4] & 63;
  } else {
    *scale = static_cast<uint8_t>((q[j + 4] & 15) | ((q[j - 4] >> 6) << 4));
    *min = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

void dequantize_row(Format format, const void* src, float* dst, int64_t k) {
  const int64_t nb = k / format_info(format).block_size;
  switch (format) {
    case Format::kF32:
      std::memcpy(dst, src, static_cast<size_t>(k) * sizeof(float));
      return;
    case Format::kF16: {
      const auto* h = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < k; ++i) dst[i] = fp16_to_f32(h[i]);
      return;
    }
    case Format::kBF16: {
      const auto* h = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < k; ++i) dst[i] = bf16_to_f32(h[i]);
      return;
    }
    case Format::kQ4_0:
      return dequantize_q4_0(static_cast<const BlockQ4_0*>(src), dst, nb);
    case Format::kQ4_1:
      return dequantize_q4_1(static_cast<const BlockQ4_1*>(src), dst, nb);
    case Format::kQ5_0:
      return dequantize_q5_0(static_cast<const BlockQ5_0*>(src), dst, nb);
    case Format::kQ5_1:
      return dequantize_q5_1(static_cast<const BlockQ5_1*>(src), dst, nb);
    case Format::kQ8_0:
      return dequantize_q8_0(static_cast<const BlockQ8_0*>(src), dst, nb);
    case Format::kQ8_1:
      return dequantize_q8_1(static_cast<const BlockQ8_1*>(src), dst, nb);
    case Format::kQ4_K:
      return dequantize_q4_k(static_cast<const BlockQ4_K*>(src), dst, nb);
    case Format::kQ5_K:
      return dequantize_q5_k(static_cast<const BlockQ5_K*>(src), dst, nb);
    case Format::kQ6_K:
      return dequantize_q6_k(static_cast<const BlockQ6_K*>(src), dst, nb);
    case Format::kQ8_K:
      return dequantize_q8_k(static_cast<const BlockQ8_K*>(src), dst, nb);
    case Format::kQ2_K:
    case Format::kQ3_K:
    case Format::kIQ4_NL:
    case Format::kIQ4_XS:
    case Format::kMXFP4:
      return dequantize_lowbit(format, src, dst, nb);
  }
}

}  // namespace drift::kernels
