// Internal: the parts of the int4 KV store (kv_format.h) that the scalar reference and the SIMD
// stores share, so that they take the same decisions from the same numbers: the codebook's
// midpoints, a key row's master scale, and each key group's candidate sub-scales. What the SIMD
// code does itself (rotation, largest elements, errors, codes) is spelled out here in the order
// it must follow.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>

#include "kernels/fp16.h"
#include "kernels/kv_format.h"

namespace drift::kernels::kv_int4 {

// Midpoints between consecutive levels (halves of integers, exact in fp32); the 16th is +inf. A
// value above kMidpoints[c] is nearer level c + 1 than level c (a tie goes to the lower level).
constexpr std::array<float, 16> midpoints() {
  std::array<float, 16> t{};
  for (int c = 0; c < 15; ++c) t[c] = (kKvInt4Levels[c] + kKvInt4Levels[c + 1]) / 2.0f;
  t[15] = INFINITY;
  return t;
}
inline constexpr std::array<float, 16> kMidpoints = midpoints();

// The code of the level nearest to y (y in units of the scale): a binary search over the
// midpoints, 4 comparisons. Branch-free: the comparisons go either way at random, and
// mispredicted branches made the search cost 35 cycles per element. SIMD: the same 4 steps with
// table lookups (the count of midpoints below y, which is what this computes).
inline uint8_t code_of(float y) {
  int code = 8 * static_cast<int>(y > kMidpoints[7]);
  code += 4 * static_cast<int>(y > kMidpoints[code + 3]);
  code += 2 * static_cast<int>(y > kMidpoints[code + 1]);
  code += static_cast<int>(y > kMidpoints[code]);
  return static_cast<uint8_t>(code);
}

// 1 / s, or 0 for a zero scale (every code then stands for 0 x 0).
inline float inverse(float s) { return s != 0.0f ? 1.0f / s : 0.0f; }

// The sum of a group's 16 squared errors in a fixed tree: s8[i] = d[i] + d[i + 8], s4[i] = s8[i] +
// s8[i + 4], s2[i] = s4[i] + s4[i + 2], s2[0] + s2[1] (how a 16-lane or two 8-lane registers
// reduce). Each error is d = x - float(level) * s, squared, every operation rounded.
inline float group_error(const float* x, float s) {
  const float inv = inverse(s);
  float d2[16];
  for (int u = 0; u < 16; ++u) {
    const float d = x[u] - static_cast<float>(kKvInt4Levels[code_of(x[u] * inv)]) * s;
    d2[u] = d * d;
  }
  for (int w = 8; w >= 1; w /= 2)
    for (int u = 0; u < w; ++u) d2[u] = d2[u] + d2[u + w];
  return d2[0];
}

// The element of largest magnitude in x[0, n), the first of equals (a value, with its sign).
inline float signed_max(const float* x, int64_t n) {
  float m = 0.0f;
  for (int64_t u = 0; u < n; ++u)
    if (std::fabs(x[u]) > std::fabs(m)) m = x[u];
  return m;
}

// ---- Keys: a fp16 master per row and an int8 sub-scale per group of 16.

// The master of a key row whose largest rotated magnitude is `amax`: the unit of its sub-scales
// (fp32(master) * 2^-7) puts the largest candidate scale of the row's largest group,
// amax / 127 * kShrink[0], at sub-scale 127. The 2^-7 keeps the master in fp16's normal range for
// rows down to |x| ~ 0.006 (a unit of amax / 127^2 would go subnormal below 0.8).
inline constexpr float kMasterFactor = static_cast<float>(1.25 * 128.0 / (127.0 * 127.0));
inline uint16_t key_master(float amax) {
  return f32_to_fp16(std::min(amax * kMasterFactor, 65504.0f));
}
inline float key_unit(uint16_t master) { return fp16_to_f32(master) * 0x1p-7f; }

// The key group's candidate scales, relative to the plain one (largest element m at level -127,
// scale m / -127): above 1 m lands on an inner level, below 1 a lone extreme is clipped a little
// to round the other 15 more finely. The one with the least squared error wins (the first of
// equals). Keys carry all of int4's perplexity cost (values through int4 cost nothing measurable),
// so only keys search.
inline constexpr int kCandidates = 12;
inline constexpr float kShrink[kCandidates] = {1.25f, 1.2f, 1.15f, 1.1f, 1.05f, 1.0f,
                                               0.95f, 0.9f, 0.85f, 0.8f, 0.75f, 0.7f};

// The sub-scale nearest to scale c in units of `unit`, within [-127, 127] (0 when unit is 0).
inline int8_t sub_scale(float c, float unit) {
  if (unit == 0.0f) return 0;
  return static_cast<int8_t>(std::clamp(std::nearbyint(c / unit), -127.0f, 127.0f));
}

// The candidate sub-scales of a group whose element of largest magnitude is m.
inline void key_candidates(float m, float unit, int8_t* subs) {
  const float plain = m / -127.0f;
  for (int k = 0; k < kCandidates; ++k) subs[k] = sub_scale(plain * kShrink[k], unit);
}

// After the candidates, the sub-scales next to the best one: kNeighbours steps of one unit either
// side (-3, -2, -1, 1, 2, 3), clamped. The candidates are 5% apart, several units for the row's
// larger groups; the steps between them find a closer scale.
inline constexpr int kNeighbours = 6;
inline void neighbour_subs(int8_t best, int8_t* subs) {
  constexpr int kStep[kNeighbours] = {-3, -2, -1, 1, 2, 3};
  for (int k = 0; k < kNeighbours; ++k)
    subs[k] = static_cast<int8_t>(std::clamp(best + kStep[k], -127, 127));
}

// The scale a sub-scale stands for.
inline float key_scale(int8_t sub, float unit) { return static_cast<float>(sub) * unit; }

// ---- Values: a fp16 scale per group, largest element at level -127.
inline uint16_t value_scale(float m) {
  return f32_to_fp16(std::clamp(m / -127.0f, -65504.0f, 65504.0f));
}

}  // namespace drift::kernels::kv_int4
