// AVX2 int4 KV stores: kv_format.cc's scalar reference with a group of 16 elements in two
// registers, the same operations in the same order (kv_int4.h), so the stored bytes are equal.
// The scalar key store spent ~10k cycles a K+V row of 64 on the key's scale search, most of
// int4's prefill cost; here a candidate's 16 errors are one pass of register operations.
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "kernels/dispatch.h"
#include "kernels/kv_int4.h"

namespace drift::kernels::avx2 {
namespace {

// 16 lanes as two registers: elements [0, 8) and [8, 16).
struct V16 {
  __m256 lo, hi;
};

// One butterfly stage of distance h < 8 within each 8 lanes: lane i gets x[i] + x[i + h] if bit
// h of i is clear, x[i - h] - x[i] if set (kv_rotate's a + b and a - b).
template <int kH>
inline __m256 butterfly(__m256 x) {
  __m256 partner;
  if constexpr (kH == 1) partner = _mm256_permute_ps(x, 0xb1);
  if constexpr (kH == 2) partner = _mm256_permute_ps(x, 0x4e);
  if constexpr (kH == 4) partner = _mm256_permute2f128_ps(x, x, 0x01);
  constexpr int kUpper = kH == 1 ? 0xaa : kH == 2 ? 0xcc : 0xf0;
  return _mm256_blend_ps(_mm256_add_ps(x, partner), _mm256_sub_ps(partner, x), kUpper);
}

// H x for the 32 elements at x (kv_rotate: butterflies of distance 1, 2, 4, 8, 16, then the
// normalisation), as elements [0, 16) and [16, 32).
inline void rotate32(const float* x, V16* lo, V16* hi) {
  __m256 r[4];
  for (int i = 0; i < 4; ++i)
    r[i] = butterfly<4>(butterfly<2>(butterfly<1>(_mm256_loadu_ps(x + 8 * i))));
  const __m256 a0 = _mm256_add_ps(r[0], r[1]), a1 = _mm256_sub_ps(r[0], r[1]);
  const __m256 b0 = _mm256_add_ps(r[2], r[3]), b1 = _mm256_sub_ps(r[2], r[3]);
  const __m256 norm = _mm256_set1_ps(1.0f / std::sqrt(static_cast<float>(kKvGroup)));
  lo->lo = _mm256_mul_ps(_mm256_add_ps(a0, b0), norm);
  lo->hi = _mm256_mul_ps(_mm256_add_ps(a1, b1), norm);
  hi->lo = _mm256_mul_ps(_mm256_sub_ps(a0, b0), norm);
  hi->hi = _mm256_mul_ps(_mm256_sub_ps(a1, b1), norm);
}

inline __m256 abs8(__m256 x) {
  return _mm256_castsi256_ps(
      _mm256_and_si256(_mm256_castps_si256(x), _mm256_set1_epi32(0x7fffffff)));
}

inline float max8(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

// kv_int4::signed_max over 16 lanes: the first lane of largest magnitude (0 when all are zero,
// as the scalar's starting value).
inline float signed_max16(V16 x) {
  const __m256 alo = abs8(x.lo), ahi = abs8(x.hi);
  const float amax = max8(_mm256_max_ps(alo, ahi));
  if (amax == 0.0f) return 0.0f;
  const __m256 m = _mm256_set1_ps(amax);
  const unsigned mask =
      static_cast<unsigned>(_mm256_movemask_ps(_mm256_cmp_ps(alo, m, _CMP_EQ_OQ))) |
      static_cast<unsigned>(_mm256_movemask_ps(_mm256_cmp_ps(ahi, m, _CMP_EQ_OQ))) << 8;
  alignas(32) float lanes[16];
  _mm256_store_ps(lanes, x.lo);
  _mm256_store_ps(lanes + 8, x.hi);
  return lanes[__builtin_ctz(mask)];
}

// table[idx] per lane for a 16-entry table (idx in [0, 16)): both halves looked up, bit 3 of
// idx (moved to the sign bit) choosing.
inline __m256 lookup16(__m256 table_lo, __m256 table_hi, __m256i idx) {
  return _mm256_blendv_ps(_mm256_permutevar8x32_ps(table_lo, idx),
                          _mm256_permutevar8x32_ps(table_hi, idx),
                          _mm256_castsi256_ps(_mm256_slli_epi32(idx, 28)));
}

// kv_int4::code_of on 8 lanes: the same four comparisons, the midpoints looked up per lane.
inline __m256i codes8(__m256 y) {
  const __m256 mid_lo = _mm256_loadu_ps(kv_int4::kMidpoints.data());
  const __m256 mid_hi = _mm256_loadu_ps(kv_int4::kMidpoints.data() + 8);
  auto above = [&](__m256 t, int add) {
    return _mm256_and_si256(_mm256_castps_si256(_mm256_cmp_ps(y, t, _CMP_GT_OQ)),
                            _mm256_set1_epi32(add));
  };
  __m256i code = above(_mm256_set1_ps(kv_int4::kMidpoints[7]), 8);
  auto step = [&](int offset, int add) {
    const __m256i idx = _mm256_add_epi32(code, _mm256_set1_epi32(offset));
    code = _mm256_add_epi32(code, above(lookup16(mid_lo, mid_hi, idx), add));
  };
  step(3, 4);
  step(1, 2);
  step(0, 1);
  return code;
}

alignas(32) constexpr float kLevels[16] = {
    kKvInt4Levels[0],  kKvInt4Levels[1],  kKvInt4Levels[2],  kKvInt4Levels[3],
    kKvInt4Levels[4],  kKvInt4Levels[5],  kKvInt4Levels[6],  kKvInt4Levels[7],
    kKvInt4Levels[8],  kKvInt4Levels[9],  kKvInt4Levels[10], kKvInt4Levels[11],
    kKvInt4Levels[12], kKvInt4Levels[13], kKvInt4Levels[14], kKvInt4Levels[15]};

// Squared errors of 8 lanes with scale s (1 / s in inv).
inline __m256 squared_errors8(__m256 x, __m256 s, __m256 inv) {
  const __m256 level =
      lookup16(_mm256_load_ps(kLevels), _mm256_load_ps(kLevels + 8), codes8(_mm256_mul_ps(x, inv)));
  const __m256 d = _mm256_sub_ps(x, _mm256_mul_ps(level, s));
  return _mm256_mul_ps(d, d);
}

// kv_int4::group_error: the 16 squared errors summed in its tree (lanes i + 8, then i + 4, i + 2,
// i + 1).
inline float group_error16(V16 x, float s, float inv) {
  const __m256 sv = _mm256_set1_ps(s), iv = _mm256_set1_ps(inv);
  const __m256 s8 = _mm256_add_ps(squared_errors8(x.lo, sv, iv), squared_errors8(x.hi, sv, iv));
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

// The codes of x / s (inv = 1 / s) as 16 bytes.
inline __m128i code_bytes16(V16 x, float inv) {
  const __m256 iv = _mm256_set1_ps(inv);
  const __m256i lo = codes8(_mm256_mul_ps(x.lo, iv)), hi = codes8(_mm256_mul_ps(x.hi, iv));
  const __m256i words = _mm256_packus_epi32(lo, hi);  // lanes 0-3, 8-11 | 4-7, 12-15
  const __m128i w = _mm_packus_epi16(_mm256_castsi256_si128(words),
                                     _mm256_extracti128_si256(words, 1));  // 0-3 8-11 4-7 12-15
  return _mm_shuffle_epi8(w, _mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 12, 13, 14, 15));
}

// One key group (x, 16 lanes) of slot `slot`: the searched sub-scale (kv_format.cc's
// search_key_sub) into `*sub`, the codes into the element rows' nibbles.
void store_key_group(V16 x, float unit, uint8_t* data, int64_t e0, int64_t page_size, int64_t slot,
                     int8_t* sub) {
  int8_t subs[kv_int4::kCandidates];
  kv_int4::key_candidates(signed_max16(x), unit, subs);
  int8_t best = 0;
  float best_error = INFINITY;
  auto consider = [&](int8_t candidate) {
    const float s = kv_int4::key_scale(candidate, unit);
    const float error = group_error16(x, s, kv_int4::inverse(s));
    if (error < best_error) best_error = error, best = candidate;
  };
  for (int8_t candidate : subs) consider(candidate);
  int8_t near[kv_int4::kNeighbours];
  kv_int4::neighbour_subs(best, near);
  for (int8_t candidate : near) consider(candidate);
  *sub = best;
  alignas(16) uint8_t codes[16];
  _mm_store_si128(reinterpret_cast<__m128i*>(codes),
                  code_bytes16(x, kv_int4::inverse(kv_int4::key_scale(best, unit))));
  // Element e of the slot is data element e * page_size + slot: one nibble per element row.
  const int shift = static_cast<int>(slot & 1) * 4;
  const uint8_t keep = static_cast<uint8_t>(0xf0 >> shift);
  uint8_t* byte = data + (e0 * page_size + slot) / 2;
  for (int u = 0; u < 16; ++u, byte += page_size / 2)
    *byte = static_cast<uint8_t>((*byte & keep) | (codes[u] << shift));
}

// 16 codes packed two a byte, the even element in the low nibble, into 8 bytes at out.
inline void put_value_codes16(V16 x, float inv, uint8_t* out) {
  const __m128i pairs = _mm_maddubs_epi16(code_bytes16(x, inv), _mm_set1_epi16(0x1001));
  _mm_storel_epi64(reinterpret_cast<__m128i*>(out), _mm_packus_epi16(pairs, pairs));
}

}  // namespace

void kv_store_int4_key(uint8_t* block, int64_t dim, int64_t page_size, int64_t slot,
                       const float* x) {
  __m256 amax = _mm256_setzero_ps();
  for (int64_t b0 = 0; b0 < dim; b0 += kKvGroup) {
    V16 lo, hi;
    rotate32(x + b0, &lo, &hi);
    amax = _mm256_max_ps(amax, _mm256_max_ps(_mm256_max_ps(abs8(lo.lo), abs8(lo.hi)),
                                             _mm256_max_ps(abs8(hi.lo), abs8(hi.hi))));
  }
  const uint16_t master = kv_int4::key_master(max8(amax));
  const float unit = kv_int4::key_unit(master);
  std::memcpy(block + kv_int4_masters_offset(dim, page_size) + 2 * slot, &master, 2);
  int8_t* subs = reinterpret_cast<int8_t*>(block + kv_int4_subs_offset(dim, page_size)) + slot;
  for (int64_t b0 = 0; b0 < dim; b0 += kKvGroup) {
    V16 lo, hi;
    rotate32(x + b0, &lo, &hi);
    const int64_t g = b0 / kKvInt4KeyGroup;
    store_key_group(lo, unit, block, b0, page_size, slot, subs + g * page_size);
    store_key_group(hi, unit, block, b0 + 16, page_size, slot, subs + (g + 1) * page_size);
  }
}

void kv_store_int4_value(uint8_t* block, int64_t dim, int64_t page_size, int64_t slot,
                         const float* x) {
  const int64_t group = kv_value_group(KvFormat::kInt4, dim);
  uint16_t* scales =
      reinterpret_cast<uint16_t*>(block + kv_data_bytes(KvFormat::kInt4, dim, page_size)) +
      slot * (dim / group);
  uint8_t* codes = block + slot * dim / 2;
  for (int64_t g0 = 0; g0 < dim; g0 += group) {
    // The group's rotated elements, 16 a pair of registers (2 or 4 pairs), and its first
    // largest element.
    V16 r[kKvInt4ValueGroup / 16];
    const int n = static_cast<int>(group / 16);
    for (int i = 0; i < n; i += 2) rotate32(x + g0 + 16 * i, &r[i], &r[i + 1]);
    float m = 0.0f;
    for (int i = 0; i < n; ++i) {
      const float mi = signed_max16(r[i]);
      if (std::fabs(mi) > std::fabs(m)) m = mi;
    }
    const uint16_t s16 = kv_int4::value_scale(m);
    scales[g0 / group] = s16;
    const float inv = kv_int4::inverse(fp16_to_f32(s16));
    for (int i = 0; i < n; ++i) put_value_codes16(r[i], inv, codes + (g0 + 16 * i) / 2);
  }
}

}  // namespace drift::kernels::avx2
