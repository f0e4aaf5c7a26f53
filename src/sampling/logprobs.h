// Log-probabilities for the API's `logprobs`: log-softmax of a row of raw logits at the sampled
// token, and the most likely alternatives. No allocation (the result is fixed-size).
#pragma once

#include <cstdint>
#include <span>

#include "util/sampling_params.h"

namespace drift {

// `top_n` in [0, kMaxTopLogprobs]; `token` must index `logits`. Sums in double, so the result is
// exact to float precision for any vocabulary size.
void compute_token_logprobs(std::span<const float> logits, int32_t token, int32_t top_n,
                            TokenLogprobs& out);

}  // namespace drift
