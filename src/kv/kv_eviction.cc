#include "kv/kv_eviction.h"

#include <algorithm>
#include <cmath>

namespace drift {

std::string_view kv_evict_policy_name(KvEvictPolicy policy) {
  return policy == KvEvictPolicy::kWindow ? "window" : "attention";
}

std::optional<KvEvictPolicy> parse_kv_evict_policy(std::string_view name) {
  if (name == "attention") return KvEvictPolicy::kAttention;
  if (name == "window") return KvEvictPolicy::kWindow;
  return std::nullopt;
}

Status KvCompressConfig::validate() const {
  if (!(keep > 0.0 && keep <= 1.0)) return make_error("kv_keep must be in (0, 1], got {}", keep);
  if (min_tokens < 0) return make_error("kv_compress_min_tokens must be >= 0, got {}", min_tokens);
  if (sink_tokens < 0) return make_error("kv sink tokens must be >= 0, got {}", sink_tokens);
  if (recent_tokens < 1) return make_error("kv recent tokens must be >= 1, got {}", recent_tokens);
  if (metric_window < 1 || metric_window > recent_tokens)
    return make_error("kv metric window must be 1 to the recent tokens ({}), got {}", recent_tokens,
                      metric_window);
  if (metric_intervals < 1 || metric_intervals > 64)
    return make_error("kv metric intervals must be 1 to 64, got {}", metric_intervals);
  return Status::Ok();
}

int64_t kv_keep_target(const KvCompressConfig& config, int64_t seq_len) {
  if (!config.enabled() || seq_len <= config.min_tokens) return seq_len;
  const auto target = static_cast<int64_t>(std::floor(config.keep * static_cast<double>(seq_len)));
  return std::min(seq_len, std::max(target, config.sink_tokens + config.recent_tokens));
}

int64_t kv_keep_target(const KvCompressConfig& config, int64_t seq_len, int64_t keep_from) {
  const int64_t target = kv_keep_target(config, seq_len);
  if (target == seq_len) return seq_len;
  return std::min(seq_len,
                  std::max(target, std::max(keep_from, config.sink_tokens) + config.recent_tokens));
}

void select_kept_entries(const KvCompressConfig& config, int64_t seq_len, int64_t keep_from,
                         std::span<const int32_t> positions, std::span<const float> metric,
                         int64_t target, std::vector<int32_t>& kept) {
  const auto n = static_cast<int64_t>(positions.size());
  kept.clear();
  if (n <= target) {
    for (int64_t i = 0; i < n; ++i) kept.push_back(static_cast<int32_t>(i));
    return;
  }
  auto is_protected = [&](int64_t i) {
    return positions[i] < std::max(config.sink_tokens, keep_from) ||
           positions[i] >= seq_len - config.recent_tokens;
  };
  // Candidates: the unprotected slots, best first under the policy.
  std::vector<int32_t> candidates;
  int64_t n_protected = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (is_protected(i))
      ++n_protected;
    else
      candidates.push_back(static_cast<int32_t>(i));
  }
  const int64_t budget =
      std::clamp<int64_t>(target - n_protected, 0, static_cast<int64_t>(candidates.size()));
  if (config.policy == KvEvictPolicy::kAttention) {
    // Largest metric first; equal metrics: the later slot (the later position) first.
    std::partial_sort(candidates.begin(), candidates.begin() + budget, candidates.end(),
                      [&](int32_t a, int32_t b) {
                        return metric[a] != metric[b] ? metric[a] > metric[b] : a > b;
                      });
  } else {
    std::reverse(candidates.begin(), candidates.end());  // most recent first
  }
  candidates.resize(static_cast<size_t>(budget));
  for (int64_t i = 0; i < n; ++i)
    if (is_protected(i)) kept.push_back(static_cast<int32_t>(i));
  kept.insert(kept.end(), candidates.begin(), candidates.end());
  std::sort(kept.begin(), kept.end());
}

}  // namespace drift
