#include "sampling/sampler.h"

#include <algorithm>
#include <cmath>

#include "sampling/random_stream.h"

namespace drift {
namespace {

// Candidates examined by a partial sort before falling back to sorting the whole vocabulary:
// top-p rarely needs more than a few hundred tokens, and sorting 262k ids per token would cost
// milliseconds.
constexpr int64_t kPartialSortSize = 512;

void apply_penalties(std::span<float> logits, const SamplingParams& p,
                     std::span<const int32_t> history, int64_t prompt_len, SamplerScratch& s,
                     std::vector<int32_t>& counts, std::vector<uint8_t>& in_history,
                     std::vector<int32_t>& touched) {
  const bool repetition = p.repetition_penalty != 1.0f;
  const bool additive = p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f;
  if (!repetition && !additive) return;
  const int64_t n_vocab = static_cast<int64_t>(logits.size());
  touched.clear();
  for (int64_t i = 0; i < static_cast<int64_t>(history.size()); ++i) {
    const int32_t id = history[i];
    if (id < 0 || id >= n_vocab) continue;
    if (!in_history[id]) {
      in_history[id] = 1;
      touched.push_back(id);
    }
    if (i >= prompt_len) counts[id] += 1;
  }
  for (int32_t id : touched) {
    float& l = logits[id];
    if (repetition) l = l > 0.0f ? l / p.repetition_penalty : l * p.repetition_penalty;
    if (counts[id] > 0) l -= p.presence_penalty + p.frequency_penalty * counts[id];
    in_history[id] = 0;
    counts[id] = 0;
  }
}

}  // namespace

SamplerScratch::SamplerScratch(int64_t n_vocab)
    : counts_(n_vocab, 0), in_history_(n_vocab, 0), candidates_(n_vocab), probs_(n_vocab) {
  touched_.reserve(n_vocab);
}

int32_t argmax(std::span<const float> values) {
  int32_t best = 0;
  for (size_t i = 1; i < values.size(); ++i)
    if (values[i] > values[best]) best = static_cast<int32_t>(i);
  return best;
}

int32_t sample_token(std::span<float> logits, const SamplingParams& p,
                     std::span<const int32_t> history, int64_t prompt_len, uint64_t seed,
                     SamplerScratch& s) {
  apply_penalties(logits, p, history, prompt_len, s, s.counts_, s.in_history_, s.touched_);
  if (p.greedy()) return argmax(logits);

  const int64_t n = static_cast<int64_t>(logits.size());
  const float inv_temp = 1.0f / p.temperature;
  float max_logit = -INFINITY;
  for (int64_t i = 0; i < n; ++i) {
    logits[i] *= inv_temp;
    max_logit = std::max(max_logit, logits[i]);
  }
  double total = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    s.probs_[i] = std::exp(logits[i] - max_logit);
    total += s.probs_[i];
  }
  const float inv_total = static_cast<float>(1.0 / total);
  for (int64_t i = 0; i < n; ++i) s.probs_[i] *= inv_total;

  // Order candidates by probability (descending, ties by id) as far as the filters need.
  int64_t kept = n;
  if (p.top_k) kept = std::min<int64_t>(kept, *p.top_k);
  const bool need_order = p.top_k.has_value() || p.top_p < 1.0f || p.min_p > 0.0f;
  auto& cand = s.candidates_;
  for (int64_t i = 0; i < n; ++i) cand[i] = static_cast<int32_t>(i);
  auto by_prob = [&](int32_t a, int32_t b) {
    return s.probs_[a] > s.probs_[b] || (s.probs_[a] == s.probs_[b] && a < b);
  };
  int64_t sorted = 0;  // cand[0, sorted) is in final order
  auto sort_prefix = [&](int64_t upto) {
    if (upto <= sorted) return;
    std::partial_sort(cand.begin(), cand.begin() + upto, cand.end(), by_prob);
    sorted = upto;
  };
  if (need_order) {
    sort_prefix(std::min(n, std::max(kept < n ? kept : int64_t{0}, std::min(n, kPartialSortSize))));
    if (p.top_p < 1.0f) {
      double mass = 0.0;
      int64_t cut = 0;
      for (;;) {
        while (cut < std::min(kept, sorted) && mass < p.top_p) mass += s.probs_[cand[cut++]];
        if (mass >= p.top_p || cut >= kept) break;
        sort_prefix(std::min(n, std::max(sorted * 4, int64_t{1})));  // rare: need more order
      }
      kept = std::max<int64_t>(cut, 1);
    }
    if (p.min_p > 0.0f) {
      sort_prefix(std::min(kept, n));
      const float threshold = p.min_p * s.probs_[cand[0]];
      int64_t cut = 1;
      while (cut < kept && s.probs_[cand[cut]] >= threshold) ++cut;
      kept = cut;
    }
    sort_prefix(kept);
  }

  // Inverse-CDF draw over the kept candidates (in candidate order when filtered, else by id).
  const double u = stream_uniform(seed, static_cast<uint64_t>(history.size() - prompt_len));
  double kept_mass = 0.0;
  for (int64_t i = 0; i < kept; ++i) kept_mass += s.probs_[need_order ? cand[i] : i];
  const double target = u * kept_mass;
  double acc = 0.0;
  for (int64_t i = 0; i < kept; ++i) {
    const int32_t id = need_order ? cand[i] : static_cast<int32_t>(i);
    acc += s.probs_[id];
    if (target < acc) return id;
  }
  return need_order ? cand[kept - 1] : static_cast<int32_t>(kept - 1);
}

}  // namespace drift
