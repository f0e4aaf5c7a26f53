#include "sampling/sampler.h"

#include <algorithm>
#include <cmath>

#include "kernels/argmax.h"
#include "sampling/random_stream.h"
#include "sampling/token_mask.h"

namespace drift {
namespace {

// Candidates ordered by a first partial sort before ordering more: top-p rarely needs more than a
// few hundred tokens, and sorting 262k ids per token would cost milliseconds. When the nucleus is
// larger, the order is extended (x4 each time) until it is found.
constexpr int64_t kPartialSortSize = 512;

void apply_penalties(std::span<float> logits, const SamplingParams& p,
                     std::span<const int32_t> history, int64_t prompt_len,
                     std::vector<int32_t>& counts, std::vector<uint8_t>& in_history,
                     std::vector<int32_t>& touched) {
  const bool repetition = p.repetition_penalty != 1.0f;
  const bool additive = p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f;
  if ((!repetition && !additive) || p.penalty_last_n == 0) return;
  const int64_t n_vocab = static_cast<int64_t>(logits.size());
  const int64_t size = static_cast<int64_t>(history.size());
  const int64_t start = p.penalty_last_n < 0 ? 0 : std::max<int64_t>(0, size - p.penalty_last_n);
  touched.clear();
  for (int64_t i = start; i < size; ++i) {
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

// The tokens still in the draw: ids[0, kept). ids[0, sorted) are the most likely of them in
// final order (logit descending, lower id on ties); the rest are in no particular order. Logits
// are never rewritten: `scale` (1 / temperature once the temperature stage ran, else 1) is
// applied where probabilities are computed, so the order by logit is the order by probability.
class Candidates {
 public:
  Candidates(std::span<const float> logits, std::span<int32_t> ids)
      : logits_(logits), ids_(ids), kept_(static_cast<int64_t>(logits.size())) {
    for (int64_t i = 0; i < kept_; ++i) ids_[i] = static_cast<int32_t>(i);
  }

  // Keeps the k most likely.
  void top_k(int32_t k) {
    if (k >= kept_) return;
    sort_prefix(k);
    kept_ = k;
  }

  // Keeps the smallest most-likely-first set whose probability reaches p of the kept mass (the
  // token that crosses p included; at least one).
  void top_p(float p) {
    if (p >= 1.0f) return;
    const float max = max_logit();
    double total = 0.0;
    for (int64_t i = 0; i < kept_; ++i) total += weight(ids_[i], max);
    const double target = double(p) * total;
    sort_prefix(kPartialSortSize);
    double mass = 0.0;
    int64_t cut = 0;
    for (;;) {
      while (cut < sorted_ && mass < target) mass += weight(ids_[cut++], max);
      if (mass >= target || cut >= kept_) break;
      sort_prefix(sorted_ * 4);  // the nucleus is larger than the order so far
    }
    cut_at(std::max<int64_t>(cut, 1));
  }

  // Keeps the tokens whose probability is at least min_p times the most likely one's, i.e. whose
  // scaled logit is at least the best one's + log(min_p) (as llama.cpp compares them).
  void min_p(float min_p) {
    if (min_p <= 0.0f) return;
    const float max = max_logit();
    const float threshold = max + std::log(min_p) / scale_;
    auto passes = [&](int32_t id) { return logits_[id] >= threshold; };
    // The sorted prefix fails from some point on, and then so does everything after it.
    for (int64_t i = 0; i < sorted_; ++i) {
      if (!passes(ids_[i])) {
        cut_at(std::max<int64_t>(i, 1));
        return;
      }
    }
    auto end = std::partition(ids_.begin() + sorted_, ids_.begin() + kept_, passes);
    kept_ = std::max<int64_t>(end - ids_.begin(), 1);
  }

  void temperature(float t) { scale_ = 1.0f / t; }

  // Inverse-CDF draw over the kept tokens in candidate order: the first whose cumulative
  // probability exceeds u.
  int32_t draw(double u) const {
    const float max = max_logit();
    double total = 0.0;
    for (int64_t i = 0; i < kept_; ++i) total += weight(ids_[i], max);
    const double target = u * total;
    double acc = 0.0;
    for (int64_t i = 0; i < kept_; ++i) {
      acc += weight(ids_[i], max);
      if (target < acc) return ids_[i];
    }
    return ids_[kept_ - 1];
  }

 private:
  bool more_likely(int32_t a, int32_t b) const {
    return logits_[a] > logits_[b] || (logits_[a] == logits_[b] && a < b);
  }
  // Orders the `upto` most likely kept tokens. Every token in [sorted_, kept_) is less likely
  // than those before it, so only that range is sorted further.
  void sort_prefix(int64_t upto) {
    upto = std::min(upto, kept_);
    if (upto <= sorted_) return;
    std::partial_sort(ids_.begin() + sorted_, ids_.begin() + upto, ids_.begin() + kept_,
                      [this](int32_t a, int32_t b) { return more_likely(a, b); });
    sorted_ = upto;
  }
  // Keeps the first n (n <= sorted_).
  void cut_at(int64_t n) {
    kept_ = n;
    sorted_ = std::min(sorted_, n);
  }
  float max_logit() const {
    if (sorted_ > 0) return logits_[ids_[0]];
    float max = -INFINITY;
    for (int64_t i = 0; i < kept_; ++i) max = std::max(max, logits_[ids_[i]]);
    return max;
  }
  // Unnormalised probability: exp((logit - max) / temperature).
  double weight(int32_t id, float max) const {
    return std::exp(static_cast<double>((logits_[id] - max) * scale_));
  }

  std::span<const float> logits_;
  std::span<int32_t> ids_;
  int64_t kept_;
  int64_t sorted_ = 0;
  float scale_ = 1.0f;
};

}  // namespace

SamplerScratch::SamplerScratch(int64_t n_vocab, Isa isa)
    : counts_(n_vocab, 0), in_history_(n_vocab, 0), candidates_(n_vocab), isa_(isa) {
  touched_.reserve(n_vocab);
}

int32_t sample_token(std::span<float> logits, const SamplingParams& p,
                     std::span<const int32_t> history, int64_t prompt_len, uint64_t seed,
                     SamplerScratch& s, std::span<const uint32_t> allowed) {
  if (!allowed.empty()) apply_token_mask(logits, allowed);
  apply_logit_bias(logits, p.logit_bias);
  apply_penalties(logits, p, history, prompt_len, s.counts_, s.in_history_, s.touched_);
  if (p.greedy())
    return kernels::argmax(s.isa_, logits.data(), static_cast<int64_t>(logits.size()));

  Candidates candidates(logits, s.candidates_);
  for (SamplerStage stage : p.order.stages) {
    switch (stage) {
      case SamplerStage::kTopK:
        if (p.top_k) candidates.top_k(*p.top_k);
        break;
      case SamplerStage::kTopP:
        candidates.top_p(p.top_p);
        break;
      case SamplerStage::kMinP:
        candidates.min_p(p.min_p);
        break;
      case SamplerStage::kTemperature:
        candidates.temperature(p.temperature);
        break;
    }
  }
  return candidates.draw(stream_uniform(seed, static_cast<uint64_t>(history.size() - prompt_len)));
}

}  // namespace drift
