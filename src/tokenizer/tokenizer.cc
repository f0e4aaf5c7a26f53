#include "tokenizer/tokenizer.h"

#include <algorithm>

#include "tokenizer/byte_level_bpe.h"
#include "tokenizer/sentencepiece_bpe.h"
#include "tokenizer/space_cleanup.h"
#include "tokenizer/tokenizer_model.h"
#include "tokenizer/vocab_loader.h"

namespace drift {
namespace {

constexpr std::string_view kSentencePieceSpace = "\xE2\x96\x81";  // U+2581

// SentencePiece input: an optional leading space, then every space written as U+2581.
std::string escape_sentencepiece(std::string_view text, bool space_prefix) {
  std::string out;
  out.reserve(text.size() + 8);
  if (space_prefix) out += kSentencePieceSpace;
  for (const char c : text) {
    if (c == ' ') {
      out += kSentencePieceSpace;
    } else {
      out.push_back(c);
    }
  }
  return out;
}

Status check_token(const Vocab& vocab, int32_t token) {
  if (!vocab.contains(token)) {
    return make_error("token id {} is outside the vocabulary of {} tokens", token, vocab.size());
  }
  return Status::Ok();
}

}  // namespace

Expected<Tokenizer> Tokenizer::from_gguf(const GgufFile& file) {
  auto model = std::make_shared<TokenizerModel>();
  DRIFT_RETURN_IF_ERROR(load_vocab(file, model->vocab));
  model->special_splitter.emplace(model->vocab);
  return Tokenizer(std::move(model));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, const EncodeOptions& options) const {
  const Vocab& vocab = model_->vocab;
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 2);
  if (options.add_special && vocab.add_bos) out.push_back(*vocab.special.bos);
  // SentencePiece puts a space before text at the start and after each special token.
  bool after_special = true;
  for (const TextFragment& fragment :
       model_->special_splitter->split(text, options.parse_special)) {
    if (fragment.kind == TextFragment::Kind::kToken) {
      out.push_back(fragment.token);
      after_special = true;
      continue;
    }
    const std::string_view piece = text.substr(fragment.offset, fragment.length);
    if (vocab.type == VocabType::kSentencePiece) {
      encode_sentencepiece(
          vocab, escape_sentencepiece(piece, vocab.add_space_prefix && after_special), out);
    } else {
      encode_byte_level_bpe(vocab, piece, out);
    }
    after_special = false;
  }
  if (options.add_special && vocab.add_eos) out.push_back(*vocab.special.eos);
  return out;
}

Expected<std::string> Tokenizer::decode(std::span<const int32_t> tokens,
                                        const DecodeOptions& options) const {
  const Vocab& vocab = model_->vocab;
  for (const int32_t token : tokens) DRIFT_RETURN_IF_ERROR(check_token(vocab, token));
  // The space the encoder put before the text comes back on the first token; llama.cpp keeps it
  // when a leading BOS is removed.
  bool strip_leading_space = vocab.add_space_prefix;
  if (options.remove_special && vocab.add_bos && !tokens.empty() &&
      tokens.front() == vocab.special.bos) {
    strip_leading_space = false;
    tokens = tokens.subspan(1);
  }
  if (options.remove_special && vocab.add_eos && !tokens.empty() &&
      tokens.back() == vocab.special.eos) {
    tokens = tokens.subspan(0, tokens.size() - 1);
  }
  std::string text;
  for (const int32_t token : tokens) {
    std::string_view piece = *token_to_piece(token, options.render_special);
    if (strip_leading_space && !piece.empty() && piece.front() == ' ') piece.remove_prefix(1);
    strip_leading_space = false;
    text += piece;
  }
  if (vocab.clean_spaces) return clean_up_tokenization_spaces(text);
  return text;
}

Expected<std::string_view> Tokenizer::token_to_piece(int32_t token, bool render_special) const {
  const Vocab& vocab = model_->vocab;
  DRIFT_RETURN_IF_ERROR(check_token(vocab, token));
  if (!render_special && vocab.has_attr(token, kTokenAttrControl | kTokenAttrUnknown)) {
    return std::string_view();
  }
  return vocab.piece(token);
}

Expected<std::string_view> Tokenizer::token_text(int32_t token) const {
  DRIFT_RETURN_IF_ERROR(check_token(model_->vocab, token));
  return model_->vocab.text(token);
}

TokenizerType Tokenizer::type() const {
  return model_->vocab.type == VocabType::kSentencePiece ? TokenizerType::kSentencePiece
                                                         : TokenizerType::kByteLevelBpe;
}

std::string_view Tokenizer::pre_tokenizer() const {
  return model_->vocab.type == VocabType::kByteLevelBpe ? std::string_view(model_->vocab.pre.name)
                                                        : std::string_view();
}

int32_t Tokenizer::vocab_size() const { return model_->vocab.size(); }
std::optional<int32_t> Tokenizer::bos() const { return model_->vocab.special.bos; }
std::optional<int32_t> Tokenizer::eos() const { return model_->vocab.special.eos; }
std::optional<int32_t> Tokenizer::eot() const { return model_->vocab.special.eot; }
std::optional<int32_t> Tokenizer::eom() const { return model_->vocab.special.eom; }
std::optional<int32_t> Tokenizer::unk() const { return model_->vocab.special.unk; }
std::optional<int32_t> Tokenizer::pad() const { return model_->vocab.special.pad; }
bool Tokenizer::add_bos() const { return model_->vocab.add_bos; }
bool Tokenizer::add_eos() const { return model_->vocab.add_eos; }
bool Tokenizer::add_space_prefix() const { return model_->vocab.add_space_prefix; }
bool Tokenizer::clean_spaces() const { return model_->vocab.clean_spaces; }
std::span<const int32_t> Tokenizer::eog_tokens() const { return model_->vocab.eog_ids; }

bool Tokenizer::is_eog(int32_t token) const {
  const std::vector<int32_t>& eog = model_->vocab.eog_ids;
  return std::binary_search(eog.begin(), eog.end(), token);
}

std::optional<int32_t> Tokenizer::find_special(std::string_view text) const {
  const Vocab& vocab = model_->vocab;
  const std::optional<int32_t> id = vocab.find(text);
  if (!id || !vocab.has_attr(*id, kTokenAttrControl | kTokenAttrUserDefined)) return std::nullopt;
  return id;
}

bool Tokenizer::is_control(int32_t token) const {
  return model_->vocab.contains(token) && model_->vocab.has_attr(token, kTokenAttrControl);
}

}  // namespace drift
