#include "tokenizer/prompt_bound.h"

#include <algorithm>
#include <limits>

namespace drift {

namespace {
constexpr size_t kUnknownCharacterBytes = 4;  // the longest UTF-8 character: one <unk> token
}

PromptBound PromptBound::from(const Tokenizer& tokenizer) {
  return from_texts(tokenizer.vocab_size(), [&](int32_t id) { return tokenizer.token_text(id); });
}

PromptBound::PromptBound(size_t max_bytes_per_token)
    : max_bytes_per_token_(std::max(max_bytes_per_token, kUnknownCharacterBytes)) {}

size_t PromptBound::counted_bytes(std::string_view text) const {
  if (dropped_ascii_.none()) return text.size();
  size_t dropped = 0;
  for (unsigned char c : text)
    if (c < 128 && dropped_ascii_.test(c)) ++dropped;
  return text.size() - dropped;
}

int64_t PromptBound::min_tokens(size_t bytes) const {
  return int64_t((bytes + max_bytes_per_token_ - 1) / max_bytes_per_token_);
}

size_t PromptBound::max_bytes(int64_t context) const {
  // min_tokens(b) <= context - 1  <=>  b <= (context - 1) * max_bytes_per_token.
  if (context <= 1) return 0;
  const size_t positions = size_t(context - 1);
  if (positions > std::numeric_limits<size_t>::max() / max_bytes_per_token_)
    return std::numeric_limits<size_t>::max();
  return positions * max_bytes_per_token_;
}

}  // namespace drift
