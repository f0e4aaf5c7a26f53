// Tiny vocabularies for tokenizer tests, written as GGUF metadata with GgufBuilder.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gguf_builder.h"
#include "tokenizer/byte_level_mapping.h"
#include "tokenizer/tokenizer.h"
#include "util/utf8.h"

namespace drift::test {

// tokenizer.ggml.token_type values.
enum TokenType : int32_t {
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

// Raw text written in GPT-2's byte-level alphabet, as byte-level vocabularies store tokens
// (" w" -> "Ġw").
inline std::string byte_level(std::string_view raw) {
  std::string out;
  for (const char c : raw)
    append_utf8(byte_level_codepoint(static_cast<uint8_t>(c)), out, Utf8Policy::kLenient);
  return out;
}

class TinyVocab {
 public:
  // model: "gpt2" or "llama" (tokenizer.ggml.model).
  explicit TinyVocab(std::string model) : model_(std::move(model)) {}

  int32_t add(std::string text, int32_t type = kNormal, float score = 0.0f) {
    texts_.push_back(std::move(text));
    types_.push_back(type);
    scores_.push_back(score);
    return static_cast<int32_t>(texts_.size() - 1);
  }
  // The 256 byte-level characters, so that byte b gets id first + b.
  int32_t add_byte_level_alphabet() {
    const auto first = static_cast<int32_t>(texts_.size());
    for (int b = 0; b < 256; ++b) add(byte_level(std::string(1, static_cast<char>(b))));
    return first;
  }
  // SentencePiece byte tokens <0x00>..<0xFF>, so that byte b gets id first + b.
  int32_t add_byte_tokens() {
    static constexpr char kHex[] = "0123456789ABCDEF";
    const auto first = static_cast<int32_t>(texts_.size());
    for (int b = 0; b < 256; ++b)
      add(std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">", kByte);
    return first;
  }
  void add_merge(std::string merge) { merges_.push_back(std::move(merge)); }
  void set_pre(std::string pre) { pre_ = std::move(pre); }

  // The metadata; callers may add more keys to it.
  GgufBuilder gguf() const {
    GgufBuilder b;
    b.add_string("tokenizer.ggml.model", model_);
    if (!pre_.empty()) b.add_string("tokenizer.ggml.pre", pre_);
    b.add_strings("tokenizer.ggml.tokens", texts_);
    b.add_int32s("tokenizer.ggml.token_type", types_);
    b.add_floats("tokenizer.ggml.scores", scores_);
    if (model_ == "gpt2") b.add_strings("tokenizer.ggml.merges", merges_);
    return b;
  }

 private:
  std::string model_;
  std::string pre_;
  std::vector<std::string> texts_;
  std::vector<int32_t> types_;
  std::vector<float> scores_;
  std::vector<std::string> merges_;
};

inline Expected<Tokenizer> load_tokenizer(const GgufBuilder& metadata) {
  DRIFT_ASSIGN_OR_RETURN(OwnedGguf gguf, parse_gguf(metadata));
  return Tokenizer::from_gguf(gguf.file);
}

// GPT-2's byte-level alphabet, byte b as token b, and an end-of-text control token whose id goes
// to `end` (the grammars' tests feed text a byte at a time); callers may add tokens and merges.
inline TinyVocab byte_level_vocab_with_end(int32_t& end) {
  TinyVocab vocab("gpt2");
  vocab.set_pre("gpt-2");
  vocab.add_byte_level_alphabet();
  end = vocab.add("<|endoftext|>", kControl);
  return vocab;
}

// The tokenizer of `vocab` with `eos` its end-of-sequence token.
inline Expected<Tokenizer> load_tokenizer_with_eos(const TinyVocab& vocab, int32_t eos) {
  GgufBuilder gguf = vocab.gguf();
  gguf.add_uint32("tokenizer.ggml.eos_token_id", uint32_t(eos));
  return load_tokenizer(gguf);
}

}  // namespace drift::test
