// KV-Compress's eviction policy: which of a KV head's entries it keeps when its sequence is
// compressed (docs/design-notes.md "KV-Compress"). Pure arithmetic over positions and metrics;
// the executor moves the bytes.
//
// Every policy keeps the first `sink_tokens` positions (the attention sinks StreamingLLM found:
// every query gives them a large share of its attention) and the last `recent_tokens` (whose
// metric has not seen enough queries yet), and fills the rest of a head's budget with:
//   window     the most recent other positions (StreamingLLM's cache, the baseline)
//   attention  the other positions with the largest metric: the squared attention they received
//              from the recent queries — the last `metric_window` tokens of each step between
//              compressions, over the last `metric_intervals` such steps (KV-Compress's metric)
//              — ties to the later position.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "util/error.h"

namespace drift {

enum class KvEvictPolicy : uint8_t { kAttention, kWindow };

std::string_view kv_evict_policy_name(KvEvictPolicy policy);  // "attention", "window"
std::optional<KvEvictPolicy> parse_kv_evict_policy(std::string_view name);

struct KvCompressConfig {
  double keep = 1.0;  // fraction (0, 1] of its sequence's positions each head keeps
  KvEvictPolicy policy = KvEvictPolicy::kAttention;
  int64_t min_tokens = 256;    // sequences up to this long are not compressed
  int64_t sink_tokens = 4;     // first positions, always kept
  int64_t recent_tokens = 64;  // last positions, always kept
  int64_t metric_window = 64;  // tokens of a prefill chunk (or step) that add to the metric
  // The metric sums the squared attention of the queries of the last metric_intervals intervals
  // between compressions (1: since the last compression; docs/design-notes.md "KV-Compress").
  int64_t metric_intervals = 8;

  // Whether compression can evict anything (keep < 1).
  bool enabled() const { return keep < 1.0; }
  // An error naming the first field out of range.
  Status validate() const;
};

// Entries each head may hold once its sequence has `seq_len` positions: all of them up to
// min_tokens (or with keep = 1), else floor(keep * seq_len), but never fewer than the sinks and
// the recent window.
int64_t kv_keep_target(const KvCompressConfig& config, int64_t seq_len);

// Entries a head of a sequence with `seq_len` positions keeps when its first `keep_from` positions
// must stay as they are (pages it shares with the prefix cache): the policy's target, raised to
// cover those and the recent window, never more than seq_len. The scheduler plans pages with it.
int64_t kv_keep_target(const KvCompressConfig& config, int64_t seq_len, int64_t keep_from);

// The slots one head keeps, increasing, out of its entries at `positions` (increasing) with
// `metric` (one per entry; read by the attention policy only): the protected ones (the sinks,
// positions below `keep_from`, the recent window) and the policy's best others, `target` in all
// when the head holds more (never fewer than the protected ones). `kept` is overwritten.
void select_kept_entries(const KvCompressConfig& config, int64_t seq_len, int64_t keep_from,
                         std::span<const int32_t> positions, std::span<const float> metric,
                         int64_t target, std::vector<int32_t>& kept);

}  // namespace drift
