// AVX2 paged attention: the canonical order of paged_attention.h with the block's queries in the
// 8 lanes of a register. Keys and values are converted from fp16 once per block of positions and
// each element is broadcast against all queries, so one fma advances 8 queries' chains. A lane
// whose query does not see a position gets score -inf (weight exactly 0) and leaves its output
// chain untouched, which is what visiting only its visible positions would do.
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "kernels/paged_attention.h"
#include "kernels/simd_avx2.h"

namespace drift::kernels::avx2 {
namespace {

constexpr int kLanes = 8;
constexpr int64_t kKeyBlock = 8;     // key rows converted and scored at once
constexpr int64_t kValueBlock = 32;  // value rows converted at once

int64_t round8(int64_t n) { return (n + 7) / 8 * 8; }

// Converts rows [p, p + n) of the K (or V) blocks to fp32 rows of `dim` floats.
void convert_rows(const uint16_t* base, const PagedKv& kv, int64_t dim, int64_t p, int64_t n,
                  float* out) {
  for (int64_t j = 0; j < n; ++j) {
    const int64_t pos = p + j;
    const uint16_t* row =
        base + kv.page_table[pos / kv.page_size] * kv.page_stride + (pos % kv.page_size) * dim;
    int64_t e = 0;
    for (; e + 8 <= dim; e += 8)
      _mm256_storeu_ps(out + j * dim + e,
                       _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + e))));
    for (; e < dim; ++e) {
      const __m128 one = _mm_cvtph_ps(_mm_cvtsi32_si128(row[e]));
      out[j * dim + e] = _mm_cvtss_f32(one);
    }
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

}  // namespace

void paged_attention(const AttentionShape& shape, const PagedKv& kv,
                     const AttentionQueries& queries, float* scratch) {
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

  float* qT = scratch;                      // [D][8]
  float* scores = qT + round8(D * kLanes);  // [p1 - p0 + 1][8]
  float* kf = scores + round8((p1 + 1) * kLanes);
  float* vf = kf + round8(kKeyBlock * D);
  float* oT = vf + round8(kValueBlock * DV);  // [DV][8]
  for (int64_t e = 0; e < D; ++e)
    for (int i = 0; i < kLanes; ++i) qT[e * kLanes + i] = i < n ? queries.q[i][e] : 0.0f;

  // Scores, -inf where a lane does not see the position; the running max of each lane.
  const __m256 scale = _mm256_set1_ps(shape.scale);
  const __m256 neg_inf = _mm256_set1_ps(-INFINITY);
  __m256 m = neg_inf;
  for (int64_t pb = p0; pb <= p1; pb += kKeyBlock) {
    const int64_t np = std::min(kKeyBlock, p1 - pb + 1);
    convert_rows(kv.keys, kv, D, pb, np, kf);
    for (int64_t j = np; j < kKeyBlock; ++j)
      for (int64_t e = 0; e < D; ++e) kf[j * D + e] = 0.0f;
    __m256 acc[kKeyBlock];
    for (auto& a : acc) a = _mm256_setzero_ps();
    for (int64_t e = 0; e < D; ++e) {
      const __m256 qe = _mm256_load_ps(qT + e * kLanes);
      for (int j = 0; j < kKeyBlock; ++j)
        acc[j] = _mm256_fmadd_ps(qe, _mm256_broadcast_ss(kf + j * D + e), acc[j]);
    }
    for (int64_t j = 0; j < np; ++j) {
      const __m256 s =
          _mm256_blendv_ps(neg_inf, _mm256_mul_ps(acc[j], scale), visible(first, last, pb + j));
      _mm256_store_ps(scores + (pb + j - p0) * kLanes, s);
      m = _mm256_max_ps(m, s);
    }
  }

  // Weights and their double sums in increasing position (an unseen position adds +0).
  __m256d sum_lo = _mm256_setzero_pd(), sum_hi = _mm256_setzero_pd();
  for (int64_t p = p0; p <= p1; ++p) {
    float* s = scores + (p - p0) * kLanes;
    const __m256 w = exp8(_mm256_sub_ps(_mm256_load_ps(s), m));
    _mm256_store_ps(s, w);
    sum_lo = _mm256_add_pd(sum_lo, _mm256_cvtps_pd(_mm256_castps256_ps128(w)));
    sum_hi = _mm256_add_pd(sum_hi, _mm256_cvtps_pd(_mm256_extractf128_ps(w, 1)));
  }

  // Weighted values, 8 output dimensions at a time over blocks of value rows.
  for (int64_t d = 0; d < DV * kLanes; ++d) oT[d] = 0.0f;
  for (int64_t pb = p0; pb <= p1; pb += kValueBlock) {
    const int64_t np = std::min(kValueBlock, p1 - pb + 1);
    convert_rows(kv.values, kv, DV, pb, np, vf);
    for (int64_t dc = 0; dc < DV; dc += 8) {
      const int64_t width = std::min<int64_t>(8, DV - dc);
      __m256 acc[8];
      for (int u = 0; u < width; ++u) acc[u] = _mm256_load_ps(oT + (dc + u) * kLanes);
      for (int64_t j = 0; j < np; ++j) {
        const int64_t p = pb + j;
        const __m256 w = _mm256_load_ps(scores + (p - p0) * kLanes);
        const float* v = vf + j * DV + dc;
        if (p >= all_from && p <= all_to) {
          for (int u = 0; u < width; ++u)
            acc[u] = _mm256_fmadd_ps(w, _mm256_broadcast_ss(v + u), acc[u]);
        } else {
          const __m256 seen = visible(first, last, p);
          for (int u = 0; u < width; ++u)
            acc[u] = _mm256_blendv_ps(acc[u],
                                      _mm256_fmadd_ps(w, _mm256_broadcast_ss(v + u), acc[u]), seen);
        }
      }
      for (int u = 0; u < width; ++u) _mm256_store_ps(oT + (dc + u) * kLanes, acc[u]);
    }
  }

  // out = o * float(1 / sum), lane by lane.
  const __m128 inv_lo = _mm256_cvtpd_ps(_mm256_div_pd(_mm256_set1_pd(1.0), sum_lo));
  const __m128 inv_hi = _mm256_cvtpd_ps(_mm256_div_pd(_mm256_set1_pd(1.0), sum_hi));
  const __m256 inv = _mm256_insertf128_ps(_mm256_castps128_ps256(inv_lo), inv_hi, 1);
  alignas(32) float lane[kLanes];
  for (int64_t d = 0; d < DV; ++d) {
    _mm256_store_ps(lane, _mm256_mul_ps(_mm256_load_ps(oT + d * kLanes), inv));
    for (int64_t i = 0; i < n; ++i) queries.out[i][d] = lane[i];
  }
}

}  // namespace drift::kernels::avx2
