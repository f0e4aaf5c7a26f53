// AVX-512 paged attention for blocks of queries of several tokens (prefill): the query-lanes
// shape of paged_attention_avx2.cc with 16 queries per register, in the same canonical order.
// Blocks of one token (decode), small blocks and page sizes that are not a multiple of 16 go to
// the AVX2 code. K/V are dequantized in registers as they are loaded (16 lanes here), the same
// elements kv_format.h's scalar reads give.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "kernels/attention_avx512.h"
#include "kernels/attention_metric.h"
#include "kernels/attention_sinks.h"
#include "kernels/decode_dispatch.h"
#include "kernels/decode_steps.h"
#include "kernels/exp_approx.h"
#include "kernels/fp16.h"
#include "kernels/paged_attention.h"
#include "kernels/paged_kv_avx2.h"

namespace drift::kernels {
namespace avx2 {
void paged_attention(const AttentionShape& shape, const PagedKv& kv,
                     const AttentionQueries& queries, float* scratch, ValueRowCache* cache);
}  // namespace avx2

namespace avx512 {
namespace bf16 {  // paged_attention_avx512_bf16.cc, for CPUs with AVX-512 BF16
// Scores of the 16 query lanes over positions [base, p1] (base a multiple of 16) as
// attend_query_lanes stores them, from query_pairs [16][(D + 1) / 2]: dword j of query i holds
// q'[2j] (low half) and q'[2j + 1]. Returns the lanes' running max.
__m512 score_rows(const uint32_t* query_pairs, int64_t D, const PagedKv& kv, int64_t base,
                  int64_t p1, __m512i first, __m512i last, float scale, float* scores);
// Value pairs (ValueRowCache::pairs_for's layout) from x0 (even) to p1 into out.
void convert_value_pairs(const PagedKv& kv, int64_t DV, int64_t x0, int64_t p1, float* out);
// oT[d][lane] += the weighted values of positions [pb, pb + np) (pb even): weights in rows of
// 16 lanes from `weights` (bf16 operands; row np is read when np is odd), value pairs from `pairs`.
void weigh_value_block(const float* weights, int64_t np, const float* pairs, int64_t DV, float* oT);
// Decode (n queries of one token, range [first, last]): the scores of the positions of
// [p_begin, p_end) (p_begin - base a multiple of 16), as attend_one_token stores them, and the
// lanes' running max of each query ([n][16]).
void decode_scores(int n, const PagedKv& kv, const uint32_t* query_pairs, int64_t D, int64_t first,
                   int64_t last, float scale, float* scores, int64_t span, int64_t base,
                   int64_t p_begin, int64_t p_end, float* max_lanes);
// out[i][d] for d in [d_begin, d_end) = the weighted value rows * float(1 / sum[i]) for q <= 4
// queries.
void decode_values(int q, const PagedKv& kv, int64_t DV, const float* weights, int64_t span,
                   int64_t base, int64_t first, int64_t last, int64_t d_begin, int64_t d_end,
                   float* const* out, const double* sum);
}  // namespace bf16

namespace {

constexpr int kLanes = 16;

bool cpu_has_bf16() {
  static const bool has = detect_cpu_features().avx512bf16;
  return has;
}

// q' of query rows (bf16 operands already) as dwords of element pairs: [n][(D + 1) / 2].
void pack_query_pairs(const float* const* q, int64_t n, int64_t D, uint32_t* pairs) {
  const int64_t per_query = (D + 1) / 2;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < per_query; ++j) {
      const uint32_t even = f32_to_bits(q[i][2 * j]) >> 16;
      const uint32_t odd = 2 * j + 1 < D ? f32_to_bits(q[i][2 * j + 1]) >> 16 : 0;
      pairs[i * per_query + j] = even | odd << 16;
    }
}
constexpr int64_t kValueBlock = 32;

// Scales of group g of key slots [slot, slot + 16) (a multiple of 16), as lanes (unused for the
// float types); int4's as paged_kv::key_scales8 computes them.
template <KvFormat F>
inline __m512 key_scales16(const uint8_t* block, int64_t D, int64_t ps, int64_t slot, int64_t g) {
  if constexpr (F == KvFormat::kInt8)
    return _mm512_cvtph_ps(_mm256_loadu_si256(
        reinterpret_cast<const __m256i*>(block + kv_data_bytes(F, D, ps) + 2 * (g * ps + slot))));
  if constexpr (F == KvFormat::kInt4) {
    const __m512 unit = _mm512_mul_ps(
        _mm512_cvtph_ps(_mm256_loadu_si256(
            reinterpret_cast<const __m256i*>(block + kv_int4_masters_offset(D, ps) + 2 * slot))),
        _mm512_set1_ps(0x1p-7f));
    const __m512 subs = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(
        reinterpret_cast<const __m128i*>(block + kv_int4_subs_offset(D, ps) + g * ps + slot))));
    return _mm512_mul_ps(subs, unit);
  }
  return _mm512_setzero_ps();
}

