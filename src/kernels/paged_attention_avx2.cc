// AVX2 paged attention: the canonical order of paged_attention.h in two shapes.
//
// Query lanes (queries of several tokens, prefill): the block's queries sit in the 8 lanes of a
// register; keys and values are converted (dequantized, paged_kv_avx2.h) once per block of
// positions and each element is broadcast against all queries, so one fma advances 8 queries'
// chains. A lane whose query does not see a position gets score -inf (weight exactly 0) and leaves
// its output chain untouched, which is what visiting only its visible positions would do.
//
// Position lanes (queries of one token, decode): 8 consecutive positions of the transposed keys
// sit in the lanes, so each query element is broadcast against 8 keys; the values are read by
// rows, 8 output dimensions per fma, over the visible positions in increasing order.
//
// Both require page_size % 8 == 0, so that 8 positions from a multiple of 8 lie in one page.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "kernels/attention_metric.h"
#include "kernels/attention_sinks.h"
#include "kernels/decode_dispatch.h"
#include "kernels/decode_steps.h"
#include "kernels/fp16.h"
#include "kernels/paged_attention.h"
#include "kernels/paged_kv_avx2.h"
#include "kernels/simd_avx2.h"

namespace drift::kernels::avx2 {
namespace {

constexpr int kLanes = 8;
constexpr int64_t kValueBlock = 32;  // value rows converted at once (query lanes)

int64_t round8(int64_t n) { return (n + 7) / 8 * 8; }

// Converts value rows [p, p + n) to fp32 rows of `dim` floats.
template <KvFormat F>
void convert_value_rows(const PagedKv& kv, int64_t dim, int64_t p, int64_t n, float* out) {
  paged_kv::ValueRowCursor row(kv, p);
  for (int64_t j = 0; j < n; ++j, row.next()) {
    for (int64_t e = 0; e < dim; e += 8) {
      const __m256 v = paged_kv::values8<F>(row.block(), dim, kv.page_size, row.slot(), e,
                                            std::min<int64_t>(8, dim - e));
      if (dim - e >= 8) {
        _mm256_storeu_ps(out + j * dim + e, v);
      } else {
        alignas(32) float tmp[8];
        _mm256_store_ps(tmp, v);
        for (int64_t i = 0; i < dim - e; ++i) out[j * dim + e + i] = tmp[i];
      }
    }
  }
}

// In place, an 8x8 transpose: lane j of a[i] becomes lane i of a[j].
inline void transpose8(__m256 (&a)[8]) {
  __m256 t[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(a[i], a[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(a[i], a[i + 1]);
  }
  __m256 u[8];
  for (int i = 0; i < 8; i += 4) {
    u[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int i = 0; i < 4; ++i) {
    a[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
    a[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
  }
}

// Lanes that see position p: first <= p <= last.
__m256 visible(__m256i first, __m256i last, int64_t p) {
  const __m256i pv = _mm256_set1_epi32(static_cast<int32_t>(p));
  const __m256i before = _mm256_cmpgt_epi32(first, pv);
  const __m256i after = _mm256_cmpgt_epi32(pv, last);
  return _mm256_castsi256_ps(
      _mm256_xor_si256(_mm256_or_si256(before, after), _mm256_set1_epi32(-1)));
}

// Positions [p, p + 8) inside [first, last], as lanes.
__m256 positions_inside(int64_t p, int64_t first, int64_t last) {
  const __m256i pv = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int32_t>(p)),
                                      _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  const __m256i before = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int32_t>(first)), pv);
  const __m256i after = _mm256_cmpgt_epi32(pv, _mm256_set1_epi32(static_cast<int32_t>(last)));
  return _mm256_castsi256_ps(
      _mm256_xor_si256(_mm256_or_si256(before, after), _mm256_set1_epi32(-1)));
}

float max8(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

// ---- Position lanes: every query of the block has the same range [first, last].

// Scores of positions [pb, pb + 8 B) for N queries, B blocks of 8 at once so that N x B
// independent fma chains cover the fma latency; every accumulator in a register.
template <KvFormat F, int N, int B>
inline void score_blocks(const PagedKv& kv, const AttentionQueries& queries, int64_t D, int64_t pb,
                         int64_t first, int64_t last, __m256 scale, float* scores, int64_t span,
                         int64_t base, __m256* m) {
  const int64_t ps = kv.page_size, group = paged_kv::group_of<F>(D);
  const uint8_t* block[B];
  int64_t slot[B];
  for (int b = 0; b < B; ++b) {
    block[b] = paged_kv::block_of(kv.keys, kv.page_stride, kv.page_table, ps, pb + 8 * b);
    slot[b] = (pb + 8 * b) % ps;
  }
  __m256 acc[B][N];
  for (int b = 0; b < B; ++b)
    for (int i = 0; i < N; ++i) acc[b][i] = _mm256_setzero_ps();
  for (int64_t g0 = 0; g0 < D; g0 += group) {
    __m256 group_scale[B];
    for (int b = 0; b < B; ++b)
      group_scale[b] = paged_kv::key_scales8<F>(block[b], D, ps, slot[b], g0 / group);
    for (int64_t t = g0; t < g0 + group; ++t) {
      const int64_t e = attends_in_bf16(F) ? pair_swapped(t, D) : t;
      __m256 k[B];
      for (int b = 0; b < B; ++b)
        k[b] = paged_kv::keys8<F>(block[b], ps, slot[b], e, group_scale[b]);
      for (int i = 0; i < N; ++i) {
        const __m256 q = _mm256_set1_ps(queries.q[i][e]);
        for (int b = 0; b < B; ++b) acc[b][i] = _mm256_fmadd_ps(q, k[b], acc[b][i]);
      }
    }
  }
  const __m256 neg_inf = _mm256_set1_ps(-INFINITY);
  for (int b = 0; b < B; ++b) {
    const __m256 inside = positions_inside(pb + 8 * b, first, last);
    for (int i = 0; i < N; ++i) {
      const __m256 s = _mm256_blendv_ps(neg_inf, _mm256_mul_ps(acc[b][i], scale), inside);
      _mm256_storeu_ps(scores + i * span + (pb + 8 * b - base), s);
      m[i] = _mm256_max_ps(m[i], s);
    }
  }
}

// Value rows a decode pass takes through all its dimension chunks before the next rows: a block
// of them (bf16: 64 rows x 512 B for a 256-dim head) stays in L1/L2 between the chunks, while the
// chunks' accumulators live in registers for one block and in memory between blocks. A block ends
// at an odd position (a multiple of 64, minus one), so that the bf16 order's pairs (2j + 1 before
// 2j) never straddle two blocks.
constexpr int64_t kValueRowBlock = 64;

// acc[i][d0 .. d0 + 8 C) += the weighted value rows of [p0, p1] for Q queries whose weights start
// at `weights` (a row of `span` per query), each chunk's fma chain in increasing position (in the
// bf16 order's pairs). Per row: Q weight broadcasts, then each chunk is loaded once and used by
// every query, so the Q x C accumulators, Q weights and one value register fit the 16 ymm
// registers (Q = 3, C = 4 is 16).
template <KvFormat F, int Q, int C, bool kFull>
[[gnu::always_inline]] inline void add_value_row(const uint8_t* block, int64_t slot, int64_t DV,
                                                 int64_t page_size, int64_t d0,
                                                 const int64_t (&width)[C], const float* weights,
                                                 int64_t span, int64_t column, __m256 (&o)[Q][C]) {
  __m256 w[Q];
#pragma GCC unroll 8
  for (int i = 0; i < Q; ++i) w[i] = _mm256_set1_ps(weights[i * span + column]);
#pragma GCC unroll 8
  for (int c = 0; c < C; ++c) {
    const __m256 v =
        paged_kv::values8<F>(block, DV, page_size, slot, d0 + 8 * c, kFull ? int64_t{8} : width[c]);
#pragma GCC unroll 8
    for (int i = 0; i < Q; ++i) o[i][c] = _mm256_fmadd_ps(w[i], v, o[i][c]);
  }
}

template <KvFormat F, int Q, int C, bool kFull>
inline void add_value_rows(const PagedKv& kv, paged_kv::BlockPrefetcher& ahead, int64_t DV,
                           int64_t d0, const float* weights, int64_t span, int64_t base, int64_t p0,
                           int64_t p1, float* acc) {
  const int64_t row = round8(DV);  // acc's floats per query
  int64_t width[C];
  for (int c = 0; c < C; ++c) width[c] = kFull ? 8 : std::min<int64_t>(8, DV - d0 - 8 * c);
  __m256 o[Q][C];
#pragma GCC unroll 8
  for (int i = 0; i < Q; ++i)
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) o[i][c] = _mm256_loadu_ps(acc + i * row + d0 + 8 * c);
  // Page by page (the blocks prefetched as each is reached), rows in increasing position, or in
  // the bf16 order's pairs (2j + 1 before 2j; a block starts even and ends odd unless cut by
  // [first, last], whose ends may be alone).
  const int64_t ps = kv.page_size;
  for (int64_t page_start = p0 / ps * ps; page_start <= p1; page_start += ps) {
    const int64_t page = page_start / ps;
    ahead.at(page);
    const uint8_t* block = kv.values + kv.page_table[page] * kv.page_stride;
    const int64_t s0 = std::max(p0, page_start) - page_start;
    const int64_t s1 = std::min(p1, page_start + ps - 1) - page_start;
    for (int64_t slot = s0; slot <= s1; ++slot) {
      const int64_t p = page_start + slot;
      if (attends_in_bf16(F) && p % 2 == 0 && p < p1) {  // ps is even: p + 1 is in this page
        add_value_row<F, Q, C, kFull>(block, slot + 1, DV, ps, d0, width, weights, span,
                                      p + 1 - base, o);
        add_value_row<F, Q, C, kFull>(block, slot, DV, ps, d0, width, weights, span, p - base, o);
        ++slot;
        continue;
      }
      add_value_row<F, Q, C, kFull>(block, slot, DV, ps, d0, width, weights, span, p - base, o);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < Q; ++i)
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) _mm256_storeu_ps(acc + i * row + d0 + 8 * c, o[i][c]);
}

// out[i][d] for d in [d_begin, d_end) = (weighted value rows over [first, last])[d] *
// float(1 / sum[i]) for Q <= 4 queries, through acc: [Q][round8(DV)] floats of scratch.
template <KvFormat F, int Q>
inline void value_passes(const PagedKv& kv, int64_t DV, const float* weights, int64_t span,
                         int64_t base, int64_t first, int64_t last, int64_t d_begin, int64_t d_end,
                         float* const* out, const double* sum, float* acc) {
  constexpr int C = Q == 1 ? 8 : Q == 2 ? 5 : Q == 3 ? 4 : 2;  // Q x C + Q + 1 <= 16
  const int64_t row = round8(DV);
  for (int i = 0; i < Q; ++i)
    for (int64_t d = d_begin; d < round8(d_end); ++d) acc[i * row + d] = 0.0f;
  paged_kv::BlockPrefetcher ahead = paged_kv::BlockPrefetcher::values_of(
      kv, F, DV, d_begin, d_end - d_begin, last / kv.page_size,
      paged_kv::kPrefetchPositions / kv.page_size);
  for (int64_t p0 = first; p0 <= last;) {
    const int64_t p1 = std::min(last, (p0 / kValueRowBlock + 1) * kValueRowBlock - 1);
    int64_t d0 = d_begin;
    for (; d0 + 8 * C <= d_end; d0 += 8 * C)
      add_value_rows<F, Q, C, true>(kv, ahead, DV, d0, weights, span, base, p0, p1, acc);
    for (; d0 + 8 <= d_end; d0 += 8)
      add_value_rows<F, Q, 1, true>(kv, ahead, DV, d0, weights, span, base, p0, p1, acc);
    if (d0 < d_end)
      add_value_rows<F, Q, 1, false>(kv, ahead, DV, d0, weights, span, base, p0, p1, acc);
    p0 = p1 + 1;
  }
  for (int i = 0; i < Q; ++i) {
    const float inv = static_cast<float>(1.0 / sum[i]);
    for (int64_t d = d_begin; d < d_end; ++d) out[i][d] = acc[i * row + d] * inv;
  }
}

// ---- A token's queries over one range in three steps (paged_attention.h, "Decode attention in
// parts"): scores of a range of positions, weights of a range, values of a range of dimensions.

// Scores of the positions of [p_begin, p_end) within [first, last] (p_begin - base a multiple of
// 8) into scores (a row of `span` per query, from `base`), and each query's max of them.
template <KvFormat F, int N>
void one_token_scores(const AttentionShape& shape, const PagedKv& kv,
                      const AttentionQueries& queries, float* scores, int64_t span, int64_t base,
                      int64_t p_begin, int64_t p_end, float* max_out) {
  const int64_t D = shape.head_dim;
  const int64_t first = queries.first[0], last = queries.last[0];
  const int64_t end = std::min(p_end, last + 1);  // blocks of 8 start before it
  const __m256 scale = _mm256_set1_ps(shape.scale);
  constexpr int B = N == 1 ? 8 : N == 2 ? 4 : N <= 4 ? 2 : 1;  // N x B <= 8 chains
  __m256 m[N];
  for (int i = 0; i < N; ++i) m[i] = _mm256_set1_ps(-INFINITY);
  if (p_begin < end) {
    paged_kv::BlockPrefetcher ahead(kv.keys, kv, kv_key_block_bytes(F, D, kv.page_size),
                                    (end - 1) / kv.page_size,
                                    paged_kv::kPrefetchPositions / kv.page_size);
    int64_t pb = p_begin;
    for (; pb + 8 * (B - 1) < end; pb += 8 * B) {
      ahead.at(pb / kv.page_size);
      score_blocks<F, N, B>(kv, queries, D, pb, first, last, scale, scores, span, base, m);
    }
    for (; pb < end; pb += 8)
      score_blocks<F, N, 1>(kv, queries, D, pb, first, last, scale, scores, span, base, m);
  }
  for (int i = 0; i < N; ++i) max_out[i] = max8(m[i]);
}

// Weights of columns [j_begin, j_end) of the scores (multiples of 8): outside the range
// exp(-inf) = 0. m_sink: each query's softmax max, its sink included.
template <KvFormat F, int N>
void one_token_weights(float* scores, int64_t span, int64_t j_begin, int64_t j_end,
                       const float* m_sink) {
  __m256 mi[N];
  for (int i = 0; i < N; ++i) mi[i] = _mm256_set1_ps(m_sink[i]);
  for (int64_t j = j_begin; j < j_end; j += 8)
    for (int i = 0; i < N; ++i) {
      float* s = scores + i * span + j;
      __m256 w = exp8(_mm256_sub_ps(_mm256_loadu_ps(s), mi[i]));
      if constexpr (attends_in_bf16(F)) w = bf16_operand8(w);
      _mm256_storeu_ps(s, w);
    }
}

// out[i][d] for d in [d_begin, d_end), up to 4 queries per pass; acc: [4][round8(DV)] floats.
template <KvFormat F, int N>
void one_token_values(const AttentionShape& shape, const PagedKv& kv,
                      const AttentionQueries& queries, const float* scores, int64_t span,
                      int64_t base, int64_t d_begin, int64_t d_end, const double* sum, float* acc) {
  const int64_t DV = shape.head_dim_v;
  const int64_t first = queries.first[0], last = queries.last[0];
  constexpr int Q1 = N <= 4 ? N : 4;
  value_passes<F, Q1>(kv, DV, scores, span, base, first, last, d_begin, d_end, queries.out, sum,
                      acc);
  if constexpr (N > Q1)
    value_passes<F, N - Q1>(kv, DV, scores + Q1 * span, span, base, first, last, d_begin, d_end,
                            queries.out + Q1, sum + Q1, acc);
}

// N queries of one token with the same range [first, last]; N, the blocks per pass and the value
// chunks are template parameters so that the accumulators stay in registers (with run-time
// counts the compiler kept them on the stack: 3x slower with the K/V in cache).
template <KvFormat F, int N>
void attend_one_token(const AttentionShape& shape, const PagedKv& kv,
                      const AttentionQueries& queries, float* scratch) {
  const int64_t first = queries.first[0], last = queries.last[0];
  const int64_t base = first / 8 * 8;
  const int64_t span = round8(last + 1 - base);
  float* scores = scratch;  // [N][span]
  float max_scores[N];
  one_token_scores<F, N>(shape, kv, queries, scores, span, base, base, base + span, max_scores);
  float m_sink[N];  // the softmax max of each query, its sink included
  for (int i = 0; i < N; ++i) m_sink[i] = max_with_sink(max_scores[i], query_sink(queries, i));
  one_token_weights<F, N>(scores, span, 0, span, m_sink);
  // The weights' double sums in increasing position, the queries' add chains interleaved.
  double sum[N] = {};
  for (int64_t j = 0; j < span; ++j)
    for (int i = 0; i < N; ++i) sum[i] += static_cast<double>(scores[i * span + j]);
  for (int i = 0; i < N; ++i) sum[i] += sink_weight(query_sink(queries, i), m_sink[i]);
  float* acc = scores + N * span;  // value accumulators, after the scores
  one_token_values<F, N>(shape, kv, queries, scores, span, base, 0, shape.head_dim_v, sum, acc);
  for (int i = 0; i < N; ++i)
    if (asks_metric(queries.metric, queries.metric_lanes, i))
      add_squared_weights(scores + i * span, 1, base, first, last, static_cast<float>(1.0 / sum[i]),
                          queries.metric);
}

// The instance for the block's group size (1 to 8).
template <KvFormat F>
void attend_one_token_group(const AttentionShape& shape, const PagedKv& kv,
                            const AttentionQueries& queries, float* scratch) {
  switch (queries.n) {
    case 1:
      return attend_one_token<F, 1>(shape, kv, queries, scratch);
    case 2:
      return attend_one_token<F, 2>(shape, kv, queries, scratch);
    case 3:
      return attend_one_token<F, 3>(shape, kv, queries, scratch);
    case 4:
      return attend_one_token<F, 4>(shape, kv, queries, scratch);
    case 5:
      return attend_one_token<F, 5>(shape, kv, queries, scratch);
    case 6:
      return attend_one_token<F, 6>(shape, kv, queries, scratch);
    case 7:
      return attend_one_token<F, 7>(shape, kv, queries, scratch);
    default:
      return attend_one_token<F, 8>(shape, kv, queries, scratch);
  }
}

// ---- Query lanes.

template <KvFormat F>
void attend_query_lanes(const AttentionShape& shape, const PagedKv& kv,
                        const AttentionQueries& queries, float* scratch, ValueRowCache* cache) {
  const int64_t D = shape.head_dim, DV = shape.head_dim_v, n = queries.n;
  // Inactive lanes copy lane 0's range and have q = 0; their results are never stored.
  alignas(32) int32_t first_a[kLanes], last_a[kLanes];
  int64_t p0 = queries.first[0], p1 = queries.last[0];
  int64_t all_from = queries.first[0], all_to = queries.last[0];  // every lane sees these
  for (int i = 0; i < kLanes; ++i) {
    const int64_t f = i < n ? queries.first[i] : queries.first[0];
    const int64_t l = i < n ? queries.last[i] : queries.last[0];
    first_a[i] = static_cast<int32_t>(f);
    last_a[i] = static_cast<int32_t>(l);
    p0 = std::min(p0, f);
    p1 = std::max(p1, l);
    all_from = std::max(all_from, f);
    all_to = std::min(all_to, l);
  }
  const __m256i first = _mm256_load_si256(reinterpret_cast<const __m256i*>(first_a));
  const __m256i last = _mm256_load_si256(reinterpret_cast<const __m256i*>(last_a));
  const int64_t base = p0 / 8 * 8;

  float* qT = scratch;                           // [D][8]
  float* scores = qT + round8(D * kLanes);       // [p1 - base + 1][8]
  float* kf = scores + round8(p1 + 8) * kLanes;  // [D][8 positions]
  float* vf = kf + round8(8 * D);
  float* oT = vf + round8(kValueBlock * DV);  // [DV][8]
  // The queries transposed, 8 elements at a time (element by element, the copy and the output's
  // below were ~10% of this path's prefill attention).
  for (int64_t e0 = 0; e0 < D; e0 += 8) {
    const int64_t width = std::min<int64_t>(8, D - e0);
    __m256 rows[8];
    for (int i = 0; i < kLanes; ++i) {
      if (i < n && width == 8) {
        rows[i] = _mm256_loadu_ps(queries.q[i] + e0);
      } else {
        alignas(32) float tmp[8] = {};
        for (int64_t u = 0; i < n && u < width; ++u) tmp[u] = queries.q[i][e0 + u];
        rows[i] = _mm256_load_ps(tmp);
      }
    }
    transpose8(rows);  // rows[u]: element e0 + u of every lane
    for (int64_t u = 0; u < width; ++u) _mm256_store_ps(qT + (e0 + u) * kLanes, rows[u]);
  }

  // Scores, -inf where a lane does not see the position; the running max of each lane.
  const __m256 scale = _mm256_set1_ps(shape.scale);
  const __m256 neg_inf = _mm256_set1_ps(-INFINITY);
  __m256 m = neg_inf;
  for (int64_t pb = base; pb <= p1; pb += 8) {
    paged_kv::for_each_key_row8<F>(kv, D, pb,
                                   [&](int64_t e, __m256 k) { _mm256_store_ps(kf + e * 8, k); });
    __m256 acc[8];
    for (auto& a : acc) a = _mm256_setzero_ps();
    for (int64_t t = 0; t < D; ++t) {
      const int64_t e = attends_in_bf16(F) ? pair_swapped(t, D) : t;
      const __m256 qe = _mm256_load_ps(qT + e * kLanes);
      for (int j = 0; j < 8; ++j)
        acc[j] = _mm256_fmadd_ps(qe, _mm256_broadcast_ss(kf + e * 8 + j), acc[j]);
    }
    for (int64_t j = 0; j < 8 && pb + j <= p1; ++j) {
      const __m256 s =
          _mm256_blendv_ps(neg_inf, _mm256_mul_ps(acc[j], scale), visible(first, last, pb + j));
      _mm256_store_ps(scores + (pb + j - base) * kLanes, s);
      m = _mm256_max_ps(m, s);
    }
  }
  alignas(64) float sinks[kLanes];
  sink_lanes(queries, kLanes, sinks);
  const __m256 sink = _mm256_load_ps(sinks);
  m = _mm256_max_ps(m, sink);

  // Weights and their double sums in increasing position (an unseen position adds +0).
  __m256d sum_lo = _mm256_setzero_pd(), sum_hi = _mm256_setzero_pd();
  for (int64_t p = p0; p <= p1; ++p) {
    float* s = scores + (p - base) * kLanes;
    __m256 w = exp8(_mm256_sub_ps(_mm256_load_ps(s), m));
    if constexpr (attends_in_bf16(F)) w = bf16_operand8(w);
    _mm256_store_ps(s, w);
    sum_lo = _mm256_add_pd(sum_lo, _mm256_cvtps_pd(_mm256_castps256_ps128(w)));
    sum_hi = _mm256_add_pd(sum_hi, _mm256_cvtps_pd(_mm256_extractf128_ps(w, 1)));
  }
  {  // the sinks' weights, after the positions'
    const __m256 ws = exp8(_mm256_sub_ps(sink, m));
    sum_lo = _mm256_add_pd(sum_lo, _mm256_cvtps_pd(_mm256_castps256_ps128(ws)));
    sum_hi = _mm256_add_pd(sum_hi, _mm256_cvtps_pd(_mm256_extractf128_ps(ws, 1)));
  }

  // Weighted values, 8 output dimensions at a time over blocks of value rows.
  for (int64_t d = 0; d < DV * kLanes; ++d) oT[d] = 0.0f;
  // Row p of the values at rows + (p - v0) * DV, or per block in vf. In the bf16 order blocks
  // start at an even position (p0 - 1 is seen by no lane) so that no pair straddles two.
  const int64_t v0 = attends_in_bf16(F) ? p0 & ~int64_t{1} : p0;
  const float* rows = cache == nullptr
                          ? nullptr
                          : cache->rows_for(kv, DV, v0, p1, [&](int64_t p, int64_t n, float* out) {
                              convert_value_rows<F>(kv, DV, p, n, out);
                            });
  for (int64_t pb = v0; pb <= p1; pb += kValueBlock) {
    const int64_t np = std::min(kValueBlock, p1 - pb + 1);
    const float* block_rows = rows != nullptr ? rows + (pb - v0) * DV : vf;
    if (rows == nullptr) convert_value_rows<F>(kv, DV, pb, np, vf);
    // W output dimensions of every lane's query over the block's rows; W is a template
    // parameter so that the accumulators stay in registers (8 but for a row's last chunk).
    auto value_chunk = [&]<int W>(int64_t dc, std::integral_constant<int, W>) {
      __m256 acc[W];
      for (int u = 0; u < W; ++u) acc[u] = _mm256_load_ps(oT + (dc + u) * kLanes);
      for (int64_t t = 0; t < np; ++t) {
        const int64_t j = attends_in_bf16(F) ? pair_swapped(t, np) : t;
        const int64_t p = pb + j;
        const __m256 w = _mm256_load_ps(scores + (p - base) * kLanes);
        const float* v = block_rows + j * DV + dc;
        if (p >= all_from && p <= all_to) {
          for (int u = 0; u < W; ++u)
            acc[u] = _mm256_fmadd_ps(w, _mm256_broadcast_ss(v + u), acc[u]);
        } else {
          const __m256 seen = visible(first, last, p);
          for (int u = 0; u < W; ++u)
            acc[u] = _mm256_blendv_ps(acc[u],
                                      _mm256_fmadd_ps(w, _mm256_broadcast_ss(v + u), acc[u]), seen);
        }
      }
      for (int u = 0; u < W; ++u) _mm256_store_ps(oT + (dc + u) * kLanes, acc[u]);
    };
    int64_t dc = 0;
    for (; dc + 8 <= DV; dc += 8) value_chunk(dc, std::integral_constant<int, 8>{});
    for (; dc < DV; ++dc) value_chunk(dc, std::integral_constant<int, 1>{});
  }

  // out = o * float(1 / sum), lane by lane.
  const __m128 inv_lo = _mm256_cvtpd_ps(_mm256_div_pd(_mm256_set1_pd(1.0), sum_lo));
  const __m128 inv_hi = _mm256_cvtpd_ps(_mm256_div_pd(_mm256_set1_pd(1.0), sum_hi));
  const __m256 inv = _mm256_insertf128_ps(_mm256_castps128_ps256(inv_lo), inv_hi, 1);
  for (int64_t d0 = 0; d0 < DV; d0 += 8) {
    const int64_t width = std::min<int64_t>(8, DV - d0);
    __m256 o[8];
    for (int64_t u = 0; u < 8; ++u)
      o[u] = u < width ? _mm256_mul_ps(_mm256_load_ps(oT + (d0 + u) * kLanes), inv)
                       : _mm256_setzero_ps();
    transpose8(o);  // o[i]: dimensions d0 .. d0 + 7 of query i
    for (int64_t i = 0; i < n; ++i) {
      if (width == 8) {
        _mm256_storeu_ps(queries.out[i] + d0, o[i]);
      } else {
        alignas(32) float tmp[8];
        _mm256_store_ps(tmp, o[i]);
        for (int64_t u = 0; u < width; ++u) queries.out[i][d0 + u] = tmp[u];
      }
    }
  }
  alignas(32) float lane[kLanes];
  _mm256_store_ps(lane, inv);
  for (int64_t i = 0; i < n; ++i)
    if (asks_metric(queries.metric, queries.metric_lanes, i))
      add_squared_weights(scores + i, kLanes, base, first_a[i], last_a[i], lane[i], queries.metric);
}

template <KvFormat F>
void attend(bool one_range, const AttentionShape& shape, const PagedKv& kv,
            const AttentionQueries& queries, float* scratch, ValueRowCache* cache) {
  if (one_range) return attend_one_token_group<F>(shape, kv, queries, scratch);
  attend_query_lanes<F>(shape, kv, queries, scratch, cache);
}

}  // namespace

void decode_scores(const AttentionShape& shape, const PagedKv& kv, const AttentionQueries& queries,
                   float* scores, int64_t span, int64_t base, int64_t p_begin, int64_t p_end,
                   float* max_out) {
  with_format_and_count(kv.format, queries.n, [&]<KvFormat F, int N>() {
    one_token_scores<F, N>(shape, kv, queries, scores, span, base, p_begin, p_end, max_out);
  });
}

void decode_weights(KvFormat format, int64_t n, float* scores, int64_t span, int64_t j_begin,
                    int64_t j_end, const float* m_sink) {
  with_format_and_count(format, n, [&]<KvFormat F, int N>() {
    one_token_weights<F, N>(scores, span, j_begin, j_end, m_sink);
  });
}

void decode_values(const AttentionShape& shape, const PagedKv& kv, const AttentionQueries& queries,
                   const float* scores, int64_t span, int64_t base, int64_t d_begin, int64_t d_end,
                   const double* sum, float* acc) {
  with_format_and_count(kv.format, queries.n, [&]<KvFormat F, int N>() {
    one_token_values<F, N>(shape, kv, queries, scores, span, base, d_begin, d_end, sum, acc);
  });
}

void bf16_operands(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, bf16_operand8(_mm256_loadu_ps(x + i)));
  for (; i < n; ++i) y[i] = bf16_operand(x[i]);
}

void paged_attention(const AttentionShape& shape, const PagedKv& kv,
                     const AttentionQueries& queries, float* scratch, ValueRowCache* cache) {
  if (queries.n > kLanes) {
    // Two blocks of at most 8: a query's result does not depend on its block.
    AttentionQueries half{};
    half.metric = queries.metric;
    half.has_sinks = queries.has_sinks;
    for (int64_t from = 0; from < queries.n; from += kLanes) {
      half.n = std::min<int64_t>(kLanes, queries.n - from);
      half.metric_lanes = queries.metric_lanes >> from;
      for (int64_t i = 0; i < half.n; ++i) {
        half.q[i] = queries.q[from + i];
        half.first[i] = queries.first[from + i];
        half.last[i] = queries.last[from + i];
        half.out[i] = queries.out[from + i];
        half.sink[i] = queries.sink[from + i];
      }
      paged_attention(shape, kv, half, scratch, cache);
    }
    return;
  }
  bool one_range = true;
  for (int64_t i = 1; i < queries.n; ++i)
    one_range &= queries.first[i] == queries.first[0] && queries.last[i] == queries.last[0];
  switch (kv.format) {
    case KvFormat::kF16:
      return attend<KvFormat::kF16>(one_range, shape, kv, queries, scratch, cache);
    case KvFormat::kBF16:
      return attend<KvFormat::kBF16>(one_range, shape, kv, queries, scratch, cache);
    case KvFormat::kF32:
      return attend<KvFormat::kF32>(one_range, shape, kv, queries, scratch, cache);
    case KvFormat::kInt8:
      return attend<KvFormat::kInt8>(one_range, shape, kv, queries, scratch, cache);
    case KvFormat::kInt4:
      return attend<KvFormat::kInt4>(one_range, shape, kv, queries, scratch, cache);
  }
}

}  // namespace drift::kernels::avx2
