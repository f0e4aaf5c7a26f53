// AVX-512 paged attention for blocks of queries of several tokens (prefill): the query-lanes
// shape of paged_attention_avx2.cc with 16 queries per register, in the same canonical order.
// Blocks of one token (decode) and small blocks go to the AVX2 code.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "kernels/exp_approx.h"
#include "kernels/paged_attention.h"

namespace drift::kernels {
namespace avx2 {
void paged_attention(const AttentionShape& shape, const PagedKv& kv,
                     const AttentionQueries& queries, float* scratch);
}  // namespace avx2

namespace avx512 {
namespace {

constexpr int kLanes = 16;
constexpr int64_t kValueBlock = 32;

int64_t round8(int64_t n) { return (n + 7) / 8 * 8; }

// exp_approx on 16 lanes: the operations of exp_approx.h one by one (no fma), bit-identical.
__m512 exp16(__m512 x) {
  const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  const __m512 xc = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(kExpLo)), _mm512_set1_ps(kExpHi));
  const __m512 round = _mm512_set1_ps(kExpRound);
  const __m512 n =
      _mm512_sub_ps(_mm512_add_ps(_mm512_mul_ps(xc, _mm512_set1_ps(kExpLog2e)), round), round);
  const __m512 r = _mm512_sub_ps(_mm512_sub_ps(xc, _mm512_mul_ps(n, _mm512_set1_ps(kExpLn2Hi))),
                                 _mm512_mul_ps(n, _mm512_set1_ps(kExpLn2Lo)));
  __m512 p = _mm512_set1_ps(kExpC5);
  p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(kExpC4));
  p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(kExpC3));
  p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(kExpC2));
  p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(kExpC1));
  p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(kExpC0));
  p = _mm512_add_ps(_mm512_mul_ps(p, _mm512_mul_ps(r, r)), r);
  p = _mm512_add_ps(p, _mm512_set1_ps(1.0f));
  const __m512i ni = _mm512_cvtps_epi32(n);
  const __m512i n1 = _mm512_srai_epi32(_mm512_add_epi32(ni, _mm512_srli_epi32(ni, 31)), 1);
  const __m512i n2 = _mm512_sub_epi32(ni, n1);
  const __m512i bias = _mm512_set1_epi32(127);
  const __m512 s1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n1, bias), 23));
  const __m512 s2 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n2, bias), 23));
  return _mm512_mask_mov_ps(_mm512_mul_ps(_mm512_mul_ps(p, s1), s2), nan, x);
}

// The transposed keys of positions [p, p + 8) (p a multiple of 8): element e of them is 8 fp16
// values at column + e * page_size. Found once per block of positions, not once per element (the
// page-table lookup divides by the page size).
const uint16_t* key_column(const PagedKv& kv, int64_t p) {
  return kv.keys + kv.page_table[p / kv.page_size] * kv.page_stride + p % kv.page_size;
}

void convert_value_rows(const PagedKv& kv, int64_t dim, int64_t p, int64_t n, float* out) {
  for (int64_t j = 0; j < n; ++j) {
    const int64_t pos = p + j;
    const uint16_t* row =
        kv.values + kv.page_table[pos / kv.page_size] * kv.page_stride + (pos % kv.page_size) * dim;
    for (int64_t e = 0; e < dim; e += 16) {
      const int64_t width = std::min<int64_t>(16, dim - e);
      const __mmask16 m = static_cast<__mmask16>((1u << width) - 1);
      _mm512_mask_storeu_ps(out + j * dim + e, m,
                            _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, row + e)));
    }
  }
}

__mmask16 visible(__m512i first, __m512i last, int64_t p) {
  const __m512i pv = _mm512_set1_epi32(static_cast<int32_t>(p));
  return _mm512_cmple_epi32_mask(first, pv) & _mm512_cmple_epi32_mask(pv, last);
}