// Element e of key slots [slot, slot + 16), dequantized with the lanes of key_scales16.
template <KvFormat F>
inline __m512 keys16(const uint8_t* block, int64_t ps, int64_t slot, int64_t e, __m512 scale) {
  const int64_t i = e * ps + slot;
  if constexpr (F == KvFormat::kF16) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 2 * i)));
  } else if constexpr (F == KvFormat::kBF16) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(
        _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 2 * i))),
        16));
  } else if constexpr (F == KvFormat::kF32) {
    return _mm512_loadu_ps(reinterpret_cast<const float*>(block) + i);
  } else if constexpr (F == KvFormat::kInt8) {
    return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(
                             _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + i)))),
                         scale);
  } else {
    const __m128i levels = paged_kv::int4_level_bytes(
        _mm_loadl_epi64(reinterpret_cast<const __m128i*>(block + i / 2)));
    return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(levels)), scale);
  }
}

// Value elements [d, d + width) of the position in `slot` of value block `block` (width <= 16,
// the rest 0; d % 16 == 0, so that they share one scale group).
template <KvFormat F>
inline __m512 value_lanes16(const uint8_t* block, int64_t ps, int64_t DV, int64_t slot, int64_t d,
                            int64_t width) {
  const __mmask16 m = static_cast<__mmask16>((1u << width) - 1);
  const int64_t i = slot * DV + d;
  if constexpr (F == KvFormat::kF16) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, block + 2 * i));
  } else if constexpr (F == KvFormat::kBF16) {
    return _mm512_castsi512_ps(
        _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, block + 2 * i)), 16));
  } else if constexpr (F == KvFormat::kF32) {
    return _mm512_maskz_loadu_ps(m, reinterpret_cast<const float*>(block) + i);
  } else {
    if (F == KvFormat::kInt4 && width < 16) {
      alignas(64) float tmp[16] = {};
      for (int64_t u = 0; u < width; ++u) tmp[u] = kv_load_value(F, block, DV, ps, slot, d + u);
      return _mm512_load_ps(tmp);
    }
    const int64_t scale_index =
        slot * paged_kv::value_scales_per_row<F>(DV) + paged_kv::value_scale_column<F>(DV, d);
    uint16_t h;
    __builtin_memcpy(&h, block + kv_data_bytes(F, DV, ps) + 2 * scale_index, 2);
    const __m512 scale = _mm512_set1_ps(_cvtsh_ss(h));
    __m512i codes;
    if constexpr (F == KvFormat::kInt8) {
      codes = _mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(m, block + i));
    } else {
      codes = _mm512_cvtepi8_epi32(paged_kv::int4_level_bytes(
          _mm_loadl_epi64(reinterpret_cast<const __m128i*>(block + i / 2))));
    }
    return _mm512_maskz_mul_ps(m, _mm512_cvtepi32_ps(codes), scale);
  }
}

template <KvFormat F>
void convert_value_rows(const PagedKv& kv, int64_t dim, int64_t p, int64_t n, float* out) {
  paged_kv::ValueRowCursor row(kv, p);
  for (int64_t j = 0; j < n; ++j, row.next()) {
    const uint8_t* block = row.block();
    for (int64_t e = 0; e < dim; e += 16) {
      const int64_t width = std::min<int64_t>(16, dim - e);
      const __mmask16 m = static_cast<__mmask16>((1u << width) - 1);
      _mm512_mask_storeu_ps(out + j * dim + e, m,
                            value_lanes16<F>(block, kv.page_size, dim, row.slot(), e, width));
    }
  }
}

