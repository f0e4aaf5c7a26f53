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
// bytes becomes at least ceil(B / max_bytes_per_token) tokens — counting only bytes that can
// become a token at all: a byte-level vocabulary may lack a control character's token (SmolLM2
// has none for 0x04), and then the tokenizer drops that byte, as llama.cpp does.
#pragma once

#include <algorithm>
#include <bitset>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "tokenizer/tokenizer.h"

namespace drift {

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

  // Finds the ASCII bytes the tokenizer drops: `token_count(text)` is how many tokens it makes
  // of a text (no BOS/EOS). A byte-level tokenizer maps each byte to a symbol of its own whatever
  // surrounds it, so a byte dropped alone is dropped everywhere.
  template <typename TokenCount>
  void find_dropped_ascii(TokenCount token_count) {
    for (int byte = 0; byte < 128; ++byte)
      if (token_count(std::string(1, char(byte))) == 0) dropped_ascii_.set(size_t(byte));
  }
  // The bytes of `text` that can become tokens (all but dropped ones).
  size_t counted_bytes(std::string_view text) const;

  size_t max_bytes_per_token() const { return max_bytes_per_token_; }
  // The fewest tokens a text of `bytes` bytes can become.
  int64_t min_tokens(size_t bytes) const;
  // The longest text that may still become fewer than `context` tokens (a prompt needs at least
  // one position left to generate into). Longer texts cannot fit.
  size_t max_bytes(int64_t context) const;

 private:
  size_t max_bytes_per_token_;
  std::bitset<128> dropped_ascii_;
};

}  // namespace drift