void attend_query_lanes(const AttentionShape& shape, const PagedKv& kv,
                        const AttentionQueries& queries, float* scratch) {
  const int64_t D = shape.head_dim, DV = shape.head_dim_v, n = queries.n;
  alignas(64) int32_t first_a[kLanes], last_a[kLanes];
  int64_t p0 = queries.first[0], p1 = queries.last[0];
  int64_t all_from = queries.first[0], all_to = queries.last[0];
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
  const __m512i first = _mm512_load_si512(first_a);
  const __m512i last = _mm512_load_si512(last_a);
  const int64_t base = p0 / 8 * 8;

  // Scratch (64-byte aligned parts): qT [D][16], scores [p1 - base + 1][16], kf [D][8],
  // vf [32][DV], oT [DV][16].
  auto round16 = [](int64_t v) { return (v + 15) / 16 * 16; };
  float* qT = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(scratch) + 63) / 64 * 64);
  float* scores = qT + round16(D * kLanes);
  float* kf = scores + round8(p1 + 8) * kLanes;
  float* vf = kf + round16(8 * D);
  float* oT = vf + round16(kValueBlock * DV);
  for (int64_t e = 0; e < D; ++e)
    for (int i = 0; i < kLanes; ++i) qT[e * kLanes + i] = i < n ? queries.q[i][e] : 0.0f;

  const __m512 scale = _mm512_set1_ps(shape.scale);
  const __m512 neg_inf = _mm512_set1_ps(-INFINITY);
  __m512 m = neg_inf;
  for (int64_t pb = base; pb <= p1; pb += 8) {
    const uint16_t* column = key_column(kv, pb);
    for (int64_t e = 0; e < D; ++e)
      _mm256_store_ps(kf + e * 8, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(
                                      column + e * kv.page_size))));
    __m512 acc[8];
    for (auto& a : acc) a = _mm512_setzero_ps();
    for (int64_t e = 0; e < D; ++e) {
      const __m512 qe = _mm512_load_ps(qT + e * kLanes);
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j)
        acc[j] = _mm512_fmadd_ps(qe, _mm512_set1_ps(kf[e * 8 + j]), acc[j]);
    }
    for (int64_t j = 0; j < 8 && pb + j <= p1; ++j) {
      const __m512 s =
          _mm512_mask_mov_ps(neg_inf, visible(first, last, pb + j), _mm512_mul_ps(acc[j], scale));
      _mm512_store_ps(scores + (pb + j - base) * kLanes, s);
      m = _mm512_max_ps(m, s);
    }
  }

  __m512d sum_lo = _mm512_setzero_pd(), sum_hi = _mm512_setzero_pd();
  for (int64_t p = p0; p <= p1; ++p) {
    float* s = scores + (p - base) * kLanes;
    const __m512 w = exp16(_mm512_sub_ps(_mm512_load_ps(s), m));
    _mm512_store_ps(s, w);
    sum_lo = _mm512_add_pd(sum_lo, _mm512_cvtps_pd(_mm512_castps512_ps256(w)));
    sum_hi = _mm512_add_pd(sum_hi, _mm512_cvtps_pd(_mm512_extractf32x8_ps(w, 1)));
  }

  for (int64_t d = 0; d < DV * kLanes; ++d) oT[d] = 0.0f;
  for (int64_t pb = p0; pb <= p1; pb += kValueBlock) {
    const int64_t np = std::min(kValueBlock, p1 - pb + 1);
    convert_value_rows(kv, DV, pb, np, vf);
    // W output dimensions of every lane's query over the block's rows; W is a template
    // parameter so that the accumulators stay in registers (8 but for a row's last chunk).
    auto value_chunk = [&]<int W>(int64_t dc, std::integral_constant<int, W>) {
      __m512 acc[W];
      for (int u = 0; u < W; ++u) acc[u] = _mm512_load_ps(oT + (dc + u) * kLanes);
      for (int64_t j = 0; j < np; ++j) {
        const int64_t p = pb + j;
        const __m512 w = _mm512_load_ps(scores + (p - base) * kLanes);
        const float* v = vf + j * DV + dc;
        const __mmask16 seen =
            p >= all_from && p <= all_to ? __mmask16{0xffff} : visible(first, last, p);
        for (int u = 0; u < W; ++u)
          acc[u] = _mm512_mask3_fmadd_ps(w, _mm512_set1_ps(v[u]), acc[u], seen);
      }
      for (int u = 0; u < W; ++u) _mm512_store_ps(oT + (dc + u) * kLanes, acc[u]);
    };
    int64_t dc = 0;
    for (; dc + 8 <= DV; dc += 8) value_chunk(dc, std::integral_constant<int, 8>{});
    for (; dc < DV; ++dc) value_chunk(dc, std::integral_constant<int, 1>{});
  }

  const __m256 inv_lo = _mm512_cvtpd_ps(_mm512_div_pd(_mm512_set1_pd(1.0), sum_lo));
  const __m256 inv_hi = _mm512_cvtpd_ps(_mm512_div_pd(_mm512_set1_pd(1.0), sum_hi));
  const __m512 inv = _mm512_insertf32x8(_mm512_castps256_ps512(inv_lo), inv_hi, 1);
  alignas(64) float lane[kLanes];
  for (int64_t d = 0; d < DV; ++d) {
    _mm512_store_ps(lane, _mm512_mul_ps(_mm512_load_ps(oT + d * kLanes), inv));
    for (int64_t i = 0; i < n; ++i) queries.out[i][d] = lane[i];
  }
}

