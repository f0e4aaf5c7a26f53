// The AVX-512 BF16 parts of the attention for bf16 K/V (prefill and decode), in the bf16 order
// of paged_attention.h: scores and weighted values by vdpbf16ps, 32 products an instruction where
// an fma gives 16. A file of its own so that -mavx512bf16 reaches no code that an AVX-512 CPU
// without BF16 runs: paged_attention_avx512.cc calls these only when the CPU has it.
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
  __m512 m = _mm512_set1_ps(-INFINITY);
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
    store_lane_scores(acc, pb, p1, first, last, scale_lanes, scores, base, &m);
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

// ---- Decode: the queries of one token (the heads of a group), all with the same range; the
// positions in the lanes, as attend_one_token in paged_attention_avx512.cc, with vdpbf16ps.

namespace drift::kernels::avx512::bf16 {
namespace {

// Scores of positions [pb, pb + 16 B) for N queries: element pairs of the transposed keys
// interleaved once per block, then one vdpbf16ps per query.
template <int N, int B>
inline void decode_score_blocks(const PagedKv& kv, const uint32_t* query_pairs, int64_t D,
                                int64_t pb, int64_t first, int64_t last, __m512 scale,
                                float* scores, int64_t span, int64_t base, __m512* m) {
  const int64_t ps = kv.page_size, pairs = (D + 1) / 2;
  const uint16_t* keys[B];
  for (int b = 0; b < B; ++b)
    keys[b] = reinterpret_cast<const uint16_t*>(
                  paged_kv::block_of(kv.keys, kv.page_stride, kv.page_table, ps, pb + 16 * b)) +
              (pb + 16 * b) % ps;
  __m512 acc[B][N];
  for (int b = 0; b < B; ++b)
    for (int i = 0; i < N; ++i) acc[b][i] = _mm512_setzero_ps();
  for (int64_t j = 0; j < pairs; ++j) {
    __m512bh k[B];
    for (int b = 0; b < B; ++b) {
      const __m256i even =
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(keys[b] + 2 * j * ps));
      const __m256i odd =
          2 * j + 1 < D
              ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(keys[b] + (2 * j + 1) * ps))
              : _mm256_setzero_si256();
      k[b] = reinterpret_cast<__m512bh>(interleave(even, odd));
    }
    for (int i = 0; i < N; ++i) {
      const __m512bh q = broadcast_pair(query_pairs[i * pairs + j]);
      for (int b = 0; b < B; ++b) acc[b][i] = _mm512_dpbf16_ps(acc[b][i], k[b], q);
    }
  }
  store_position_scores(acc, pb, first, last, scale, scores, span, base, m);
}

template <int N>
void decode_scores_n(const PagedKv& kv, const uint32_t* query_pairs, int64_t D, int64_t first,
                     int64_t last, float scale, float* scores, int64_t span, int64_t base,
                     int64_t p_begin, int64_t p_end, float* max_lanes) {
  const int64_t end = std::min(p_end, last + 1);  // blocks of 16 start before it
  const __m512 scale_lanes = _mm512_set1_ps(scale);
  constexpr int B = N == 1 ? 8 : N == 2 ? 6 : N <= 4 ? 4 : 2;  // as the fma version
  __m512 m[N];
  for (int i = 0; i < N; ++i) m[i] = _mm512_set1_ps(-INFINITY);
  if (p_begin < end) {
    paged_kv::BlockPrefetcher ahead(
        kv.keys, kv, kv_key_block_bytes(KvFormat::kBF16, D, kv.page_size), (end - 1) / kv.page_size,
        paged_kv::kPrefetchPositions / kv.page_size);
    int64_t pb = p_begin;
    for (; pb + 16 * (B - 1) < end; pb += 16 * B) {
      ahead.at(pb / kv.page_size);
      decode_score_blocks<N, B>(kv, query_pairs, D, pb, first, last, scale_lanes, scores, span,
                                base, m);
    }
    for (; pb < end; pb += 16)
      decode_score_blocks<N, 1>(kv, query_pairs, D, pb, first, last, scale_lanes, scores, span,
                                base, m);
  }
  for (int i = 0; i < N; ++i) _mm512_storeu_ps(max_lanes + 16 * i, m[i]);
}

