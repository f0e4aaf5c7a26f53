#include "scheduler/ngram_drafter.h"

namespace drift {

int32_t propose_ngram_draft(std::span<const TokenId> tokens, const NgramDraftConfig& config,
                            std::span<TokenId> out) {
  // Rule: one backward scan over the window; at each earlier end position e, the match length is
  // how many tokens ending at e equal the sequence's last ones. The longest wins, the most recent
  // among equals (the first found scanning backward); a full-length match ends the scan.
  const auto size = int64_t(tokens.size());
  if (out.empty() || size < int64_t(config.min_ngram) + 1) return 0;
  const int64_t last = size - 1;
  const int64_t lowest = std::max<int64_t>(0, size - 1 - config.lookback);
  int64_t best_end = -1, best_len = 0;
  for (int64_t e = last - 1; e >= lowest; --e) {
    if (tokens[size_t(e)] != tokens[size_t(last)]) continue;
    int64_t len = 1;
    while (len < config.max_ngram && e - len >= 0 &&
           tokens[size_t(e - len)] == tokens[size_t(last - len)])
      ++len;
    if (len > best_len) {
      best_len = len;
      best_end = e;
      if (len == config.max_ngram) break;
    }
  }
  if (best_len < config.min_ngram) return 0;
  // What followed the match: tokens (best_end, last], at least one since best_end < last.
  const int64_t n = std::min<int64_t>(int64_t(out.size()), last - best_end);
  std::copy_n(tokens.begin() + best_end + 1, n, out.begin());
  return int32_t(n);
}

}  // namespace drift
