// A bound that refuses a prompt which cannot fit the context before it is tokenized: tokenizing
// a 7 MB prompt takes seconds, and the answer ("too long") is known from its size alone.
//
// Why it is safe (nothing that fits is refused): every token of an encoding covers a stretch of
// the input that is at most as long, in bytes, as the token's text in the vocabulary. The text
// is the input in the vocabulary's spelling, which only ever grows it: byte-level BPE spells a
// byte as one or two bytes ("Ġ" for a space), SentencePiece a space as "▁" (3 bytes) and a byte
// fallback as "<0x0A>"; special and user-defined tokens match their text literally; invalid
// UTF-8 becomes U+FFFD (3 bytes for 1). The exception is an unknown character, one token for up
// to 4 bytes, so the bound per token is at least 4. BOS/EOS only add tokens. Hence a text of B
// bytes becomes at least ceil(B / max_bytes_per_token) tokens.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "tokenizer/tokenizer.h"

namespace drift::server {

class PromptBound {
 public:
  // Reads every token's text once (O(vocabulary)); do it when the model loads.
  static PromptBound from(const Tokenizer& tokenizer);
  // The same from any source of token texts: text_of(id) returns an Expected of a string (or
  // view) for ids [0, vocab_size), e.g. the engine's token_text (the bytes a token stands for).
  template <typename TextOf>
  static PromptBound from_texts(int32_t vocab_size, TextOf text_of) {
    size_t longest = 0;
    for (int32_t id = 0; id < vocab_size; ++id) {
      const auto text = text_of(id);
      if (text.ok()) longest = std::max(longest, text->size());
    }
    return PromptBound(longest);  // at least the unknown-character floor
  }
  explicit PromptBound(size_t max_bytes_per_token);

  size_t max_bytes_per_token() const { return max_bytes_per_token_; }
  // The fewest tokens a text of `bytes` bytes can become.
  int64_t min_tokens(size_t bytes) const;
  // The longest text that may still become fewer than `context` tokens (a prompt needs at least
  // one position left to generate into). Longer texts cannot fit.
  size_t max_bytes(int64_t context) const;

 private:
  size_t max_bytes_per_token_;
};

}  // namespace drift::server