// out[i][d0 .. d0 + width) for Q queries, width <= 32 H: rows p and p + 1 are paired by
// vpunpcklwd / vpunpckhwd, 32 dimensions a register each (one instruction per 16 pairs where a
// cross-lane permute cost several), which leaves the dimensions of the two halves interleaved by
// groups of 4; the stores put them back in order. A position whose pair partner is out of
// [first, last] goes alone with a zero partner (its row may not exist: a window's freed page, a
// position not written yet).
template <int Q, int H>
inline void decode_value_rows(const PagedKv& kv, int64_t DV, int64_t d0, int64_t width,
                              const float* weights, int64_t span, int64_t base, int64_t first,
                              int64_t last, float* const* out, const double* sum) {
  __mmask32 mk[H];
  for (int h = 0; h < H; ++h) {
    const int64_t n = std::min<int64_t>(32, width - 32 * h);
    mk[h] = n == 32 ? ~__mmask32{0} : static_cast<__mmask32>((1u << n) - 1);
  }
  __m512 lo[Q][H], hi[Q][H];  // the dimension pairs of vpunpcklwd and of vpunpckhwd
  for (int i = 0; i < Q; ++i)
    for (int h = 0; h < H; ++h) lo[i][h] = hi[i][h] = _mm512_setzero_ps();
  const float* w = weights - base;  // w[i * span + p]: query i's weight of position p
  auto add = [&](const uint16_t* even, const uint16_t* odd, const uint32_t* pair_of) {
    for (int h = 0; h < H; ++h) {
      const __m512i a = even != nullptr ? _mm512_maskz_loadu_epi16(mk[h], even + d0 + 32 * h)
                                        : _mm512_setzero_si512();
      const __m512i b = odd != nullptr ? _mm512_maskz_loadu_epi16(mk[h], odd + d0 + 32 * h)
                                       : _mm512_setzero_si512();
      const __m512bh vl = reinterpret_cast<__m512bh>(_mm512_unpacklo_epi16(a, b));
      const __m512bh vh = reinterpret_cast<__m512bh>(_mm512_unpackhi_epi16(a, b));
      for (int i = 0; i < Q; ++i) {
        const __m512bh wp = broadcast_pair(pair_of[i]);
        lo[i][h] = _mm512_dpbf16_ps(lo[i][h], vl, wp);
        hi[i][h] = _mm512_dpbf16_ps(hi[i][h], vh, wp);
      }
    }
  };
  paged_kv::ValueRowCursor row(kv, first);
  paged_kv::BlockPrefetcher ahead = paged_kv::BlockPrefetcher::values_of(
      kv, KvFormat::kBF16, DV, d0, width, last / kv.page_size,
      paged_kv::kPrefetchPositions / kv.page_size);
  auto row_data = [&]() {
    if (row.slot() == 0) ahead.at(row.page());
    const uint16_t* data = reinterpret_cast<const uint16_t*>(row.block()) + row.slot() * DV;
    row.next();
    return data;
  };
  auto bits_of = [&](int i, int64_t p) {
    uint32_t bits;
    __builtin_memcpy(&bits, w + i * span + p, 4);
    return bits;
  };
  uint32_t pair_of[Q];
  ahead.at(row.page());
  int64_t p = first;
  if (p % 2 == 1) {  // p - 1 unseen
    for (int i = 0; i < Q; ++i) pair_of[i] = bits_of(i, p) & 0xffff0000u;
    add(nullptr, row_data(), pair_of);
    ++p;
  }
  for (; p < last; p += 2) {
    for (int i = 0; i < Q; ++i)
      pair_of[i] = bits_of(i, p) >> 16 | (bits_of(i, p + 1) & 0xffff0000u);
    const uint16_t* even = row_data();
    add(even, row_data(), pair_of);
  }
  if (p == last) {  // p + 1 unseen
    for (int i = 0; i < Q; ++i) pair_of[i] = bits_of(i, p) >> 16;
    add(row_data(), nullptr, pair_of);
  }
  // Lane group k of lo holds dimensions 8k .. 8k + 3 of its 32, of hi 8k + 4 .. 8k + 7.
  const __m512i first16 = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
  const __m512i second16 =
      _mm512_setr_epi32(8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31);
  for (int i = 0; i < Q; ++i) {
    const __m512 inv = _mm512_set1_ps(static_cast<float>(1.0 / sum[i]));
    for (int h = 0; h < H; ++h) {
      const int64_t n = std::min<int64_t>(32, width - 32 * h);
      const __m512 a = _mm512_permutex2var_ps(lo[i][h], first16, hi[i][h]);
      const __m512 b = _mm512_permutex2var_ps(lo[i][h], second16, hi[i][h]);
      float* o = out[i] + d0 + 32 * h;
      _mm512_mask_storeu_ps(o, static_cast<__mmask16>((1u << std::min<int64_t>(16, n)) - 1),
                            _mm512_mul_ps(a, inv));
      if (n > 16)
        _mm512_mask_storeu_ps(o + 16, static_cast<__mmask16>((1u << (n - 16)) - 1),
                              _mm512_mul_ps(b, inv));
    }
  }
}

