// The AVX-512 BF16 parts of the prefill attention for bf16 K/V, in the bf16 order of
// paged_attention.h: scores and weighted values by vdpbf16ps, 32 products an instruction where an
// fma gives 16. A file of its own so that -mavx512bf16 reaches no code that an AVX-512 CPU without
// BF16 runs: paged_attention_avx512.cc calls these only when the CPU has it.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "kernels/attention_avx512.h"
#include "kernels/paged_attention.h"
#include "kernels/paged_kv_avx2.h"

namespace drift::kernels::avx512::bf16 {
namespace {

// The dword of lane l of the result holds (a[l], b[l]): a in the low half, the even term of a
// vdpbf16ps pair.
inline __m512i interleave(__m256i a, __m256i b) {
  alignas(64) static constexpr uint16_t kIndex[32] = {0,  32, 1,  33, 2,  34, 3,  35, 4,  36, 5,
                                                      37, 6,  38, 7,  39, 8,  40, 9,  41, 10, 42,
                                                      11, 43, 12, 44, 13, 45, 14, 46, 15, 47};
  return _mm512_permutex2var_epi16(_mm512_castsi256_si512(a), _mm512_load_si512(kIndex),
                                   _mm512_castsi256_si512(b));
}

// Two rows of 16 fp32 weights, already bf16 operands, as one register of pairs.
inline __m512bh weight_pairs(__m512 even, __m512 odd) {
  alignas(64) static constexpr uint16_t kIndex[32] = {0,  16, 1,  17, 2,  18, 3,  19, 4,  20, 5,
                                                      21, 6,  22, 7,  23, 8,  24, 9,  25, 10, 26,
                                                      11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  const __m512i halves = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(odd, even));
  return reinterpret_cast<__m512bh>(_mm512_permutexvar_epi16(_mm512_load_si512(kIndex), halves));
}

inline __m512bh broadcast_pair(uint32_t pair) {
  return reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(pair)));
}

}  // namespace

__m512 score_rows(const uint32_t* query_pairs, int64_t D, const PagedKv& kv, int64_t base,
                  int64_t p1, __m512i first, __m512i last, float scale, float* scores) {
  const int64_t pairs = (D + 1) / 2, ps = kv.page_size;
  const __m512 scale_lanes = _mm512_set1_ps(scale);
  const __m512 neg_inf = _mm512_set1_ps(-INFINITY);
  __m512 m = neg_inf;
  for (int64_t pb = base; pb <= p1; pb += 16) {
    // Element e of the 16 positions at keys + e * ps (the transposed block).
    const uint16_t* keys = reinterpret_cast<const uint16_t*>(
                               paged_kv::block_of(kv.keys, kv.page_stride, kv.page_table, ps, pb)) +
                           pb % ps;
    __m512 acc[16];
    for (auto& a : acc) a = _mm512_setzero_ps();
    for (int64_t j = 0; j < pairs; ++j) {
      const __m256i even = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(keys + 2 * j * ps));
      const __m256i odd =
          2 * j + 1 < D
              ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(keys + (2 * j + 1) * ps))
              : _mm256_setzero_si256();
      const __m512bh k = reinterpret_cast<__m512bh>(interleave(even, odd));
#pragma GCC unroll 16
      for (int i = 0; i < 16; ++i)
        acc[i] = _mm512_dpbf16_ps(acc[i], k, broadcast_pair(query_pairs[i * pairs + j]));
    }
    transpose16(acc);  // acc[j]: position pb + j of every query
    for (int64_t j = 0; j < 16 && pb + j <= p1; ++j) {
      const __m512 s = _mm512_mask_mov_ps(neg_inf, visible(first, last, pb + j),
                                          _mm512_mul_ps(acc[j], scale_lanes));
      _mm512_store_ps(scores + (pb + j - base) * 16, s);
      m = _mm512_max_ps(m, s);
    }
  }
  return m;
}

void convert_value_pairs(const PagedKv& kv, int64_t DV, int64_t x0, int64_t p1, float* out) {
  paged_kv::ValueRowCursor row(kv, x0);
  for (int64_t x = x0; x <= p1; x += 2) {
    const uint16_t* even = reinterpret_cast<const uint16_t*>(row.block()) + row.slot() * DV;
    row.next();
    const uint16_t* odd =
        x + 1 <= p1 ? reinterpret_cast<const uint16_t*>(row.block()) + row.slot() * DV : nullptr;
    row.next();
    uint32_t* pair = reinterpret_cast<uint32_t*>(out + (x - x0) * DV);
    for (int64_t d = 0; d < DV; d += 16) {
      const int64_t width = std::min<int64_t>(16, DV - d);
      const __mmask16 m = static_cast<__mmask16>((1u << width) - 1);
      const __m256i a = _mm256_maskz_loadu_epi16(m, even + d);
      const __m256i b =
          odd != nullptr ? _mm256_maskz_loadu_epi16(m, odd + d) : _mm256_setzero_si256();
      _mm512_mask_storeu_epi32(pair + d, m, interleave(a, b));
    }
  }
}

void weigh_value_block(const float* weights, int64_t np, const float* pairs, int64_t DV,
                       float* oT) {
  const int64_t n_pairs = (np + 1) / 2;
  alignas(64) __m512bh w[16];
  for (int64_t t = 0; t < n_pairs; ++t)
    w[t] = weight_pairs(_mm512_load_ps(weights + 2 * t * 16),
                        _mm512_load_ps(weights + (2 * t + 1) * 16));
  const uint32_t* v = reinterpret_cast<const uint32_t*>(pairs);
  int64_t dc = 0;
  for (; dc + 8 <= DV; dc += 8) {
    __m512 acc[8];
    for (int u = 0; u < 8; ++u) acc[u] = _mm512_load_ps(oT + (dc + u) * 16);
    for (int64_t t = 0; t < n_pairs; ++t) {
      const uint32_t* row = v + 2 * t * DV + dc;
      for (int u = 0; u < 8; ++u) acc[u] = _mm512_dpbf16_ps(acc[u], w[t], broadcast_pair(row[u]));
    }
    for (int u = 0; u < 8; ++u) _mm512_store_ps(oT + (dc + u) * 16, acc[u]);
  }
  for (; dc < DV; ++dc) {
    __m512 acc = _mm512_load_ps(oT + dc * 16);
    for (int64_t t = 0; t < n_pairs; ++t)
      acc = _mm512_dpbf16_ps(acc, w[t], broadcast_pair(v[2 * t * DV + dc]));
    _mm512_store_ps(oT + dc * 16, acc);
  }
}

}  // namespace drift::kernels::avx512::bf16