template <KvFormat F>
void attend_query_lanes(const AttentionShape& shape, const PagedKv& kv,
                        const AttentionQueries& queries, float* scratch, ValueRowCache* cache) {
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
  const int64_t base = p0 / 16 * 16;

  // Scratch (64-byte aligned parts): qv [16][D], scores [p1 - base + 1][16] (and a row past
  // p1), vf [32][DV], oT [DV][16], bf16 query pairs [16][(D + 1) / 2] (paged_attention.cc
  // allots the floats the AVX2 path converts a key block into, 8 D, which they fit in).
  auto round16 = [](int64_t v) { return (v + 15) / 16 * 16; };
  float* qv = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(scratch) + 63) / 64 * 64);
  float* scores = qv + round16(D * kLanes);
  float* vf = scores + round16(p1 + 1) * kLanes;
  float* oT = vf + round16(kValueBlock * DV);
  uint32_t* query_pairs = reinterpret_cast<uint32_t*>(oT + round16(DV * kLanes));
  // (Whole rows: an element-wise copy here was 5% of the prefill attention.)
  for (int i = 0; i < kLanes; ++i) {
    if (i < n) {
      std::copy(queries.q[i], queries.q[i] + D, qv + i * D);
    } else {
      std::fill(qv + i * D, qv + (i + 1) * D, 0.0f);
    }
  }

  // Scores of 16 positions at a time with the positions in the lanes: element e of the 16 keys
  // is one load from the transposed block (page_size % 16 == 0), times each query's element e
  // broadcast; then a 16x16 transpose gives each position's row of the 16 queries' scores, the
  // layout the softmax and the value pass read. (Queries in the lanes instead, with each key
  // element broadcast, needed the keys converted into scratch first: 16% slower here.)
  const __m512 scale = _mm512_set1_ps(shape.scale);
  __m512 m = _mm512_set1_ps(-INFINITY);
  const int64_t group = paged_kv::group_of<F>(D);
  if constexpr (F == KvFormat::kBF16) {  // vdpbf16ps (the queries are already q')
    const float* q_rows[kLanes];
    for (int i = 0; i < kLanes; ++i) q_rows[i] = qv + i * D;
    pack_query_pairs(q_rows, kLanes, D, query_pairs);
    m = bf16::score_rows(query_pairs, D, kv, base, p1, first, last, shape.scale, scores);
  } else {
    for (int64_t pb = base; pb <= p1; pb += 16) {
      const uint8_t* block =
          paged_kv::block_of(kv.keys, kv.page_stride, kv.page_table, kv.page_size, pb);
      const int64_t slot = pb % kv.page_size;
      __m512 acc[kLanes];
      for (auto& a : acc) a = _mm512_setzero_ps();
      for (int64_t g0 = 0; g0 < D; g0 += group) {
        const __m512 group_scale = key_scales16<F>(block, D, kv.page_size, slot, g0 / group);
        for (int64_t e = g0; e < g0 + group; ++e) {
          const __m512 k = keys16<F>(block, kv.page_size, slot, e, group_scale);
#pragma GCC unroll 16
          for (int i = 0; i < kLanes; ++i)
            acc[i] = _mm512_fmadd_ps(_mm512_set1_ps(qv[i * D + e]), k, acc[i]);
        }
      }
      store_lane_scores(acc, pb, p1, first, last, scale, scores, base, &m);
    }
  }
  alignas(64) float sinks[kLanes];
  sink_lanes(queries, kLanes, sinks);
  const __m512 sink = _mm512_load_ps(sinks);
  m = _mm512_max_ps(m, sink);

  __m512d sum_lo = _mm512_setzero_pd(), sum_hi = _mm512_setzero_pd();
  for (int64_t p = p0; p <= p1; ++p) {
    float* s = scores + (p - base) * kLanes;
    __m512 w = exp16(_mm512_sub_ps(_mm512_load_ps(s), m));
    if constexpr (attends_in_bf16(F)) w = bf16_operand16(w);
    _mm512_store_ps(s, w);
    sum_lo = _mm512_add_pd(sum_lo, _mm512_cvtps_pd(_mm512_castps512_ps256(w)));
    sum_hi = _mm512_add_pd(sum_hi, _mm512_cvtps_pd(_mm512_extractf32x8_ps(w, 1)));
  }
  {  // the sinks' weights, after the positions'
    const __m512 ws = exp16(_mm512_sub_ps(sink, m));
    sum_lo = _mm512_add_pd(sum_lo, _mm512_cvtps_pd(_mm512_castps512_ps256(ws)));
    sum_hi = _mm512_add_pd(sum_hi, _mm512_cvtps_pd(_mm512_extractf32x8_ps(ws, 1)));
  }

  for (int64_t d = 0; d < DV * kLanes; ++d) oT[d] = 0.0f;
  if constexpr (F == KvFormat::kBF16) {
    // Pairs of positions from an even one: the partners p0 - 1 and p1 + 1 that no lane sees get
    // weight 0 (their score rows are -inf or unwritten).
    const int64_t v0 = p0 & ~int64_t{1};
    if (v0 < p0) _mm512_store_ps(scores + (v0 - base) * kLanes, _mm512_setzero_ps());
    if (p1 % 2 == 0) _mm512_store_ps(scores + (p1 + 1 - base) * kLanes, _mm512_setzero_ps());
    const float* pairs =
        cache == nullptr ? nullptr : cache->pairs_for(kv, DV, v0, p1, [&](int64_t x0, float* out) {
          bf16::convert_value_pairs(kv, DV, x0, p1, out);
        });
    for (int64_t pb = v0; pb <= p1; pb += kValueBlock) {
      const int64_t np = std::min(kValueBlock, p1 - pb + 1);
      if (pairs == nullptr) bf16::convert_value_pairs(kv, DV, pb, pb + np - 1, vf);
      bf16::weigh_value_block(scores + (pb - base) * kLanes, np,
                              pairs != nullptr ? pairs + (pb - v0) * DV : vf, DV, oT);
    }
  } else {
    // Row p of the values at rows + (p - p0) * DV, or per block in vf.
    const float* rows =
        cache == nullptr ? nullptr
                         : cache->rows_for(kv, DV, p0, p1, [&](int64_t p, int64_t n, float* out) {
                             convert_value_rows<F>(kv, DV, p, n, out);
                           });
    for (int64_t pb = p0; pb <= p1; pb += kValueBlock) {
      const int64_t np = std::min(kValueBlock, p1 - pb + 1);
      const float* block_rows = rows != nullptr ? rows + (pb - p0) * DV : vf;
      if (rows == nullptr) convert_value_rows<F>(kv, DV, pb, np, vf);
      // W output dimensions of every lane's query over the block's rows; W is a template
      // parameter so that the accumulators stay in registers (8 but for a row's last chunk).
      auto value_chunk = [&]<int W>(int64_t dc, std::integral_constant<int, W>) {
        __m512 acc[W];
        for (int u = 0; u < W; ++u) acc[u] = _mm512_load_ps(oT + (dc + u) * kLanes);
        // Rows every lane sees take an unmasked fma (its broadcast folds into the instruction);
        // the others are masked per lane. Both add the same products.
        auto rows = [&]<bool kMasked>(int64_t j_begin, int64_t j_end) {
          for (int64_t j = j_begin; j < j_end; ++j) {
            const int64_t p = pb + j;
            const __m512 w = _mm512_load_ps(scores + (p - base) * kLanes);
            const float* v = block_rows + j * DV + dc;
            if constexpr (kMasked) {
              const __mmask16 seen = visible(first, last, p);
              for (int u = 0; u < W; ++u)
                acc[u] = _mm512_mask3_fmadd_ps(w, _mm512_set1_ps(v[u]), acc[u], seen);
            } else {
              for (int u = 0; u < W; ++u) acc[u] = _mm512_fmadd_ps(w, _mm512_set1_ps(v[u]), acc[u]);
            }
          }
        };
        const int64_t all_begin = std::clamp(all_from - pb, int64_t{0}, np);
        const int64_t all_end = std::clamp(all_to - pb + 1, all_begin, np);
        rows.template operator()<true>(0, all_begin);
        rows.template operator()<false>(all_begin, all_end);
        rows.template operator()<true>(all_end, np);
        for (int u = 0; u < W; ++u) _mm512_store_ps(oT + (dc + u) * kLanes, acc[u]);
      };
      int64_t dc = 0;
      for (; dc + 8 <= DV; dc += 8) value_chunk(dc, std::integral_constant<int, 8>{});
      for (; dc < DV; ++dc) value_chunk(dc, std::integral_constant<int, 1>{});
    }
  }

  const __m256 inv_lo = _mm512_cvtpd_ps(_mm512_div_pd(_mm512_set1_pd(1.0), sum_lo));
  const __m256 inv_hi = _mm512_cvtpd_ps(_mm512_div_pd(_mm512_set1_pd(1.0), sum_hi));
  const __m512 inv = _mm512_insertf32x8(_mm512_castps256_ps512(inv_lo), inv_hi, 1);
  // oT holds the lanes' outputs dimension by dimension: 16 dimensions at a time, transposed,
  // give each query's 16 (a scalar copy per element, which the compiler made a scatter, cost
  // 5% of the prefill attention).
  for (int64_t d0 = 0; d0 < DV; d0 += 16) {
    const int64_t width = std::min<int64_t>(16, DV - d0);
    __m512 o[16];
    for (int64_t u = 0; u < 16; ++u)
      o[u] = u < width ? _mm512_mul_ps(_mm512_load_ps(oT + (d0 + u) * kLanes), inv)
                       : _mm512_setzero_ps();
    transpose16(o);  // o[i]: dimensions d0 .. d0 + 15 of query i
    const __mmask16 mk = static_cast<__mmask16>((1u << width) - 1);
    for (int64_t i = 0; i < n; ++i) _mm512_mask_storeu_ps(queries.out[i] + d0, mk, o[i]);
  }
  alignas(64) float lane[kLanes];
  _mm512_store_ps(lane, inv);
  for (int64_t i = 0; i < n; ++i)
    if (asks_metric(queries.metric, queries.metric_lanes, i))
      add_squared_weights(scores + i, kLanes, base, first_a[i], last_a[i], lane[i], queries.metric);
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
// follows the blocks.

