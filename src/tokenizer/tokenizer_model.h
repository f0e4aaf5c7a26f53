// What a Tokenizer shares between its copies: the vocabulary and the special-token index built
// over it (which points into the vocabulary, so both live and die together).
#pragma once

#include <optional>

#include "tokenizer/special_token_splitter.h"
#include "tokenizer/vocab.h"

namespace drift {

struct TokenizerModel {
  Vocab vocab;
  std::optional<SpecialTokenSplitter> special_splitter;  // set once `vocab` is loaded
};

}  // namespace drift
