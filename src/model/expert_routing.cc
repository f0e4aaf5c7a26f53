#include "model/expert_routing.h"

#include <algorithm>
#include <cmath>

namespace drift {
namespace {

// ggml_soft_max_f32 on one row: y = exp(x - max) / sum, the sum accumulated in double.
void softmax_in_place(float* x, int64_t n) {
  float max = x[0];
  for (int64_t i = 1; i < n; ++i) max = std::max(max, x[i]);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += x[i];
  }
  const float scale = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= scale;
}

// The indices of the k largest scores, largest first (ggml_argsort_top_k's order; exact ties,
// which its std::sort leaves in no particular order, go to the lower index). O(n log k) for 128
// experts and top 8, per token and layer.
void top_k(const float* scores, int64_t n, int64_t k, int32_t* out) {
  int32_t index[1024];  // n <= 1024 (model_config.cc)
  for (int64_t e = 0; e < n; ++e) index[e] = static_cast<int32_t>(e);
  std::partial_sort(index, index + k, index + n, [scores](int32_t a, int32_t b) {
    return scores[a] > scores[b] || (scores[a] == scores[b] && a < b);
  });
  std::copy(index, index + k, out);
}

}  // namespace

void route_token(const float* logits, int64_t n_expert, int64_t k, ExpertGating gating,
                 bool normalize, int32_t* experts, float* weights) {
  // n_expert <= 1024 (model_config.cc), so the probabilities fit on the stack.
  float probs[1024];
  std::copy(logits, logits + n_expert, probs);
  if (gating == ExpertGating::kSoftmaxThenTopK) {
    softmax_in_place(probs, n_expert);
    top_k(probs, n_expert, k, experts);
    for (int64_t i = 0; i < k; ++i) weights[i] = probs[experts[i]];
    if (normalize) {
      float sum = 0.0f;
      for (int64_t i = 0; i < k; ++i) sum += weights[i];
      sum = std::max(sum, 6.103515625e-5f);  // llama.cpp: no division by (near) zero
      for (int64_t i = 0; i < k; ++i) weights[i] /= sum;
    }
  } else {
    top_k(probs, n_expert, k, experts);
    for (int64_t i = 0; i < k; ++i) weights[i] = probs[experts[i]];
    softmax_in_place(weights, k);
  }
}

void group_by_expert(std::span<const int32_t> experts, int64_t n_expert, ExpertGroups groups) {
  std::fill(groups.offsets.begin(), groups.offsets.begin() + n_expert + 1, 0);
  for (int32_t e : experts) ++groups.offsets[e + 1];
  for (int64_t e = 0; e < n_expert; ++e) groups.offsets[e + 1] += groups.offsets[e];
  // Place each assignment at its expert's next free slot; scanning in assignment order keeps
  // an expert's tokens in increasing order. offsets[e] serves as the cursor and is restored.
  for (size_t a = 0; a < experts.size(); ++a) {
    const int32_t slot = groups.offsets[experts[a]]++;
    groups.order[slot] = static_cast<int32_t>(a);
    groups.rank[a] = slot;
  }
  for (int64_t e = n_expert; e > 0; --e) groups.offsets[e] = groups.offsets[e - 1];
  groups.offsets[0] = 0;
}

}  // namespace drift