// Scores of positions [pb, pb + 16 B) for N queries (B blocks of 16, all starting <= last).
template <KvFormat F, int N, int B>
inline void score_blocks(const PagedKv& kv, const AttentionQueries& queries, int64_t D, int64_t pb,
                         int64_t first, int64_t last, __m512 scale, float* scores, int64_t span,
                         int64_t base, __m512* m) {
  const int64_t ps = kv.page_size, group = paged_kv::group_of<F>(D);
  const uint8_t* block[B];
  int64_t slot[B];
  for (int b = 0; b < B; ++b) {
    block[b] = paged_kv::block_of(kv.keys, kv.page_stride, kv.page_table, ps, pb + 16 * b);
    slot[b] = (pb + 16 * b) % ps;
  }
  __m512 acc[B][N];
  for (int b = 0; b < B; ++b)
    for (int i = 0; i < N; ++i) acc[b][i] = _mm512_setzero_ps();
  for (int64_t g0 = 0; g0 < D; g0 += group) {
    __m512 group_scale[B];
    for (int b = 0; b < B; ++b)
      group_scale[b] = key_scales16<F>(block[b], D, ps, slot[b], g0 / group);
    for (int64_t t = g0; t < g0 + group; ++t) {
      const int64_t e = attends_in_bf16(F) ? pair_swapped(t, D) : t;
      __m512 k[B];
      for (int b = 0; b < B; ++b) k[b] = keys16<F>(block[b], ps, slot[b], e, group_scale[b]);
      for (int i = 0; i < N; ++i) {
        const __m512 q = _mm512_set1_ps(queries.q[i][e]);
        for (int b = 0; b < B; ++b) acc[b][i] = _mm512_fmadd_ps(q, k[b], acc[b][i]);
      }
    }
  }
  store_position_scores(acc, pb, first, last, scale, scores, span, base, m);
}

