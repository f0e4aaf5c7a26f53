// KV-Compress's eviction metric, accumulated by paged attention (kernels/paged_attention.h): each
// query of a block that asks for it adds the square of the attention probability it gave every
// position it sees to that position's sum. The probabilities are the weights the kernel has just
// computed in its scores scratch times the query's 1 / sum, so the metric costs a pass over those
// scores, none over the K/V cache.
//
// CANONICAL ORDER (every ISA bitwise alike): for each asking query i of a block in increasing i,
// for p in [first_i, last_i]:
//   a      = w_i[p] * inv_i               (w, inv as paged_attention.h defines them)
//   sum[p] = fma(a, a, sum[p])
// A position's sum is one chain over the queries in block order; positions are independent.
#pragma once

#include <cmath>
#include <cstdint>

namespace drift::kernels {

// sum[p] += (w[(p - base) * stride] * inv)^2 for p in [first, last] (first >= base), in the
// canonical order above: one query's contribution.
inline void add_squared_weights(const float* w, int64_t stride, int64_t base, int64_t first,
                                int64_t last, float inv, float* sum) {
  for (int64_t p = first; p <= last; ++p) {
    const float a = w[(p - base) * stride] * inv;
    sum[p] = std::fma(a, a, sum[p]);
  }
}

// Whether query `i` of a block asks for the metric.
inline bool asks_metric(const float* metric, uint32_t lanes, int64_t i) {
  return metric != nullptr && ((lanes >> i) & 1u) != 0;
}

}  // namespace drift::kernels
