// Paged attention: the scalar reference (one query at a time, the canonical order written out)
// and the dispatch to the SIMD version (AVX2; the AVX-512 ISA uses it too).
#include "kernels/paged_attention.h"

#include <algorithm>
#include <cmath>

#include "kernels/attention_metric.h"
#include "kernels/exp_approx.h"
#include "kernels/fp16.h"
#include "kernels/kv_format.h"

namespace drift::kernels {
namespace avx2 {
void paged_attention(const AttentionShape& shape, const PagedKv& kv,
                     const AttentionQueries& queries, float* scratch, ValueRowCache* cache);
void bf16_operands(const float* x, float* y, int64_t n);
}  // namespace avx2
namespace avx512 {
void paged_attention(const AttentionShape& shape, const PagedKv& kv,
                     const AttentionQueries& queries, float* scratch, ValueRowCache* cache);
}  // namespace avx512

namespace {

// The key and value blocks holding position p, and p's slot in them.
const uint8_t* key_block(const PagedKv& kv, int64_t p) {
  return kv.keys + kv.page_table[p / kv.page_size] * kv.page_stride;
}
const uint8_t* value_block(const PagedKv& kv, int64_t p) {
  return kv.values + kv.page_table[p / kv.page_size] * kv.page_stride;
}

// One query; `metric` non-null: its squared probabilities are added there too. `sink`: its sink
// logit (-inf: none).
// (q is already q' in the bf16 order.)
void attend_one(const AttentionShape& shape, const PagedKv& kv, const float* q, int64_t first,
                int64_t last, float sink, float* out, float* s, float* metric) {
  const bool bf16 = attends_in_bf16(kv.format);
  float m = sink;
  for (int64_t p = first; p <= last; ++p) {
    const uint8_t* k = key_block(kv, p);
    const int64_t slot = p % kv.page_size;
    float acc = 0.0f;
    for (int64_t i = 0; i < shape.head_dim; ++i) {
      const int64_t e = bf16 ? pair_swapped(i, shape.head_dim) : i;
      acc = std::fma(q[e], kv_load_key(kv.format, k, shape.head_dim, kv.page_size, slot, e), acc);
    }
    s[p - first] = acc * shape.scale;
    m = std::max(m, s[p - first]);
  }
  double sum = 0.0;
  for (int64_t p = first; p <= last; ++p) {
    s[p - first] = exp_approx(s[p - first] - m);
    if (bf16) s[p - first] = bf16_operand(s[p - first]);
    sum += static_cast<double>(s[p - first]);
  }
  sum += static_cast<double>(exp_approx(sink - m));
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t d = 0; d < shape.head_dim_v; ++d) out[d] = 0.0f;
  // In the bf16 order, i runs over whole pairs and p = i ^ 1 skips what is out of [first, last].
  for (int64_t i = bf16 ? first & ~int64_t{1} : first; i <= (bf16 ? last | 1 : last); ++i) {
    const int64_t p = bf16 ? i ^ 1 : i;
    if (p < first || p > last) continue;
    const uint8_t* v = value_block(kv, p);
    const int64_t slot = p % kv.page_size;
    for (int64_t d = 0; d < shape.head_dim_v; ++d)
      out[d] =
          std::fma(s[p - first],
                   kv_load_value(kv.format, v, shape.head_dim_v, kv.page_size, slot, d), out[d]);
  }
  for (int64_t d = 0; d < shape.head_dim_v; ++d) out[d] = out[d] * inv;
  if (metric != nullptr) add_squared_weights(s, 1, first, first, last, inv, metric);
}

// Floats of scratch the attention paths themselves use (after the rotated queries).
int64_t inner_scratch_floats(const AttentionShape& shape, int64_t max_last) {
  const int64_t lanes = kAttentionLanes;
  // qT, the scores of every position (from the 8-aligned start, for up to `lanes` queries),
  // 8 converted key columns, 32 converted value rows, oT; each part a multiple of 16 floats,
  // plus 16 to align the start to 64 bytes.
  auto round16 = [](int64_t n) { return (n + 15) / 16 * 16; };
  return round16(shape.head_dim * lanes) + round16(max_last + 8) * lanes +
         round16(8 * shape.head_dim) + round16(32 * shape.head_dim_v) +
         round16(shape.head_dim_v * lanes) + 16;
}

void attend_block(Isa isa, const AttentionShape& shape, const PagedKv& kv,
                  const AttentionQueries& queries, float* scratch, ValueRowCache* cache) {
  if (isa == Isa::kAvx512 && kv.page_size % 8 == 0)
    return avx512::paged_attention(shape, kv, queries, scratch, cache);
  if (isa == Isa::kAvx2 && kv.page_size % 8 == 0)
    return avx2::paged_attention(shape, kv, queries, scratch, cache);
  for (int64_t i = 0; i < queries.n; ++i)
    attend_one(shape, kv, queries.q[i], queries.first[i], queries.last[i], query_sink(queries, i),
               queries.out[i], scratch,
               asks_metric(queries.metric, queries.metric_lanes, i) ? queries.metric : nullptr);
}

// Rotated (or bf16 order) queries, kAttentionLanes x head_dim floats, come first in the scratch (a
// multiple of 16 floats, so the paths' part keeps the caller's alignment).
int64_t rotated_query_floats(const AttentionShape& shape) {
  return (kAttentionLanes * shape.head_dim + 15) / 16 * 16;
}

}  // namespace

