#include "sampling/logprobs.h"

#include <algorithm>
#include <cmath>

namespace drift {

void compute_token_logprobs(std::span<const float> logits, int32_t token, int32_t top_n,
                            TokenLogprobs& out) {
  top_n = std::clamp(top_n, 0, std::min<int32_t>(kMaxTopLogprobs, int32_t(logits.size())));
  float max = -INFINITY;
  for (float x : logits) max = std::max(max, x);
  double sum = 0.0;
  for (float x : logits) sum += std::exp(double(x) - double(max));
  const double log_z = double(max) + std::log(sum);
  out.logprob = float(double(logits[size_t(token)]) - log_z);

  // Top-n by insertion into a sorted prefix: n <= 20, one pass over the vocabulary.
  out.num_top = 0;
  for (int32_t id = 0; id < int32_t(logits.size()) && top_n > 0; ++id) {
    const float x = logits[size_t(id)];
    if (out.num_top == top_n && !(x > out.top_logprobs[size_t(top_n - 1)])) continue;
    int32_t pos = std::min(out.num_top, top_n - 1);
    while (pos > 0 && x > out.top_logprobs[size_t(pos - 1)]) {
      out.top_logprobs[size_t(pos)] = out.top_logprobs[size_t(pos - 1)];
      out.top_ids[size_t(pos)] = out.top_ids[size_t(pos - 1)];
      --pos;
    }
    out.top_logprobs[size_t(pos)] = x;
    out.top_ids[size_t(pos)] = id;
    if (out.num_top < top_n) ++out.num_top;
  }
  for (int32_t i = 0; i < out.num_top; ++i)
    out.top_logprobs[size_t(i)] = float(double(out.top_logprobs[size_t(i)]) - log_z);
}

}  // namespace drift