// out[i][d0 .. d0 + width) = (sum over p in [first, last] of w_i[p] * v_p) * float(1 / sum[i])
// for Q queries whose weights start at `weights` (a row of `span` per query, p at p - base), C
// chunks of 16 dimensions in registers.
template <KvFormat F, int Q, int C>
inline void weighted_value_rows(const PagedKv& kv, int64_t DV, int64_t d0, int64_t width,
                                const float* weights, int64_t span, int64_t base, int64_t first,
                                int64_t last, float* const* out, const double* sum) {
  int64_t chunk_width[C];
  __mmask16 mk[C];
  for (int c = 0; c < C; ++c) {
    chunk_width[c] = std::min<int64_t>(16, width - 16 * c);
    mk[c] = static_cast<__mmask16>((1u << chunk_width[c]) - 1);
  }
  __m512 o[Q][C];
  for (int i = 0; i < Q; ++i)
    for (int c = 0; c < C; ++c) o[i][c] = _mm512_setzero_ps();
  paged_kv::BlockPrefetcher ahead = paged_kv::BlockPrefetcher::values_of(
      kv, F, DV, d0, width, last / kv.page_size, paged_kv::kPrefetchPositions / kv.page_size);
  // Adds position p's row, read at `at`, to every query's chains.
  auto add_row = [&](int64_t p, const paged_kv::ValueRowCursor& at) {
    __m512 v[C];
    for (int c = 0; c < C; ++c)
      v[c] = value_lanes16<F>(at.block(), kv.page_size, DV, at.slot(), d0 + 16 * c, chunk_width[c]);
    for (int i = 0; i < Q; ++i) {
      const __m512 w = _mm512_set1_ps(weights[i * span + (p - base)]);
      for (int c = 0; c < C; ++c) o[i][c] = _mm512_fmadd_ps(w, v[c], o[i][c]);
    }
  };
  paged_kv::for_each_value_row<F>(kv, ahead, first, last, add_row);
  for (int i = 0; i < Q; ++i) {
    const __m512 inv = _mm512_set1_ps(static_cast<float>(1.0 / sum[i]));
    for (int c = 0; c < C; ++c)
      _mm512_mask_storeu_ps(out[i] + d0 + 16 * c, mk[c], _mm512_mul_ps(o[i][c], inv));
  }
}

