// Internal: the steps of decode attention in parts (paged_attention.h) of each SIMD path, defined
// in paged_attention_avx2.cc and paged_attention_avx512.cc and called by paged_attention.cc.
// Scores and weights are rows of `span` floats per query from position `base`; a step covers the
// positions [p_begin, p_end) (columns [j_begin, j_end)) or the value dimensions [d_begin, d_end).
#pragma once

#include <cstdint>

#include "kernels/kv_format.h"
#include "kernels/paged_attention.h"

namespace drift::kernels {
namespace avx2 {
void decode_scores(const AttentionShape& shape, const PagedKv& kv, const AttentionQueries& queries,
                   float* scores, int64_t span, int64_t base, int64_t p_begin, int64_t p_end,
                   float* max_out);
void decode_weights(KvFormat format, int64_t n, float* scores, int64_t span, int64_t j_begin,
                    int64_t j_end, const float* m_sink);
// acc: [4][(head_dim_v + 7) / 8 * 8] floats of the caller's.
void decode_values(const AttentionShape& shape, const PagedKv& kv, const AttentionQueries& queries,
                   const float* scores, int64_t span, int64_t base, int64_t d_begin, int64_t d_end,
                   const double* sum, float* acc);
}  // namespace avx2
namespace avx512 {
void decode_scores(const AttentionShape& shape, const PagedKv& kv, const AttentionQueries& queries,
                   float* scores, int64_t span, int64_t base, int64_t p_begin, int64_t p_end,
                   float* max_out);
void decode_weights(KvFormat format, int64_t n, float* scores, int64_t span, int64_t j_begin,
                    int64_t j_end, const float* m_sink);
void decode_values(const AttentionShape& shape, const PagedKv& kv, const AttentionQueries& queries,
                   const float* scores, int64_t span, int64_t base, int64_t d_begin, int64_t d_end,
                   const double* sum);
}  // namespace avx512
}  // namespace drift::kernels
