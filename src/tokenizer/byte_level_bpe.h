// GPT-2 byte-level BPE, as llama.cpp's llm_tokenizer_bpe_session encodes a piece of text that
// holds no special tokens: split into words by the pre-tokenizer, write each word's bytes in the
// byte-level alphabet, then repeatedly merge the adjacent pair with the best (lowest) merge rank.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace drift {

void encode_byte_level_bpe(const Vocab& vocab, std::string_view text, std::vector<int32_t>& out);

}  // namespace drift
