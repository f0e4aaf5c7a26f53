// AVX-512 int4 KV stores: kv_format.cc's scalar reference with a group of 16 elements in one
// register, the same operations in the same order (kv_int4.h), so the stored bytes are equal.
// The scalar key store spent ~10k cycles a K+V row of 64 on the key's scale search, most of
// int4's prefill cost; here a candidate's 16 errors are one pass of register operations.
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "kernels/dispatch.h"
#include "kernels/kv_int4.h"

namespace drift::kernels::avx512 {
namespace {

// One butterfly stage of distance h within each 16 lanes: lane i gets x[i] + x[i + h] if bit h
// of i is clear, x[i - h] - x[i] if set (kv_rotate's a + b and a - b).
template <int kH>
inline __m512 butterfly(__m512 x) {
  __m512 partner;
  if constexpr (kH == 1) partner = _mm512_permute_ps(x, 0xb1);
  if constexpr (kH == 2) partner = _mm512_permute_ps(x, 0x4e);
  if constexpr (kH == 4) partner = _mm512_shuffle_f32x4(x, x, 0xb1);
  if constexpr (kH == 8) partner = _mm512_shuffle_f32x4(x, x, 0x4e);
  constexpr __mmask16 kUpper = kH == 1 ? 0xaaaa : kH == 2 ? 0xcccc : kH == 4 ? 0xf0f0 : 0xff00;
  return _mm512_mask_sub_ps(_mm512_add_ps(x, partner), kUpper, partner, x);
}

// H x for the 32 elements at x (kv_rotate: butterflies of distance 1, 2, 4, 8, 16, then the
// normalisation), as elements [0, 16) and [16, 32).
inline void rotate32(const float* x, __m512* lo, __m512* hi) {
  __m512 a = _mm512_loadu_ps(x), b = _mm512_loadu_ps(x + 16);
  a = butterfly<8>(butterfly<4>(butterfly<2>(butterfly<1>(a))));
  b = butterfly<8>(butterfly<4>(butterfly<2>(butterfly<1>(b))));
  const __m512 norm = _mm512_set1_ps(1.0f / std::sqrt(static_cast<float>(kKvGroup)));
  *lo = _mm512_mul_ps(_mm512_add_ps(a, b), norm);
  *hi = _mm512_mul_ps(_mm512_sub_ps(a, b), norm);
}

inline __m512 abs16(__m512 x) {
  return _mm512_castsi512_ps(
      _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(0x7fffffff)));
}

// kv_int4::signed_max over the 16 lanes of x: the first lane of largest magnitude (0 when all
// are zero, as the scalar's starting value).
inline float signed_max16(__m512 x) {
  const __m512 ax = abs16(x);
  const float amax = _mm512_reduce_max_ps(ax);
  if (amax == 0.0f) return 0.0f;
  const int lane = __builtin_ctz(_mm512_cmp_ps_mask(ax, _mm512_set1_ps(amax), _CMP_EQ_OQ));
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, x);
  return lanes[lane];
}

// kv_int4::code_of on 16 lanes: the same four comparisons, the midpoints looked up per lane.
inline __m512i codes16(__m512 y) {
  const __m512 mid = _mm512_loadu_ps(kv_int4::kMidpoints.data());
  __m512i code = _mm512_maskz_mov_epi32(
      _mm512_cmp_ps_mask(y, _mm512_set1_ps(kv_int4::kMidpoints[7]), _CMP_GT_OQ),
      _mm512_set1_epi32(8));
  auto step = [&](int offset, int add) {
    const __m512 t = _mm512_permutexvar_ps(_mm512_add_epi32(code, _mm512_set1_epi32(offset)), mid);
    code = _mm512_mask_add_epi32(code, _mm512_cmp_ps_mask(y, t, _CMP_GT_OQ), code,
                                 _mm512_set1_epi32(add));
  };
  step(3, 4);
  step(1, 2);
  step(0, 1);
  return code;
}

inline __m512 levels16(__m512i code) {
  alignas(64) static const float kLevels[16] = {
      kKvInt4Levels[0],  kKvInt4Levels[1],  kKvInt4Levels[2],  kKvInt4Levels[3],
      kKvInt4Levels[4],  kKvInt4Levels[5],  kKvInt4Levels[6],  kKvInt4Levels[7],
      kKvInt4Levels[8],  kKvInt4Levels[9],  kKvInt4Levels[10], kKvInt4Levels[11],
      kKvInt4Levels[12], kKvInt4Levels[13], kKvInt4Levels[14], kKvInt4Levels[15]};
  return _mm512_permutexvar_ps(code, _mm512_load_ps(kLevels));
}

// kv_int4::group_error: the squared errors of x's 16 lanes with scale s (1 / s in inv), summed
// in its tree (lanes i + 8, then i + 4, i + 2, i + 1).
inline float group_error16(__m512 x, float s, float inv) {
  const __m512 sv = _mm512_set1_ps(s);
  const __m512 y = _mm512_mul_ps(x, _mm512_set1_ps(inv));
  const __m512 d = _mm512_sub_ps(x, _mm512_mul_ps(levels16(codes16(y)), sv));
  const __m512 d2 = _mm512_mul_ps(d, d);
  const __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(d2), _mm512_extractf32x8_ps(d2, 1));
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

// The codes of x / s (inv = 1 / s) as 16 bytes.
inline __m128i code_bytes16(__m512 x, float inv) {
  return _mm512_cvtepi32_epi8(codes16(_mm512_mul_ps(x, _mm512_set1_ps(inv))));
}

// One key group (x, 16 lanes) of slot `slot`: the searched sub-scale (kv_format.cc's
// search_key_sub) into `*sub`, the codes into the element rows' nibbles.
void store_key_group(__m512 x, float unit, uint8_t* data, int64_t e0, int64_t page_size,
                     int64_t slot, int8_t* sub) {
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
inline void put_value_codes16(__m512 x, float inv, uint8_t* out) {
  const __m128i pairs = _mm_maddubs_epi16(code_bytes16(x, inv), _mm_set1_epi16(0x1001));
  _mm_storel_epi64(reinterpret_cast<__m128i*>(out), _mm_packus_epi16(pairs, pairs));
}

}  // namespace

void kv_store_int4_key(uint8_t* block, int64_t dim, int64_t page_size, int64_t slot,
                       const float* x) {
  __m512 amax = _mm512_setzero_ps();
  for (int64_t b0 = 0; b0 < dim; b0 += kKvGroup) {
    __m512 lo, hi;
    rotate32(x + b0, &lo, &hi);
    amax = _mm512_max_ps(amax, _mm512_max_ps(abs16(lo), abs16(hi)));
  }
  const uint16_t master = kv_int4::key_master(_mm512_reduce_max_ps(amax));
  const float unit = kv_int4::key_unit(master);
  std::memcpy(block + kv_int4_masters_offset(dim, page_size) + 2 * slot, &master, 2);
  int8_t* subs = reinterpret_cast<int8_t*>(block + kv_int4_subs_offset(dim, page_size)) + slot;
  for (int64_t b0 = 0; b0 < dim; b0 += kKvGroup) {
    __m512 lo, hi;
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
    // The group's rotated elements, 16 a register (2 or 4), and its first largest element.
    __m512 r[kKvInt4ValueGroup / 16];
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

}  // namespace drift::kernels::avx512
