// Internal: attention sinks in the paged attention paths (paged_attention.h's canonical order).
// A sink is a logit with no value: it raises the softmax's max and adds its weight to the sum,
// after the positions' weights. Helpers are `static inline` (see the note in format.h).
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/exp_approx.h"
#include "kernels/paged_attention.h"

namespace drift::kernels {

// The sinks of a register of `lanes` queries: query_sink for the block's queries, -inf for the
// unused lanes (their weight is then +0).
static inline void sink_lanes(const AttentionQueries& queries, int64_t lanes, float* out) {
  for (int64_t i = 0; i < lanes; ++i) out[i] = i < queries.n ? query_sink(queries, i) : -INFINITY;
}

// The softmax max of a query whose positions' scores peak at `scores_max`.
static inline float max_with_sink(float scores_max, float sink) {
  return std::max(scores_max, sink);
}

// The sink's term of the softmax sum, added after the positions' weights.
static inline double sink_weight(float sink, float m) {
  return static_cast<double>(exp_approx(sink - m));
}

}  // namespace drift::kernels
