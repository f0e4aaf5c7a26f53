// Paged attention: the scalar reference (one query at a time, the canonical order written out)
// and the dispatch to the SIMD version (AVX2; the AVX-512 ISA uses it too).
#include "kernels/paged_attention.h"

#include <algorithm>
#include <cmath>

#include "kernels/attention_metric.h"
#include "kernels/attention_sinks.h"
#include "kernels/decode_steps.h"
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

// ---- Decode attention in parts.
namespace drift::kernels {
namespace {

constexpr int64_t kDecodePositionUnit = 16;  // positions per share unit (AVX-512's blocks)
constexpr int64_t kDecodeDimensionUnit = 32;

struct Share {
  int64_t begin, end;
};
Share part_of(int64_t units, int part, int parts) {
  return {units * part / parts, units * (part + 1) / parts};
}
// The private scratch's parts: the queries in the bf16 order, then the AVX2 values' accumulators.
int64_t round16(int64_t n) { return (n + 15) / 16 * 16; }
float* align64(float* p) {
  return reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(p) + 63) / 64 * 64);
}
int64_t decode_base(const AttentionQueries& queries) {
  return queries.first[0] / kDecodePositionUnit * kDecodePositionUnit;
}

// The scalar reference's steps (attend_one's loops over a share).
void scalar_scores(const AttentionShape& shape, const PagedKv& kv, const AttentionQueries& queries,
                   float* scores, int64_t span, int64_t base, int64_t p_begin, int64_t p_end,
                   float* max_out) {
  const bool bf16 = attends_in_bf16(kv.format);
  for (int64_t i = 0; i < queries.n; ++i) {
    float m = -INFINITY;
    for (int64_t p = p_begin; p < p_end; ++p) {
      float& s = scores[i * span + (p - base)];
      if (p < queries.first[0] || p > queries.last[0]) {
        s = -INFINITY;
        continue;
      }
      const uint8_t* k = key_block(kv, p);
      const int64_t slot = p % kv.page_size;
      float acc = 0.0f;
      for (int64_t t = 0; t < shape.head_dim; ++t) {
        const int64_t e = bf16 ? pair_swapped(t, shape.head_dim) : t;
        acc = std::fma(queries.q[i][e],
                       kv_load_key(kv.format, k, shape.head_dim, kv.page_size, slot, e), acc);
      }
      s = acc * shape.scale;
      m = std::max(m, s);
    }
    max_out[i] = m;
  }
}

void scalar_weights(KvFormat format, int64_t n, float* scores, int64_t span, int64_t j_begin,
                    int64_t j_end, const float* m_sink) {
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = j_begin; j < j_end; ++j) {
      float& s = scores[i * span + j];
      s = exp_approx(s - m_sink[i]);
      if (attends_in_bf16(format)) s = bf16_operand(s);
    }
}

void scalar_values(const AttentionShape& shape, const PagedKv& kv, const AttentionQueries& queries,
                   const float* scores, int64_t span, int64_t base, int64_t d_begin, int64_t d_end,
                   const double* sum) {
  const bool bf16 = attends_in_bf16(kv.format);
  const int64_t first = queries.first[0], last = queries.last[0];
  for (int64_t q = 0; q < queries.n; ++q) {
    float* out = queries.out[q];
    for (int64_t d = d_begin; d < d_end; ++d) out[d] = 0.0f;
    // In the bf16 order, i runs over whole pairs and p = i ^ 1 skips what is out of range.
    for (int64_t i = bf16 ? first & ~int64_t{1} : first; i <= (bf16 ? last | 1 : last); ++i) {
      const int64_t p = bf16 ? i ^ 1 : i;
      if (p < first || p > last) continue;
      const uint8_t* v = value_block(kv, p);
      const int64_t slot = p % kv.page_size;
      const float w = scores[q * span + (p - base)];
      for (int64_t d = d_begin; d < d_end; ++d)
        out[d] = std::fma(w, kv_load_value(kv.format, v, shape.head_dim_v, kv.page_size, slot, d),
                          out[d]);
    }
    const float inv = static_cast<float>(1.0 / sum[q]);
    for (int64_t d = d_begin; d < d_end; ++d) out[d] = out[d] * inv;
  }
}

