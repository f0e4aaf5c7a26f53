#include "executor/pooling.h"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace drift {

PooledRows pooled_rows(PoolingMode mode, int64_t start_position, int64_t num_tokens,
                       bool completes) {
  switch (mode) {
    case PoolingMode::kNone:
      return {};
    case PoolingMode::kMean:
      return {0, num_tokens};
    case PoolingMode::kLast:
      return completes ? PooledRows{num_tokens - 1, 1} : PooledRows{};
    case PoolingMode::kCls:
      return start_position == 0 ? PooledRows{0, 1} : PooledRows{};
  }
  return {};
}

void pool_chunk(PoolingMode mode, int64_t start_position, std::span<const float> rows,
                std::span<float> embedding) {
  const size_t dim = embedding.size();
  assert(rows.size() % dim == 0);
  const size_t count = rows.size() / dim;
  if (mode == PoolingMode::kMean) {
    if (start_position == 0) std::fill(embedding.begin(), embedding.end(), 0.0f);
    for (size_t r = 0; r < count; ++r)
      for (size_t j = 0; j < dim; ++j) embedding[j] += rows[r * dim + j];
    return;
  }
  // cls and last keep one row: the only one they asked for.
  if (count == 1) std::copy(rows.begin(), rows.end(), embedding.begin());
}

void finish_embedding(PoolingMode mode, int64_t num_tokens, std::span<float> embedding) {
  if (mode == PoolingMode::kMean && num_tokens > 0) {
    const float inverse = 1.0f / float(num_tokens);
    for (float& x : embedding) x *= inverse;
  }
  double squares = 0;  // summed in double, as llama.cpp normalises its embeddings
  for (float x : embedding) squares += double(x) * double(x);
  if (squares == 0) return;
  const float scale = float(1.0 / std::sqrt(squares));
  for (float& x : embedding) x *= scale;
}

}  // namespace drift