int64_t paged_attention_scratch_floats(const AttentionShape& shape, int64_t max_last) {
  return rotated_query_floats(shape) + inner_scratch_floats(shape, max_last);
}

bool ValueRowCache::prepare(const PagedKv& kv, int64_t p0, int64_t p1, int64_t* missing,
                            bool as_pairs) {
  if (rows == nullptr || p1 - p0 + 1 > capacity) return false;
  const bool same_kv = values == kv.values && page_table == kv.page_table && format == kv.format &&
                       pairs == as_pairs;
  if (!same_kv || p0 < begin || p0 > end || p1 + 1 - begin > capacity) {
    values = kv.values;
    page_table = kv.page_table;
    format = kv.format;
    pairs = as_pairs;
    begin = end = p0;
  }
  *missing = end;
  end = std::max(end, p1 + 1);
  return true;
}

int64_t paged_attention_value_cache_rows(const AttentionShape& shape, int64_t max_last) {
  constexpr int64_t kMaxBytes = int64_t{4} << 20;
  return std::min(max_last + 1, kMaxBytes / (4 * shape.head_dim_v));
}

// A rotated format (kv_format.h) stores H k and H v: attention runs on H q and gives H o, which
// is rotated back (H H = I). Other formats go straight to the paths.
void paged_attention(Isa isa, const AttentionShape& shape, const PagedKv& kv,
                     const AttentionQueries& queries, float* scratch, ValueRowCache* cache) {
  float* inner = scratch + rotated_query_floats(shape);
  AttentionQueries rotated = queries;
  if (kv_format_rotated(kv.format, shape.head_dim)) {
    for (int64_t i = 0; i < queries.n; ++i) {
      float* q = scratch + i * shape.head_dim;
      std::copy(queries.q[i], queries.q[i] + shape.head_dim, q);
      kv_rotate(q, shape.head_dim);
      rotated.q[i] = q;
    }
  } else if (attends_in_bf16(kv.format)) {  // q' of the bf16 order, for every path
    for (int64_t i = 0; i < queries.n; ++i) {
      float* q = scratch + i * shape.head_dim;
      if (isa == Isa::kScalar) {
        for (int64_t e = 0; e < shape.head_dim; ++e) q[e] = bf16_operand(queries.q[i][e]);
      } else {  // (element by element here, ~1.5% of a prefill)
        avx2::bf16_operands(queries.q[i], q, shape.head_dim);
      }
      rotated.q[i] = q;
    }
  }
  attend_block(isa, shape, kv, rotated, inner, cache);
  if (kv_format_rotated(kv.format, shape.head_dim_v))
    for (int64_t i = 0; i < queries.n; ++i) kv_rotate(queries.out[i], shape.head_dim_v);
}

}  // namespace drift::kernels
