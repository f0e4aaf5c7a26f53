#include "kernels/kv_format.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "kernels/dispatch.h"
#include "kernels/fp16.h"
#include "kernels/kv_int4.h"

namespace drift::kernels {
namespace {

// Element (slot, e) is element `index` of the data part: e * page_size + slot for keys,
// slot * dim + e for values; its scale is scales[scale_index] (int8, int4 values) or, for int4
// keys, sub-scale scale_index and master `slot`.
struct Place {
  int64_t index;
  int64_t scale_index;
};

Place key_place(KvFormat f, int64_t dim, int64_t page_size, int64_t slot, int64_t e) {
  const int64_t group = kv_key_group(f, dim);
  return {e * page_size + slot, group ? (e / group) * page_size + slot : 0};
}

Place value_place(KvFormat f, int64_t dim, int64_t slot, int64_t e) {
  const int64_t group = kv_value_group(f, dim);
  return {slot * dim + e, group ? slot * (dim / group) + e / group : 0};
}

uint16_t* scales_of(KvFormat f, uint8_t* block, int64_t dim, int64_t page_size) {
  return reinterpret_cast<uint16_t*>(block + kv_data_bytes(f, dim, page_size));
}
const uint16_t* scales_of(KvFormat f, const uint8_t* block, int64_t dim, int64_t page_size) {
  return reinterpret_cast<const uint16_t*>(block + kv_data_bytes(f, dim, page_size));
}

void put(KvFormat f, uint8_t* data, int64_t index, float x, float inv_scale) {
  switch (f) {
    case KvFormat::kF16: {
      const uint16_t h = f32_to_fp16(x);
      std::memcpy(data + 2 * index, &h, 2);
      return;
    }
    case KvFormat::kBF16: {
      // Tiny elements stored as zero: the operands the bf16 attention order needs.
      const uint16_t h = bf16_flush_tiny(f32_to_bf16(x));
      std::memcpy(data + 2 * index, &h, 2);
      return;
    }
    case KvFormat::kF32:
      std::memcpy(data + 4 * index, &x, 4);
      return;
    case KvFormat::kInt8: {
      const float c = std::clamp(std::nearbyint(x * inv_scale), -127.0f, 127.0f);
      data[index] = static_cast<uint8_t>(static_cast<int8_t>(c));
      return;
    }
    case KvFormat::kInt4:  // whole rows: store_int4_key / store_int4_value
      return;
  }
}

float get(KvFormat f, const uint8_t* data, int64_t index, float scale) {
  switch (f) {
    case KvFormat::kF16: {
      uint16_t h;
      std::memcpy(&h, data + 2 * index, 2);
      return fp16_to_f32(h);
    }
    case KvFormat::kBF16: {
      uint16_t h;
      std::memcpy(&h, data + 2 * index, 2);
      return bf16_to_f32(h);
    }
    case KvFormat::kF32: {
      float x;
      std::memcpy(&x, data + 4 * index, 4);
      return x;
    }
    case KvFormat::kInt8:
      return static_cast<float>(static_cast<int8_t>(data[index])) * scale;
    case KvFormat::kInt4: {
      const int code = (data[index / 2] >> ((index & 1) * 4)) & 0x0f;
      return static_cast<float>(kKvInt4Levels[code]) * scale;
    }
  }
  return 0.0f;
}

// The fp16 scale of an int8 group whose largest magnitude is `amax`: codes up to +-127. The codes
// are computed against the rounded (stored) scale, so that code * scale is what is read.
uint16_t int8_scale(const float* x, int64_t n) {
  float amax = 0.0f;
  for (int64_t u = 0; u < n; ++u) amax = std::max(amax, std::fabs(x[u]));
  return f32_to_fp16(std::min(amax / 127.0f, 65504.0f));
}

// Stores x[dim] through `place(e)`: the float types element by element, int8 group by group
// (rotated first when the format says so).
template <typename PlaceFn>
void store_row(KvFormat f, uint8_t* block, int64_t dim, int64_t page_size, const float* x,
               int64_t group, PlaceFn place) {
  if (group == 0) {
    for (int64_t e = 0; e < dim; ++e) put(f, block, place(e).index, x[e], 0.0f);
    return;
  }
  uint16_t* scales = scales_of(f, block, dim, page_size);
  const bool rotated = kv_format_rotated(f, dim);
  for (int64_t g0 = 0; g0 < dim; g0 += group) {
    float rot[kKvGroup];
    const float* xg = x + g0;
    if (rotated) {
      std::memcpy(rot, xg, sizeof rot);
      kv_rotate(rot, kKvGroup);
      xg = rot;
    }
    const uint16_t s16 = int8_scale(xg, group);
    scales[place(g0).scale_index] = s16;
    const float s = fp16_to_f32(s16);
    const float inv = s != 0.0f ? 1.0f / s : 0.0f;
    for (int64_t u = 0; u < group; ++u) put(f, block, place(g0 + u).index, xg[u], inv);
  }
}

// Code c into the nibble of data element `index`.
void put_code(uint8_t* data, int64_t index, uint8_t code) {
  uint8_t& byte = data[index / 2];
  byte = (index & 1) ? static_cast<uint8_t>((byte & 0x0f) | (code << 4))
                     : static_cast<uint8_t>((byte & 0xf0) | code);
}

// The sub-scale of a key group (x[16], largest element m) with the least squared error among the
// candidates (kv_int4.h).
int8_t search_key_sub(const float* x, float m, float unit) {
  int8_t subs[kv_int4::kCandidates];
  kv_int4::key_candidates(m, unit, subs);
  int8_t best = 0;
  float best_error = INFINITY;
  for (int8_t sub : subs) {
    const float error = kv_int4::group_error(x, kv_int4::key_scale(sub, unit));
    if (error < best_error) best_error = error, best = sub;
  }
  int8_t near[kv_int4::kNeighbours];
  kv_int4::neighbour_subs(best, near);
  for (int8_t sub : near) {
    const float error = kv_int4::group_error(x, kv_int4::key_scale(sub, unit));
    if (error < best_error) best_error = error, best = sub;
  }
  return best;
}

// int4 key row: the rotated row's largest magnitude gives the master (a first pass), then each
// group of 16 its searched sub-scale and codes.
void store_int4_key(uint8_t* block, int64_t dim, int64_t page_size, int64_t slot, const float* x) {
  float amax = 0.0f;
  for (int64_t b0 = 0; b0 < dim; b0 += kKvGroup) {
    float rot[kKvGroup];
    std::memcpy(rot, x + b0, sizeof rot);
    kv_rotate(rot, kKvGroup);
    for (float r : rot) amax = std::max(amax, std::fabs(r));
  }
  const uint16_t master = kv_int4::key_master(amax);
  const float unit = kv_int4::key_unit(master);
  std::memcpy(block + kv_int4_masters_offset(dim, page_size) + 2 * slot, &master, 2);
  int8_t* subs = reinterpret_cast<int8_t*>(block + kv_int4_subs_offset(dim, page_size));
  for (int64_t b0 = 0; b0 < dim; b0 += kKvGroup) {
    float rot[kKvGroup];
    std::memcpy(rot, x + b0, sizeof rot);
    kv_rotate(rot, kKvGroup);
    for (int64_t g0 = 0; g0 < kKvGroup; g0 += kKvInt4KeyGroup) {
      const float* xg = rot + g0;
      const int8_t sub = search_key_sub(xg, kv_int4::signed_max(xg, kKvInt4KeyGroup), unit);
      subs[(b0 + g0) / kKvInt4KeyGroup * page_size + slot] = sub;
      const float s = kv_int4::key_scale(sub, unit), inv = kv_int4::inverse(s);
      for (int64_t u = 0; u < kKvInt4KeyGroup; ++u)
        put_code(block, (b0 + g0 + u) * page_size + slot, kv_int4::code_of(xg[u] * inv));
    }
  }
}

// int4 value row: per group (one or two rotation blocks), the plain scale and the codes.
void store_int4_value(uint8_t* block, int64_t dim, int64_t page_size, int64_t slot,
                      const float* x) {
  const int64_t group = kv_value_group(KvFormat::kInt4, dim);
  uint16_t* scales = scales_of(KvFormat::kInt4, block, dim, page_size) + slot * (dim / group);
  for (int64_t g0 = 0; g0 < dim; g0 += group) {
    float rot[kKvInt4ValueGroup];
    std::memcpy(rot, x + g0, group * sizeof(float));
    kv_rotate(rot, group);
    const uint16_t s16 = kv_int4::value_scale(kv_int4::signed_max(rot, group));
    scales[g0 / group] = s16;
    const float inv = kv_int4::inverse(fp16_to_f32(s16));
    for (int64_t u = 0; u < group; ++u)
      put_code(block, slot * dim + g0 + u, kv_int4::code_of(rot[u] * inv));
  }
}

}  // namespace

void kv_rotate(float* x, int64_t n) {
  constexpr int64_t kG = kKvGroup;
  const float norm = 1.0f / std::sqrt(static_cast<float>(kG));
  for (int64_t g0 = 0; g0 < n; g0 += kG) {
    float* y = x + g0;
    for (int64_t h = 1; h < kG; h *= 2)
      for (int64_t i = 0; i < kG; i += 2 * h)
        for (int64_t j = i; j < i + h; ++j) {
          const float a = y[j], b = y[j + h];
          y[j] = a + b;
          y[j + h] = a - b;
        }
    for (int64_t j = 0; j < kG; ++j) y[j] *= norm;
  }
}

Status kv_format_check(KvFormat format, int64_t dim, int64_t page_size) {
  if (format == KvFormat::kInt4 && (dim % kKvGroup != 0 || page_size % 2 != 0))
    return make_error(
        "int4 KV cache needs a head dimension that is a multiple of {} and an even page size, "
        "got head dim {}, page size {}",
        kKvGroup, dim, page_size);
  return Status::Ok();
}

int64_t kv_key_block_bytes(KvFormat format, int64_t dim, int64_t page_size) {
  const int64_t group = kv_key_group(format, dim);
  int64_t scale_bytes = group ? (dim / group) * page_size * 2 : 0;
  if (format == KvFormat::kInt4) scale_bytes = page_size * 2 + (dim / group) * page_size;
  return (kv_data_bytes(format, dim, page_size) + scale_bytes + 3) / 4 * 4;
}

int64_t kv_value_block_bytes(KvFormat format, int64_t dim, int64_t page_size) {
  const int64_t group = kv_value_group(format, dim);
  const int64_t scale_bytes = group ? (dim / group) * page_size * 2 : 0;
  return (kv_data_bytes(format, dim, page_size) + scale_bytes + 3) / 4 * 4;
}

void kv_store_key(KvFormat f, uint8_t* block, int64_t dim, int64_t page_size, int64_t slot,
                  const float* x) {
  if (f == KvFormat::kInt4) return store_int4_key(block, dim, page_size, slot, x);
  store_row(f, block, dim, page_size, x, kv_key_group(f, dim),
            [&](int64_t e) { return key_place(f, dim, page_size, slot, e); });
}

void kv_store_value(KvFormat f, uint8_t* block, int64_t dim, int64_t page_size, int64_t slot,
                    const float* x) {
  if (f == KvFormat::kInt4) return store_int4_value(block, dim, page_size, slot, x);
  store_row(f, block, dim, page_size, x, kv_value_group(f, dim),
            [&](int64_t e) { return value_place(f, dim, slot, e); });
}

// An f16 or bf16 row through the ISA's row converter (fp16.h: the scalar bits), then placed:
// the element-by-element put() of the scalar store was ~2% of a prefill. False: not such a row.
bool store_half_row(Isa isa, KvFormat f, uint8_t* block, int64_t dim, int64_t page_size,
                    int64_t slot, const float* x, bool transposed) {
  constexpr int64_t kMaxDim = 1024;
  if ((f != KvFormat::kF16 && f != KvFormat::kBF16) || isa == Isa::kScalar || dim > kMaxDim)
    return false;
  uint16_t h[kMaxDim];
  if (f == KvFormat::kF16) {
    convert_f32_to_fp16(isa, x, h, dim);
  } else {
    convert_f32_to_bf16(isa, x, h, dim);
    for (int64_t e = 0; e < dim; ++e) h[e] = bf16_flush_tiny(h[e]);
  }
  if (!transposed) {
    std::memcpy(block + 2 * slot * dim, h, 2 * dim);
    return true;
  }
  for (int64_t e = 0; e < dim; ++e) std::memcpy(block + 2 * (e * page_size + slot), h + e, 2);
  return true;
}

void kv_store_key(Isa isa, KvFormat f, uint8_t* block, int64_t dim, int64_t page_size, int64_t slot,
                  const float* x) {
  if (store_half_row(isa, f, block, dim, page_size, slot, x, /*transposed=*/true)) return;
  if (f == KvFormat::kInt4 && isa == Isa::kAvx512)
    return avx512::kv_store_int4_key(block, dim, page_size, slot, x);
  if (f == KvFormat::kInt4 && isa == Isa::kAvx2)
    return avx2::kv_store_int4_key(block, dim, page_size, slot, x);
  kv_store_key(f, block, dim, page_size, slot, x);
}

void kv_store_value(Isa isa, KvFormat f, uint8_t* block, int64_t dim, int64_t page_size,
                    int64_t slot, const float* x) {
  if (store_half_row(isa, f, block, dim, page_size, slot, x, /*transposed=*/false)) return;
  if (f == KvFormat::kInt4 && isa == Isa::kAvx512)
    return avx512::kv_store_int4_value(block, dim, page_size, slot, x);
  if (f == KvFormat::kInt4 && isa == Isa::kAvx2)
    return avx2::kv_store_int4_value(block, dim, page_size, slot, x);
  kv_store_value(f, block, dim, page_size, slot, x);
}

float kv_load_key(KvFormat f, const uint8_t* block, int64_t dim, int64_t page_size, int64_t slot,
                  int64_t e) {
  const Place p = key_place(f, dim, page_size, slot, e);
  if (f == KvFormat::kInt4) {
    uint16_t master;
    std::memcpy(&master, block + kv_int4_masters_offset(dim, page_size) + 2 * slot, 2);
    const auto sub =
        static_cast<int8_t>(block[kv_int4_subs_offset(dim, page_size) + p.scale_index]);
    return get(f, block, p.index, kv_int4::key_scale(sub, kv_int4::key_unit(master)));
  }
  const float scale =
      kv_key_group(f, dim) ? fp16_to_f32(scales_of(f, block, dim, page_size)[p.scale_index]) : 0;
  return get(f, block, p.index, scale);
}

float kv_load_value(KvFormat f, const uint8_t* block, int64_t dim, int64_t page_size, int64_t slot,
                    int64_t e) {
  const Place p = value_place(f, dim, slot, e);
  const float scale =
      kv_value_group(f, dim) ? fp16_to_f32(scales_of(f, block, dim, page_size)[p.scale_index]) : 0;
  return get(f, block, p.index, scale);
}

}  // namespace drift::kernels