// The double sums of Q queries' weights (rows of `span`) in increasing position, their chains
// interleaved in registers: with the query count known only at run time the sums lived in memory,
// a store-to-load forward in every add's chain (~11% of a SmolLM2 decode after 8K positions).
template <int Q>
void weight_sums(const float* weights, int64_t span, double* sum) {
  double s[Q] = {};
  for (int64_t j = 0; j < span; ++j)
    for (int i = 0; i < Q; ++i) s[i] += static_cast<double>(weights[i * span + j]);
  for (int i = 0; i < Q; ++i) sum[i] = s[i];
}

// The softmax max of each query: every part's max of its scores, and the sink.
void softmax_max(const AttentionQueries& queries, const DecodeParts& parts, float* m_sink) {
  for (int64_t i = 0; i < queries.n; ++i) {
    float m = -INFINITY;
    for (int part = 0; part < parts.parts; ++part)
      m = std::max(m, parts.maxima[part * kAttentionLanes + i]);
    m_sink[i] = max_with_sink(m, query_sink(queries, i));
  }
}

}  // namespace

bool decode_splits(const PagedKv& kv, const AttentionQueries& queries) {
  if (queries.n < 1 || queries.n > kDecodeMaxQueries || kv.page_size % kDecodePositionUnit != 0)
    return false;
  for (int64_t i = 1; i < queries.n; ++i)
    if (queries.first[i] != queries.first[0] || queries.last[i] != queries.last[0]) return false;
  return true;
}

int64_t decode_span(int64_t first, int64_t last) {
  const int64_t base = first / kDecodePositionUnit * kDecodePositionUnit;
  return (last + 1 - base + kDecodePositionUnit - 1) / kDecodePositionUnit * kDecodePositionUnit;
}

int64_t decode_scores_floats(int64_t max_last) {
  return kDecodeMaxQueries * decode_span(0, max_last);
}

int64_t decode_private_floats(const AttentionShape& shape) {
  return round16(8 * shape.head_dim) + round16(4 * ((shape.head_dim_v + 7) / 8 * 8)) + 16;
}

void decode_scores(Isa isa, const AttentionShape& shape, const PagedKv& kv,
                   const AttentionQueries& queries, const DecodeParts& parts, int part,
                   float* private_scratch) {
  const int64_t base = decode_base(queries);
  const int64_t span = decode_span(queries.first[0], queries.last[0]);
  const Share units = part_of(span / kDecodePositionUnit, part, parts.parts);
  const int64_t p_begin = base + units.begin * kDecodePositionUnit;
  const int64_t p_end = base + units.end * kDecodePositionUnit;
  // The queries as paged_attention prepares them: rotated for a rotated format, q' of the bf16
  // order for bf16.
  AttentionQueries prepared = queries;
  if (kv_format_rotated(kv.format, shape.head_dim)) {
    float* q = align64(private_scratch);
    for (int64_t i = 0; i < queries.n; ++i, q += shape.head_dim) {
      std::copy(queries.q[i], queries.q[i] + shape.head_dim, q);
      kv_rotate(q, shape.head_dim);
      prepared.q[i] = q;
    }
  } else if (attends_in_bf16(kv.format)) {
    float* q = align64(private_scratch);
    for (int64_t i = 0; i < queries.n; ++i, q += shape.head_dim) {
      if (isa == Isa::kScalar) {
        for (int64_t e = 0; e < shape.head_dim; ++e) q[e] = bf16_operand(queries.q[i][e]);
      } else {
        avx2::bf16_operands(queries.q[i], q, shape.head_dim);
      }
      prepared.q[i] = q;
    }
  }
  float* max_out = parts.maxima + part * kAttentionLanes;
  if (isa == Isa::kAvx512) {
    avx512::decode_scores(shape, kv, prepared, parts.scores, span, base, p_begin, p_end, max_out);
  } else if (isa == Isa::kAvx2) {
    avx2::decode_scores(shape, kv, prepared, parts.scores, span, base, p_begin, p_end, max_out);
  } else {
    scalar_scores(shape, kv, prepared, parts.scores, span, base, p_begin, p_end, max_out);
  }
  // Columns past the last position that no block of the path wrote (AVX2's blocks are of 8)
  // weigh nothing.
  for (int64_t i = 0; i < queries.n; ++i)
    for (int64_t p = std::max(p_begin, queries.last[0] + 1); p < p_end; ++p)
      parts.scores[i * span + (p - base)] = -INFINITY;
}

