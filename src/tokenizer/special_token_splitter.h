// Finds special-token text in input, as llama.cpp's tokenizer_st_partition does: before any
// word splitting, the text is cut at every occurrence of a special token's text, taking the
// special tokens one at a time from the longest text down, so a longer token wins over a shorter
// one inside it. User-defined tokens are always matched; control and unknown tokens only when the
// caller parses special tokens.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/vocab.h"

namespace drift {

// A piece of the input: either a special token or text still to be tokenized.
struct TextFragment {
  enum class Kind { kText, kToken };
  Kind kind = Kind::kText;
  int32_t token = 0;  // kToken only
  size_t offset = 0;  // kText only: the text is input[offset, offset + length)
  size_t length = 0;
};

class SpecialTokenSplitter {
 public:
  // Indexes the vocabulary's special tokens; `vocab` must outlive the splitter.
  explicit SpecialTokenSplitter(const Vocab& vocab);

  std::vector<TextFragment> split(std::string_view text, bool parse_special) const;

 private:
  // The special tokens (as positions in vocab.special_tokens()) whose text occurs in `text`.
  std::vector<uint32_t> tokens_present(std::string_view text, bool parse_special) const;
  std::optional<uint32_t> child(uint32_t node, uint8_t byte) const;

  const Vocab* vocab_;
  // A trie of the special tokens' texts: edges keyed by (node << 8 | byte), and for each node the
  // special token whose text ends there, if any.
  std::unordered_map<uint64_t, uint32_t> edges_;
  std::vector<std::optional<uint32_t>> token_at_node_;
};

}  // namespace drift