template <int Q>
void decode_values_q(const PagedKv& kv, int64_t DV, const float* weights, int64_t span,
                     int64_t base, int64_t first, int64_t last, int64_t d_begin, int64_t d_end,
                     float* const* out, const double* sum) {
  for (int64_t d0 = d_begin; d0 < d_end; d0 += 64) {
    const int64_t width = std::min<int64_t>(64, d_end - d0);
    if (width > 32) {
      decode_value_rows<Q, 2>(kv, DV, d0, width, weights, span, base, first, last, out, sum);
    } else {
      decode_value_rows<Q, 1>(kv, DV, d0, width, weights, span, base, first, last, out, sum);
    }
  }
}

}  // namespace

void decode_scores(int n, const PagedKv& kv, const uint32_t* query_pairs, int64_t D, int64_t first,
                   int64_t last, float scale, float* scores, int64_t span, int64_t base,
                   int64_t p_begin, int64_t p_end, float* max_lanes) {
  switch (n) {
    case 1:
      return decode_scores_n<1>(kv, query_pairs, D, first, last, scale, scores, span, base, p_begin,
                                p_end, max_lanes);
    case 2:
      return decode_scores_n<2>(kv, query_pairs, D, first, last, scale, scores, span, base, p_begin,
                                p_end, max_lanes);
    case 3:
      return decode_scores_n<3>(kv, query_pairs, D, first, last, scale, scores, span, base, p_begin,
                                p_end, max_lanes);
    case 4:
      return decode_scores_n<4>(kv, query_pairs, D, first, last, scale, scores, span, base, p_begin,
                                p_end, max_lanes);
    case 5:
      return decode_scores_n<5>(kv, query_pairs, D, first, last, scale, scores, span, base, p_begin,
                                p_end, max_lanes);
    case 6:
      return decode_scores_n<6>(kv, query_pairs, D, first, last, scale, scores, span, base, p_begin,
                                p_end, max_lanes);
    case 7:
      return decode_scores_n<7>(kv, query_pairs, D, first, last, scale, scores, span, base, p_begin,
                                p_end, max_lanes);
    default:
      return decode_scores_n<8>(kv, query_pairs, D, first, last, scale, scores, span, base, p_begin,
                                p_end, max_lanes);
  }
}

void decode_values(int q, const PagedKv& kv, int64_t DV, const float* weights, int64_t span,
                   int64_t base, int64_t first, int64_t last, int64_t d_begin, int64_t d_end,
                   float* const* out, const double* sum) {
  switch (q) {
    case 1:
      return decode_values_q<1>(kv, DV, weights, span, base, first, last, d_begin, d_end, out, sum);
    case 2:
      return decode_values_q<2>(kv, DV, weights, span, base, first, last, d_begin, d_end, out, sum);
    case 3:
      return decode_values_q<3>(kv, DV, weights, span, base, first, last, d_begin, d_end, out, sum);
    default:
      return decode_values_q<4>(kv, DV, weights, span, base, first, last, d_begin, d_end, out, sum);
  }
}

}  // namespace drift::kernels::avx512::bf16