// Every 64-dimension slice of the output's dimensions [d_begin, d_end) for Q queries.
template <KvFormat F, int Q>
inline void value_passes(const PagedKv& kv, int64_t DV, const float* weights, int64_t span,
                         int64_t base, int64_t first, int64_t last, int64_t d_begin, int64_t d_end,
                         float* const* out, const double* sum) {
  for (int64_t d0 = d_begin; d0 < d_end; d0 += 64) {
    const int64_t width = std::min<int64_t>(64, d_end - d0);
    switch ((width + 15) / 16) {
      case 4:
        weighted_value_rows<F, Q, 4>(kv, DV, d0, width, weights, span, base, first, last, out, sum);
        break;
      case 3:
        weighted_value_rows<F, Q, 3>(kv, DV, d0, width, weights, span, base, first, last, out, sum);
        break;
      case 2:
        weighted_value_rows<F, Q, 2>(kv, DV, d0, width, weights, span, base, first, last, out, sum);
        break;
      default:
        weighted_value_rows<F, Q, 1>(kv, DV, d0, width, weights, span, base, first, last, out, sum);
        break;
    }
  }
}

// ---- A token's queries over one range in three steps (paged_attention.h, "Decode attention in
// parts"): scores of a range of positions, weights of a range, values of a range of dimensions.

// bf16 K/V with AVX-512 BF16: vdpbf16ps (the scores and value rows in the bf16 file).
constexpr int64_t kMaxPairs = 256;
bool decode_dots(KvFormat format, int64_t D) {
  return format == KvFormat::kBF16 && cpu_has_bf16() && (D + 1) / 2 <= kMaxPairs;
}

