// Routing of a mixture-of-experts layer: which k experts each token goes to and with what weight
// (from the router's logits), and the grouping of a step's (token, expert) assignments by expert,
// so that each expert's weights are read once per step for all of its tokens.
#pragma once

#include <cstdint>
#include <span>

#include "model/model_config.h"

namespace drift {

// One token's routing, as llama.cpp's build_moe_ffn computes it: `experts[0..k)` the chosen
// expert ids in descending order of the score they were chosen by (ties: the lower id first;
// llama.cpp's std::sort leaves exact ties in no particular order),
// `weights[0..k)` their weights.
//   kSoftmaxThenTopK: p = softmax(logits) over all experts; the k largest p; weights = those p,
//                     divided by their sum (clamped below at 2^-14, as llama.cpp) if `normalize`.
//   kTopKThenSoftmax: the k largest logits; weights = softmax over those k logits.
// The softmax is ggml's: exp(x - max) in float, the sum in double, then each times 1 / sum.
void route_token(const float* logits, int64_t n_expert, int64_t k, ExpertGating gating,
                 bool normalize, int32_t* experts, float* weights);

// The assignments of a step grouped by expert, a counting sort: assignment a = t * k + i is token
// t's i-th expert. After group_by_expert, expert e's assignments are
// order[offsets[e] .. offsets[e + 1]), in increasing token order, and rank[a] is a's index in
// `order` (where its rows sit in the expert-ordered buffers).
struct ExpertGroups {
  std::span<int32_t> offsets;  // [n_expert + 1]
  std::span<int32_t> order;    // [n_assignments]
  std::span<int32_t> rank;     // [n_assignments]
};
// experts: [n_assignments] expert ids in [0, n_expert) (route_token's output for every token).
void group_by_expert(std::span<const int32_t> experts, int64_t n_expert, ExpertGroups groups);

}  // namespace drift