// Queries of one token (decode): the heads of one group, all with the same range. Scores of 16
// consecutive positions per register from the transposed keys (page_size % 16 == 0, so 16
// positions from a multiple of 16 lie in one page); value rows read once per position for all
// queries and up to 64 dimensions in registers.
//
// Why it is shaped this way: with one accumulator per query the scores are bound by the fma
// latency, so B blocks of 16 positions are scored at once (N x B independent chains); N, B and
// the value chunks are template parameters so that every accumulator lives in a register (with
// run-time counts the compiler kept them on the stack: 1.7x slower with the K/V in cache).
// Software prefetch of the next pages was tried and gained nothing: the hardware prefetcher
// follows the 2 KB blocks.

// Scores of positions [pb, pb + 16 B) for N queries (B blocks of 16, all inside [base, last]).
template <int N, int B>
inline void score_blocks(const PagedKv& kv, const AttentionQueries& queries, int64_t D, int64_t pb,
                         int64_t first, int64_t last, __m512 scale, float* scores, int64_t span,
                         int64_t base, __m512* m) {
  const uint16_t* col[B];
  for (int b = 0; b < B; ++b) {
    const int64_t p = pb + 16 * b;
    col[b] = kv.keys + kv.page_table[p / kv.page_size] * kv.page_stride + p % kv.page_size;
  }
  __m512 acc[B][N];
  for (int b = 0; b < B; ++b)
    for (int i = 0; i < N; ++i) acc[b][i] = _mm512_setzero_ps();
  for (int64_t e = 0; e < D; ++e) {
    __m512 k[B];
    for (int b = 0; b < B; ++b)
      k[b] = _mm512_cvtph_ps(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(col[b] + e * kv.page_size)));
    for (int i = 0; i < N; ++i) {
      const __m512 q = _mm512_set1_ps(queries.q[i][e]);
      for (int b = 0; b < B; ++b) acc[b][i] = _mm512_fmadd_ps(q, k[b], acc[b][i]);
    }
  }
  const __m512 neg_inf = _mm512_set1_ps(-INFINITY);
  const __m512i lane_index =
      _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  for (int b = 0; b < B; ++b) {
    const int64_t p = pb + 16 * b;
    const __m512i pos = _mm512_add_epi32(_mm512_set1_epi32(static_cast<int32_t>(p)), lane_index);
    const __mmask16 inside =
        _mm512_cmple_epi32_mask(_mm512_set1_epi32(static_cast<int32_t>(first)), pos) &
        _mm512_cmple_epi32_mask(pos, _mm512_set1_epi32(static_cast<int32_t>(last)));
    for (int i = 0; i < N; ++i) {
      const __m512 sc = _mm512_mask_mov_ps(neg_inf, inside, _mm512_mul_ps(acc[b][i], scale));
      _mm512_store_ps(scores + i * span + (p - base), sc);
      m[i] = _mm512_max_ps(m[i], sc);
    }
  }
}

// Dimensions [d0, d0 + width) of the weighted value rows over positions [first, last], for the
// queries whose weights start at `weights` (one row of `span` per query, position p at p - base).
struct WeightedRows {
  const PagedKv& kv;
  const float* weights;
  int64_t span, base, first, last, dim_v, d0, width;
};

// out[i][d0 ..] = (sum over p of w_i[p] * v_p) * float(1 / sum[i]) for Q (at most `n`) queries,
// C chunks of 16 dimensions in registers.
template <int Q, int C>
inline void weighted_value_rows(const WeightedRows& r, float* const* out, const double* sum) {
  __mmask16 mk[C];
  for (int c = 0; c < C; ++c) {
    const int64_t w = std::min<int64_t>(16, r.width - 16 * c);
    mk[c] = static_cast<__mmask16>((1u << w) - 1);
  }
  __m512 o[Q][C];
  for (int i = 0; i < Q; ++i)
    for (int c = 0; c < C; ++c) o[i][c] = _mm512_setzero_ps();
  for (int64_t p = r.first; p <= r.last; ++p) {
    const uint16_t* row = r.kv.values + r.kv.page_table[p / r.kv.page_size] * r.kv.page_stride +
                          (p % r.kv.page_size) * r.dim_v + r.d0;
    __m512 v[C];
    for (int c = 0; c < C; ++c)
      v[c] = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mk[c], row + 16 * c));
    for (int i = 0; i < Q; ++i) {
      const __m512 w = _mm512_set1_ps(r.weights[i * r.span + (p - r.base)]);
      for (int c = 0; c < C; ++c) o[i][c] = _mm512_fmadd_ps(w, v[c], o[i][c]);
    }
  }
  for (int i = 0; i < Q; ++i) {
    const __m512 inv = _mm512_set1_ps(static_cast<float>(1.0 / sum[i]));
    for (int c = 0; c < C; ++c)
      _mm512_mask_storeu_ps(out[i] + r.d0 + 16 * c, mk[c], _mm512_mul_ps(o[i][c], inv));
  }
}

