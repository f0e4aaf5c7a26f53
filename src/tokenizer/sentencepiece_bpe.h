// SentencePiece-style BPE, as llama.cpp's llm_tokenizer_spm_session encodes a piece of text that
// holds no special tokens: starting from single characters, repeatedly join the adjacent pair whose
// joined text is the vocabulary token with the highest score; characters that end up in no token
// are written as byte tokens <0xXX>.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace drift {

// `text` is already escaped (spaces written as U+2581).
void encode_sentencepiece(const Vocab& vocab, std::string_view text, std::vector<int32_t>& out);

// The token for one byte: "<0xXX>", else the byte as a one-character token, else the unknown
// token (llama.cpp aborts there); nullopt when there is none of these.
std::optional<int32_t> sentencepiece_byte_token(const Vocab& vocab, uint8_t byte);

}  // namespace drift
