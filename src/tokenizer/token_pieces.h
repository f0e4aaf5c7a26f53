// What one token contributes to decoded text, by llama.cpp's token_to_piece rules: normal tokens
// are un-escaped (SentencePiece "▁" to a space, byte-level characters to their bytes), byte tokens
// <0xXX> give their byte, control and unknown tokens give their text (callers drop it unless
// special tokens are rendered), user-defined tokens give their text, anything else nothing.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "tokenizer/token_kinds.h"

namespace drift {

std::string render_token_piece(VocabType type, std::string_view text, uint32_t attr);

}  // namespace drift
