// Pooling of an embedding request's final hidden states into one vector, chunk by chunk: a long
// prompt is prefilled over several steps, so the executor folds each chunk's rows into the
// sequence's vector (StepItem::embedding) and finishes it with the chunk that ends the prompt.
//
// The result is batch-invariant: the rows come from the forward pass's per-token arithmetic, and
// the mean adds them one token after another in position order, so neither the other sequences of
// a step nor where the chunks begin change a bit of it.
#pragma once

#include <cstdint>
#include <span>

#include "scheduler/pooling_mode.h"

namespace drift {

// Which of a chunk's tokens a pooling needs: [begin, begin + count), counted from the chunk's
// first token at position `start_position`; the chunk ends the prompt when `completes` is true.
struct PooledRows {
  int64_t begin = 0;
  int64_t count = 0;
};
PooledRows pooled_rows(PoolingMode mode, int64_t start_position, int64_t num_tokens,
                       bool completes);

// Folds `rows` ([count][dim], the rows pooled_rows asked for) into `embedding` ([dim]); a chunk at
// position 0 starts it afresh (mean: the running sum; cls: the first token's row; last: nothing
// until the last chunk, which copies its final row).
void pool_chunk(PoolingMode mode, int64_t start_position, std::span<const float> rows,
                std::span<float> embedding);

// After the last chunk: the mean divides the sum by the prompt's `num_tokens`; then every mode
// scales the vector to unit L2 norm (as vLLM's embeddings are by default; a zero vector stays
// zero).
void finish_embedding(PoolingMode mode, int64_t num_tokens, std::span<float> embedding);

}  // namespace drift