// Scores of the positions of [p_begin, p_end) within [first, last] (p_begin - base a multiple of
// 16) into scores (a row of `span` per query, from `base`), and each query's max of them.
template <KvFormat F, int N>
void one_token_scores(const AttentionShape& shape, const PagedKv& kv,
                      const AttentionQueries& queries, float* scores, int64_t span, int64_t base,
                      int64_t p_begin, int64_t p_end, float* max_out) {
  const int64_t D = shape.head_dim;
  const int64_t first = queries.first[0], last = queries.last[0];
  const int64_t end = std::min(p_end, last + 1);  // blocks of 16 start before it
  __m512 m[N];
  for (int i = 0; i < N; ++i) m[i] = _mm512_set1_ps(-INFINITY);
  if (decode_dots(F, D)) {
    uint32_t query_pairs[N * kMaxPairs];
    pack_query_pairs(queries.q, N, D, query_pairs);
    alignas(64) float max_lanes[N * 16];
    bf16::decode_scores(N, kv, query_pairs, D, first, last, shape.scale, scores, span, base,
                        p_begin, p_end, max_lanes);
    for (int i = 0; i < N; ++i) m[i] = _mm512_load_ps(max_lanes + 16 * i);
  } else if (p_begin < end) {
    const __m512 scale = _mm512_set1_ps(shape.scale);
    // Enough blocks per pass that N x B independent fma chains cover the fma latency.
    constexpr int B = N == 1 ? 8 : N == 2 ? 6 : N <= 4 ? 4 : 2;
    paged_kv::BlockPrefetcher ahead(kv.keys, kv, kv_key_block_bytes(F, D, kv.page_size),
                                    (end - 1) / kv.page_size,
                                    paged_kv::kPrefetchPositions / kv.page_size);
    int64_t pb = p_begin;
    for (; pb + 16 * (B - 1) < end; pb += 16 * B) {
      ahead.at(pb / kv.page_size);
      score_blocks<F, N, B>(kv, queries, D, pb, first, last, scale, scores, span, base, m);
    }
    for (; pb < end; pb += 16)
      score_blocks<F, N, 1>(kv, queries, D, pb, first, last, scale, scores, span, base, m);
  }
  for (int i = 0; i < N; ++i) max_out[i] = _mm512_reduce_max_ps(m[i]);
}

// Weights of columns [j_begin, j_end) of the scores (multiples of 16): outside the range
// exp(-inf) = 0. m_sink: each query's softmax max, its sink included.
template <KvFormat F, int N>
void one_token_weights(float* scores, int64_t span, int64_t j_begin, int64_t j_end,
                       const float* m_sink) {
  __m512 mi[N];
  for (int i = 0; i < N; ++i) mi[i] = _mm512_set1_ps(m_sink[i]);
  for (int64_t j = j_begin; j < j_end; j += 16)
    for (int i = 0; i < N; ++i) {
      float* sc = scores + i * span + j;
      __m512 w = exp16(_mm512_sub_ps(_mm512_loadu_ps(sc), mi[i]));
      if constexpr (attends_in_bf16(F)) w = bf16_operand16(w);
      _mm512_storeu_ps(sc, w);
    }
}

// out[i][d] for d in [d_begin, d_end): up to 4 queries x 64 output dimensions per pass over the
// visible value rows (Q x 4 accumulators and 4 rows in registers), queries [0, Q1), then [Q1, N).
template <KvFormat F, int N>
void one_token_values(const AttentionShape& shape, const PagedKv& kv,
                      const AttentionQueries& queries, const float* scores, int64_t span,
                      int64_t base, int64_t d_begin, int64_t d_end, const double* sum) {
  const int64_t DV = shape.head_dim_v;
  const int64_t first = queries.first[0], last = queries.last[0];
  constexpr int Q1 = N <= 4 ? N : 4;
  if (decode_dots(F, shape.head_dim)) {
    bf16::decode_values(Q1, kv, DV, scores, span, base, first, last, d_begin, d_end, queries.out,
                        sum);
    if (N > Q1)
      bf16::decode_values(N - Q1, kv, DV, scores + Q1 * span, span, base, first, last, d_begin,
                          d_end, queries.out + Q1, sum + Q1);
  } else {
    value_passes<F, Q1>(kv, DV, scores, span, base, first, last, d_begin, d_end, queries.out, sum);
    if constexpr (N > Q1)
      value_passes<F, N - Q1>(kv, DV, scores + Q1 * span, span, base, first, last, d_begin, d_end,
                              queries.out + Q1, sum + Q1);
  }
}

