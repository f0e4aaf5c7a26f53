// The kinds a vocabulary and its tokens come in, on their own so that what renders a token
// (token_pieces.h) and the vocabulary that stores it (vocab.h) both use them without including
// each other.
#pragma once

#include <cstdint>

namespace drift {

enum class VocabType {
  kSentencePiece,  // tokenizer.ggml.model "llama": SentencePiece-style BPE over scores
  kByteLevelBpe,   // tokenizer.ggml.model "gpt2": GPT-2 byte-level BPE over ranked merges
};

// Token attributes (bit flags, llama.cpp's llama_token_attr), from tokenizer.ggml.token_type and
// adjusted by the text-based rules of special_tokens.h.
enum TokenAttr : uint32_t {
  kTokenAttrUndefined = 0,
  kTokenAttrUnknown = 1u << 0,
  kTokenAttrUnused = 1u << 1,
  kTokenAttrNormal = 1u << 2,
  kTokenAttrControl = 1u << 3,
  kTokenAttrUserDefined = 1u << 4,
  kTokenAttrByte = 1u << 5,
};

}  // namespace drift