// Every 64-dimension slice of the output for Q queries.
template <int Q>
inline void value_passes(const PagedKv& kv, int64_t DV, const float* weights, int64_t span,
                         int64_t base, int64_t first, int64_t last, float* const* out,
                         const double* sum) {
  for (int64_t d0 = 0; d0 < DV; d0 += 64) {
    const int64_t width = std::min<int64_t>(64, DV - d0);
    const WeightedRows rows{kv, weights, span, base, first, last, DV, d0, width};
    switch ((width + 15) / 16) {
      case 4:
        weighted_value_rows<Q, 4>(rows, out, sum);
        break;
      case 3:
        weighted_value_rows<Q, 3>(rows, out, sum);
        break;
      case 2:
        weighted_value_rows<Q, 2>(rows, out, sum);
        break;
      default:
        weighted_value_rows<Q, 1>(rows, out, sum);
        break;
    }
  }
}

template <int N>
void attend_one_token(const AttentionShape& shape, const PagedKv& kv,
                      const AttentionQueries& queries, float* scratch) {
  const int64_t D = shape.head_dim, DV = shape.head_dim_v;
  const int64_t first = queries.first[0], last = queries.last[0];
  const int64_t base = first / 16 * 16;
  const int64_t span = (last + 1 - base + 15) / 16 * 16;
  float* scores = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(scratch) + 63) / 64 * 64);
  const __m512 scale = _mm512_set1_ps(shape.scale);
  // Enough blocks per pass that N x B independent fma chains cover the fma latency.
  constexpr int B = N == 1 ? 8 : N == 2 ? 6 : N <= 4 ? 4 : 2;

  __m512 m[N];
  for (int i = 0; i < N; ++i) m[i] = _mm512_set1_ps(-INFINITY);
  int64_t pb = base;
  for (; pb + 16 * (B - 1) <= last; pb += 16 * B) {
    score_blocks<N, B>(kv, queries, D, pb, first, last, scale, scores, span, base, m);
  }
  for (; pb <= last; pb += 16)
    score_blocks<N, 1>(kv, queries, D, pb, first, last, scale, scores, span, base, m);

  // Weights (outside the range exp(-inf) = 0) and their double sums in increasing position; the
  // queries' sums are interleaved so that their add chains overlap.
  __m512 mi[N];
  for (int i = 0; i < N; ++i) mi[i] = _mm512_set1_ps(_mm512_reduce_max_ps(m[i]));
  double sum[N] = {};
  for (int64_t j = 0; j < span; j += 16) {
    for (int i = 0; i < N; ++i) {
      float* sc = scores + i * span + j;
      _mm512_store_ps(sc, exp16(_mm512_sub_ps(_mm512_load_ps(sc), mi[i])));
    }
    for (int l = 0; l < 16; ++l)
      for (int i = 0; i < N; ++i) sum[i] += static_cast<double>(scores[i * span + j + l]);
  }

  // Up to 4 queries x 64 output dimensions per pass over the visible value rows (Q x 4
  // accumulators and 4 rows in registers): queries [0, Q1), then [Q1, N).
  constexpr int Q1 = N <= 4 ? N : 4;
  value_passes<Q1>(kv, DV, scores, span, base, first, last, queries.out, sum);
  if constexpr (N > Q1)
    value_passes<N - Q1>(kv, DV, scores + Q1 * span, span, base, first, last, queries.out + Q1,
                         sum + Q1);
}

using OneTokenKernel = void (*)(const AttentionShape&, const PagedKv&, const AttentionQueries&,
                                float*);
constexpr OneTokenKernel kOneToken[9] = {nullptr,
                                         attend_one_token<1>,
                                         attend_one_token<2>,
                                         attend_one_token<3>,
                                         attend_one_token<4>,
                                         attend_one_token<5>,
                                         attend_one_token<6>,
                                         attend_one_token<7>,
                                         attend_one_token<8>};

}  // namespace

void paged_attention(const AttentionShape& shape, const PagedKv& kv,
                     const AttentionQueries& queries, float* scratch) {
  bool one_range = true;
  for (int64_t i = 1; i < queries.n; ++i)
    one_range &= queries.first[i] == queries.first[0] && queries.last[i] == queries.last[0];
  if (one_range && queries.n <= 8 && kv.page_size % 16 == 0)
    return kOneToken[queries.n](shape, kv, queries, scratch);
  if (one_range || queries.n <= 8) return avx2::paged_attention(shape, kv, queries, scratch);
  attend_query_lanes(shape, kv, queries, scratch);
}

}  // namespace avx512
}  // namespace drift::kernels