template <KvFormat F, int N>
void attend_one_token(const AttentionShape& shape, const PagedKv& kv,
                      const AttentionQueries& queries, float* scratch) {
  const int64_t first = queries.first[0], last = queries.last[0];
  const int64_t base = first / 16 * 16;
  const int64_t span = (last + 1 - base + 15) / 16 * 16;
  float* scores = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(scratch) + 63) / 64 * 64);
  float max_scores[N];
  one_token_scores<F, N>(shape, kv, queries, scores, span, base, base, base + span, max_scores);
  float m_sink[N];  // the softmax max of each query, its sink included
  for (int i = 0; i < N; ++i) m_sink[i] = max_with_sink(max_scores[i], query_sink(queries, i));
  one_token_weights<F, N>(scores, span, 0, span, m_sink);
  // The weights' double sums in increasing position; the queries' sums are interleaved so that
  // their add chains overlap.
  double sum[N] = {};
  for (int64_t j = 0; j < span; ++j)
    for (int i = 0; i < N; ++i) sum[i] += static_cast<double>(scores[i * span + j]);
  for (int i = 0; i < N; ++i) sum[i] += sink_weight(query_sink(queries, i), m_sink[i]);
  one_token_values<F, N>(shape, kv, queries, scores, span, base, 0, shape.head_dim_v, sum);
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
                   const double* sum) {
  with_format_and_count(kv.format, queries.n, [&]<KvFormat F, int N>() {
    one_token_values<F, N>(shape, kv, queries, scores, span, base, d_begin, d_end, sum);
  });
}

void paged_attention(const AttentionShape& shape, const PagedKv& kv,
                     const AttentionQueries& queries, float* scratch, ValueRowCache* cache) {
  bool one_range = true;
  for (int64_t i = 1; i < queries.n; ++i)
    one_range &= queries.first[i] == queries.first[0] && queries.last[i] == queries.last[0];
  if (one_range && queries.n <= 8 && kv.page_size % 16 == 0) {
    switch (kv.format) {
      case KvFormat::kF16:
        return attend_one_token_group<KvFormat::kF16>(shape, kv, queries, scratch);
      case KvFormat::kBF16:
        return attend_one_token_group<KvFormat::kBF16>(shape, kv, queries, scratch);
      case KvFormat::kF32:
        return attend_one_token_group<KvFormat::kF32>(shape, kv, queries, scratch);
      case KvFormat::kInt8:
        return attend_one_token_group<KvFormat::kInt8>(shape, kv, queries, scratch);
      case KvFormat::kInt4:
        return attend_one_token_group<KvFormat::kInt4>(shape, kv, queries, scratch);
    }
  }
  // bf16 K/V without AVX-512 BF16 (Skylake to Ice Lake): the AVX2 code's fmas. With it, a
  // small block of several tokens (a prefill's last) is still faster here: half the lanes of
  // vdpbf16ps give as many products as all of an AVX2 fma's.
  const bool has_bf16 = cpu_has_bf16();
  const bool bf16 = kv.format == KvFormat::kBF16;
  if (one_range || (queries.n <= 8 && !(bf16 && has_bf16)) || kv.page_size % 16 != 0 ||
      (bf16 && !has_bf16))
    return avx2::paged_attention(shape, kv, queries, scratch, cache);
  switch (kv.format) {
    case KvFormat::kF16:
      return attend_query_lanes<KvFormat::kF16>(shape, kv, queries, scratch, cache);
    case KvFormat::kBF16:
      return attend_query_lanes<KvFormat::kBF16>(shape, kv, queries, scratch, cache);
    case KvFormat::kF32:
      return attend_query_lanes<KvFormat::kF32>(shape, kv, queries, scratch, cache);
    case KvFormat::kInt8:
      return attend_query_lanes<KvFormat::kInt8>(shape, kv, queries, scratch, cache);
    case KvFormat::kInt4:
      return attend_query_lanes<KvFormat::kInt4>(shape, kv, queries, scratch, cache);
  }
}

}  // namespace avx512
}  // namespace drift::kernels
