#include "sampling/token_mask.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace drift {

void apply_token_mask(std::span<float> logits, std::span<const uint32_t> mask) {
  const size_t n = logits.size();
  const size_t words = std::min(mask.size(), (n + 31) / 32);
  for (size_t w = 0; w < words; ++w) {
    const uint32_t allowed = mask[w];
    if (allowed == ~0u) continue;
    const size_t base = w * 32;
    const size_t end = std::min(base + 32, n);
    if (allowed == 0) {
      std::fill(logits.begin() + ptrdiff_t(base), logits.begin() + ptrdiff_t(end), -INFINITY);
      continue;
    }
    for (uint32_t banned = ~allowed; banned != 0; banned &= banned - 1) {
      const size_t t = base + size_t(std::countr_zero(banned));
      if (t < end) logits[t] = -INFINITY;
    }
  }
  // A mask shorter than the vocabulary allows nothing past its end.
  if (words * 32 < n) std::fill(logits.begin() + ptrdiff_t(words * 32), logits.end(), -INFINITY);
}

void apply_token_mask_reference(std::span<float> logits, std::span<const uint32_t> mask) {
  for (size_t t = 0; t < logits.size(); ++t) {
    const bool allowed = t / 32 < mask.size() && ((mask[t / 32] >> (t % 32)) & 1u) != 0;
    if (!allowed) logits[t] = -INFINITY;
  }
}

void apply_logit_bias(std::span<float> logits, std::span<const LogitBias> bias) {
  for (const LogitBias& b : bias) {
    if (b.token < 0 || size_t(b.token) >= logits.size()) continue;
    float& l = logits[size_t(b.token)];
    l = b.bias <= kBanBias ? -INFINITY : l + b.bias;
  }
}

}  // namespace drift
