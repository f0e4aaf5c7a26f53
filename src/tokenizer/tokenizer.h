// Text <-> token ids for a model, built from its GGUF metadata, giving the ids llama.cpp gives.
//
// Two kinds of vocabulary are supported: GPT-2 byte-level BPE (tokenizer.ggml.model "gpt2", with
// the pre-tokenizer named by tokenizer.ggml.pre) and SentencePiece-style BPE (tokenizer.ggml.model
// "llama", as Llama 2 and Gemma use). A Tokenizer is immutable and cheap to copy (its vocabulary is
// shared), so one can be used from many threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/gguf_file.h"
#include "util/error.h"

namespace drift {

struct TokenizerModel;

enum class TokenizerType { kSentencePiece, kByteLevelBpe };

struct EncodeOptions {
  // Add the BOS/EOS tokens the model asks for (tokenizer.ggml.add_bos_token/add_eos_token).
  bool add_special = true;
  // Text of control tokens in the input ("<|im_start|>", "<start_of_turn>") becomes those tokens;
  // otherwise it is tokenized as plain text. User-defined tokens are matched either way. On by
  // default, as in llama-tokenize, for prompts rendered from a chat template; turn it off for text
  // a user typed.
  bool parse_special = true;
};

struct DecodeOptions {
  // Control and unknown tokens contribute their text ("<|im_end|>"); otherwise nothing.
  bool render_special = false;
  // Drop a leading BOS and a trailing EOS that the model adds by itself.
  bool remove_special = false;
};

class Tokenizer {
 public:
  static Expected<Tokenizer> from_gguf(const GgufFile& file);

  // Never fails: invalid UTF-8 is tokenized as llama.cpp does (U+FFFD for byte-level BPE, byte
  // tokens for SentencePiece).
  std::vector<int32_t> encode(std::string_view text, const EncodeOptions& options = {}) const;

  // As llama.cpp's detokenize: the pieces of the tokens, with the leading space the encoder added
  // removed (SentencePiece with add_space_prefix) and the model's space clean-up applied. An id
  // outside the vocabulary is an error.
  Expected<std::string> decode(std::span<const int32_t> tokens,
                               const DecodeOptions& options = {}) const;

  // The text one token contributes to decoded output (bytes, possibly part of a character).
  // Control and unknown tokens give their text only when `render_special`.
  Expected<std::string_view> token_to_piece(int32_t token, bool render_special) const;

  // The token's text as stored in the vocabulary ("Ġthe", "▁the", "<0x0A>").
  Expected<std::string_view> token_text(int32_t token) const;

  TokenizerType type() const;
  // The byte-level pre-tokenizer's name (tokenizer.ggml.pre); empty for SentencePiece.
  std::string_view pre_tokenizer() const;
  int32_t vocab_size() const;

  std::optional<int32_t> bos() const;
  std::optional<int32_t> eos() const;
  std::optional<int32_t> eot() const;
  std::optional<int32_t> eom() const;
  std::optional<int32_t> unk() const;
  std::optional<int32_t> pad() const;
  bool add_bos() const;
  bool add_eos() const;
  // SentencePiece: a space is put before text that starts the input or follows a special token
  // (and decode removes it again from the first token).
  bool add_space_prefix() const;
  bool clean_spaces() const;

  // End-of-generation tokens: EOS, EOT, EOM and the others llama.cpp recognises; ascending.
  std::span<const int32_t> eog_tokens() const;
  bool is_eog(int32_t token) const;
  // The control or user-defined token whose text is exactly `text` ("<|channel|>"), if any.
  std::optional<int32_t> find_special(std::string_view text) const;
  // Control tokens (never produced from plain text unless parse_special; not rendered unless
  // render_special). False for ids outside the vocabulary.
  bool is_control(int32_t token) const;

 private:
  explicit Tokenizer(std::shared_ptr<const TokenizerModel> model) : model_(std::move(model)) {}

  std::shared_ptr<const TokenizerModel> model_;
};

}  // namespace drift
