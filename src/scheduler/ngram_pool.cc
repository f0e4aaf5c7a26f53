#include "scheduler/ngram_pool.h"

#include <algorithm>
#include <array>
#include <bit>

namespace drift {

NgramPool::NgramPool(int64_t entries, int32_t context)
    : context_(std::clamp(context, 1, kMaxContext)) {
  if (entries <= 0) return;
  table_.resize(std::bit_floor(uint64_t(entries)));
  mask_ = table_.size() - 1;
}

uint64_t NgramPool::key(std::span<const TokenId> window, uint64_t cache_namespace) const {
  // FNV-1a over the namespace and the tokens, then a final mix so that the low bits (the slot)
  // depend on every token.
  uint64_t h = 1469598103934665603ull ^ (cache_namespace * 0x9E3779B97F4A7C15ull);
  for (TokenId t : window) h = (h ^ uint64_t(uint32_t(t))) * 1099511628211ull;
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return h;
}

void NgramPool::record(std::span<const TokenId> tokens, size_t from, uint64_t cache_namespace) {
  if (!enabled()) return;
  const auto context = size_t(context_);
  for (size_t i = std::max(from, context); i < tokens.size(); ++i) {
    const uint64_t h = key(tokens.subspan(i - context, context), cache_namespace);
    table_[h & mask_] = Entry{uint32_t(h >> 32), tokens[i]};
  }
}

int32_t NgramPool::propose(std::span<const TokenId> tokens, uint64_t cache_namespace,
                           std::span<TokenId> out) const {
  // Rule: look up the last `context` tokens, append what followed them, slide the window over
  // the appended token and look up again, until a miss or `out` is full.
  const auto context = size_t(context_);
  if (!enabled() || out.empty() || tokens.size() < context) return 0;
  std::array<TokenId, kMaxContext> window;
  std::copy(tokens.end() - ptrdiff_t(context), tokens.end(), window.begin());
  int32_t n = 0;
  while (size_t(n) < out.size()) {
    const uint64_t h = key(std::span<const TokenId>(window.data(), context), cache_namespace);
    const Entry& e = table_[h & mask_];
    if (e.next < 0 || e.check != uint32_t(h >> 32)) break;
    out[size_t(n++)] = e.next;
    std::copy(window.begin() + 1, window.begin() + ptrdiff_t(context), window.begin());
    window[context - 1] = e.next;
  }
  return n;
}

}  // namespace drift
