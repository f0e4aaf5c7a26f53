#include "kernels/kv_format.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "kernels/fp16.h"

namespace drift::kernels {
namespace {

// Element (slot, e) is element `index` of the data part: e * page_size + slot for keys,
// slot * dim + e for values; its scale is scales[scale_index].
struct Place {
  int64_t index;
  int64_t scale_index;
};

Place key_place(KvFormat f, int64_t dim, int64_t page_size, int64_t slot, int64_t e) {
  const int64_t group = kv_group_size(f, dim);
  return {e * page_size + slot, group ? (e / group) * page_size + slot : 0};
}

Place value_place(KvFormat f, int64_t dim, int64_t slot, int64_t e) {
  const int64_t group = kv_group_size(f, dim);
  return {slot * dim + e, group ? slot * (dim / group) + e / group : 0};
}

uint16_t* scales_of(KvFormat f, uint8_t* block, int64_t dim, int64_t page_size) {
  return reinterpret_cast<uint16_t*>(block + kv_data_bytes(f, dim, page_size));
}
const uint16_t* scales_of(KvFormat f, const uint8_t* block, int64_t dim, int64_t page_size) {
  return reinterpret_cast<const uint16_t*>(block + kv_data_bytes(f, dim, page_size));
}

// The int4 code whose level is nearest to y (y in units of the scale; ties to the lower level).
// Midpoints between consecutive levels (exact in fp32: halves of integers). A value above
// kInt4Midpoints[c] is nearer level c + 1 than level c (a tie goes to the lower level).
constexpr std::array<float, 16> int4_midpoints() {
  std::array<float, 16> t{};
  for (int c = 0; c < 15; ++c) t[c] = (kKvInt4Levels[c] + kKvInt4Levels[c + 1]) / 2.0f;
  t[15] = INFINITY;
  return t;
}
constexpr std::array<float, 16> kInt4Midpoints = int4_midpoints();

// The code of the level nearest to y: a binary search over the midpoints (4 comparisons; the
// store runs it for every element of every scale tried).
// Branch-free: the comparisons go either way at random, and mispredicted branches made the
// search cost 35 cycles per element.
uint8_t int4_code(float y) {
  int code = 8 * static_cast<int>(y > kInt4Midpoints[7]);
  code += 4 * static_cast<int>(y > kInt4Midpoints[code + 3]);
  code += 2 * static_cast<int>(y > kInt4Midpoints[code + 1]);
  code += static_cast<int>(y > kInt4Midpoints[code]);
  return static_cast<uint8_t>(code);
}

void put(KvFormat f, uint8_t* data, int64_t index, float x, float inv_scale) {
  switch (f) {
    case KvFormat::kF16: {
      const uint16_t h = f32_to_fp16(x);
      std::memcpy(data + 2 * index, &h, 2);
      return;
    }
    case KvFormat::kBF16: {
      const uint16_t h = f32_to_bf16(x);
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
    case KvFormat::kInt4: {
      const uint8_t code = int4_code(x * inv_scale);
      uint8_t& byte = data[index / 2];
      byte = (index & 1) ? static_cast<uint8_t>((byte & 0x0f) | (code << 4))
                         : static_cast<uint8_t>((byte & 0xf0) | code);
      return;
    }
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

// The fp16 scale of an int4 group. Sixteen levels are coarse, so for keys the scale is searched:
// the element of largest magnitude m is put at the far end of the codebook's longer side (level
// -127, scale -m / 127, negative when m is positive) times each factor of kInt4KeyShrink, and the
// candidate with the least squared error over the group wins. A factor below 1 clips a lone
// extreme element a little to round the others more finely; above 1 puts m on an inner level.
// Keys carry all of int4's perplexity cost (values through int4 cost nothing measurable), so
// values take the plain scale: the search runs for every group of every token and layer.
// docs/design-notes.md has the measurements of each choice.
constexpr float kInt4KeyShrink[] = {1.25f, 1.2f, 1.15f, 1.1f, 1.05f, 1.0f,
                                    0.95f, 0.9f, 0.85f, 0.8f, 0.75f, 0.7f};
constexpr float kInt4End = -127.0f;

uint16_t int4_scale(const float* x, int64_t n, bool search) {
  float m = 0.0f;
  for (int64_t u = 0; u < n; ++u)
    if (std::fabs(x[u]) > std::fabs(m)) m = x[u];
  if (!search) return f32_to_fp16(std::clamp(m / kInt4End, -65504.0f, 65504.0f));
  uint16_t best = 0;
  float best_error = INFINITY;
  for (float shrink : kInt4KeyShrink) {
    const uint16_t s16 = f32_to_fp16(std::clamp(m / kInt4End * shrink, -65504.0f, 65504.0f));
    const float s = fp16_to_f32(s16);
    const float inv = s != 0.0f ? 1.0f / s : 0.0f;
    float error = 0.0f;
    for (int64_t u = 0; u < n; ++u) {
      const float d = x[u] - static_cast<float>(kKvInt4Levels[int4_code(x[u] * inv)]) * s;
      error += d * d;
    }
    if (error < best_error) best_error = error, best = s16;
  }
  return best;
}

// Stores x[dim] through `place(e)`, group by group (rotated first when the format says so).
template <typename PlaceFn>
void store_row(KvFormat f, uint8_t* block, int64_t dim, int64_t page_size, const float* x,
               bool is_key, PlaceFn place) {
  uint16_t* scales = scales_of(f, block, dim, page_size);
  const int64_t group = kv_group_size(f, dim);
  if (group == 0) {
    for (int64_t e = 0; e < dim; ++e) put(f, block, place(e).index, x[e], 0.0f);
    return;
  }
  // Rotation blocks of kKvGroup elements hold whole scale groups (int4's are smaller).
  const bool rotated = kv_format_rotated(f, dim);
  const int64_t span = rotated ? kKvGroup : group;
  for (int64_t b0 = 0; b0 < dim; b0 += span) {
    float rot[kKvGroup];
    const float* xb = x + b0;
    if (rotated) {
      std::memcpy(rot, xb, sizeof rot);
      kv_rotate(rot, kKvGroup);
      xb = rot;
    }
    for (int64_t g0 = 0; g0 < span; g0 += group) {
      const float* xg = xb + g0;
      const uint16_t s16 =
          f == KvFormat::kInt8 ? int8_scale(xg, group) : int4_scale(xg, group, is_key);
      scales[place(b0 + g0).scale_index] = s16;
      const float s = fp16_to_f32(s16);
      const float inv = s != 0.0f ? 1.0f / s : 0.0f;
      for (int64_t u = 0; u < group; ++u) put(f, block, place(b0 + g0 + u).index, xg[u], inv);
    }
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

int64_t kv_block_bytes(KvFormat format, int64_t dim, int64_t page_size) {
  const int64_t group = kv_group_size(format, dim);
  const int64_t scale_bytes = group ? (dim / group) * page_size * 2 : 0;
  return (kv_data_bytes(format, dim, page_size) + scale_bytes + 3) / 4 * 4;
}

void kv_store_key(KvFormat f, uint8_t* block, int64_t dim, int64_t page_size, int64_t slot,
                  const float* x) {
  store_row(f, block, dim, page_size, x, /*is_key=*/true,
            [&](int64_t e) { return key_place(f, dim, page_size, slot, e); });
}

void kv_store_value(KvFormat f, uint8_t* block, int64_t dim, int64_t page_size, int64_t slot,
                    const float* x) {
  store_row(f, block, dim, page_size, x, /*is_key=*/false,
            [&](int64_t e) { return value_place(f, dim, slot, e); });
}

float kv_load_key(KvFormat f, const uint8_t* block, int64_t dim, int64_t page_size, int64_t slot,
                  int64_t e) {
  const Place p = key_place(f, dim, page_size, slot, e);
  const float scale =
      kv_group_size(f, dim) ? fp16_to_f32(scales_of(f, block, dim, page_size)[p.scale_index]) : 0;
  return get(f, block, p.index, scale);
}

float kv_load_value(KvFormat f, const uint8_t* block, int64_t dim, int64_t page_size, int64_t slot,
                    int64_t e) {
  const Place p = value_place(f, dim, slot, e);
  const float scale =
      kv_group_size(f, dim) ? fp16_to_f32(scales_of(f, block, dim, page_size)[p.scale_index]) : 0;
  return get(f, block, p.index, scale);
}

}  // namespace drift::kernels