void decode_weights(Isa isa, const PagedKv& kv, const AttentionQueries& queries,
                    const DecodeParts& parts, int part) {
  const int64_t span = decode_span(queries.first[0], queries.last[0]);
  const Share units = part_of(span / kDecodePositionUnit, part, parts.parts);
  float m_sink[kAttentionLanes];
  softmax_max(queries, parts, m_sink);
  const int64_t j_begin = units.begin * kDecodePositionUnit,
                j_end = units.end * kDecodePositionUnit;
  if (isa == Isa::kAvx512)
    return avx512::decode_weights(kv.format, queries.n, parts.scores, span, j_begin, j_end, m_sink);
  if (isa == Isa::kAvx2)
    return avx2::decode_weights(kv.format, queries.n, parts.scores, span, j_begin, j_end, m_sink);
  scalar_weights(kv.format, queries.n, parts.scores, span, j_begin, j_end, m_sink);
}

DimensionShare decode_value_share(int64_t heads, int64_t head, int64_t head_dim_v, int part,
                                  int parts) {
  const int64_t per_head = (head_dim_v + kDecodeDimensionUnit - 1) / kDecodeDimensionUnit;
  const Share units = part_of(heads * per_head, part, parts);
  const int64_t begin = std::clamp(units.begin - head * per_head, int64_t{0}, per_head);
  const int64_t end = std::clamp(units.end - head * per_head, int64_t{0}, per_head);
  return {std::min(head_dim_v, begin * kDecodeDimensionUnit),
          std::min(head_dim_v, end * kDecodeDimensionUnit)};
}

void decode_values(Isa isa, const AttentionShape& shape, const PagedKv& kv,
                   const AttentionQueries& queries, const DecodeParts& parts, int64_t d_begin,
                   int64_t d_end, float* private_scratch) {
  if (d_begin >= d_end) return;
  const int64_t base = decode_base(queries);
  const int64_t span = decode_span(queries.first[0], queries.last[0]);
  float m_sink[kAttentionLanes];
  softmax_max(queries, parts, m_sink);
  // Every part adds the weights' double sums itself, in increasing position, then the sink's.
  double sum[kAttentionLanes] = {};
  for (int64_t i = 0; i < queries.n; i += 4) {
    const float* weights = parts.scores + i * span;
    switch (std::min<int64_t>(4, queries.n - i)) {
      case 1:
        weight_sums<1>(weights, span, sum + i);
        break;
      case 2:
        weight_sums<2>(weights, span, sum + i);
        break;
      case 3:
        weight_sums<3>(weights, span, sum + i);
        break;
      default:
        weight_sums<4>(weights, span, sum + i);
    }
  }
  for (int64_t i = 0; i < queries.n; ++i) sum[i] += sink_weight(query_sink(queries, i), m_sink[i]);
  const int64_t DV = shape.head_dim_v;
  if (isa == Isa::kAvx512) {
    avx512::decode_values(shape, kv, queries, parts.scores, span, base, d_begin, d_end, sum);
  } else if (isa == Isa::kAvx2) {
    float* acc = align64(private_scratch) + round16(8 * shape.head_dim);
    avx2::decode_values(shape, kv, queries, parts.scores, span, base, d_begin, d_end, sum, acc);
  } else {
    scalar_values(shape, kv, queries, parts.scores, span, base, d_begin, d_end, sum);
  }
  // A rotated format's outputs are rotated back by groups of kKvGroup dimensions, which the
  // parts' shares of whole units hold.
  if (kv_format_rotated(kv.format, DV))
    for (int64_t i = 0; i < queries.n; ++i) kv_rotate(queries.out[i] + d_begin, d_end - d_begin);
  if (d_begin == 0)  // KV-Compress's metric: one share adds it, as one call would
    for (int64_t i = 0; i < queries.n; ++i)
      if (asks_metric(queries.metric, queries.metric_lanes, i))
        add_squared_weights(parts.scores + i * span, 1, base, queries.first[0], queries.last[0],
                            static_cast<float>(1.0 / sum[i]), queries.metric);
}

}  // namespace drift::kernels
