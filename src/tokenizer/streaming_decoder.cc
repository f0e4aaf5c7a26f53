#include "tokenizer/streaming_decoder.h"

#include <utility>

#include "tokenizer/space_cleanup.h"
#include "util/utf8.h"

namespace drift {

StreamingDecoder::StreamingDecoder(Tokenizer tokenizer, DecodeOptions options)
    : tokenizer_(std::move(tokenizer)),
      options_(options),
      strip_leading_space_(tokenizer_.add_space_prefix()) {}

Expected<std::string> StreamingDecoder::push(int32_t token) {
  DRIFT_ASSIGN_OR_RETURN(const std::string_view piece,
                         tokenizer_.token_to_piece(token, options_.render_special));
  std::string out;
  const bool first = std::exchange(at_start_, false);
  // As Tokenizer::decode: a leading BOS is dropped (and the first piece then keeps its space);
  // a trailing EOS is dropped, which is only known once another token follows or the stream ends.
  if (first && options_.remove_special && tokenizer_.add_bos() && token == tokenizer_.bos()) {
    strip_leading_space_ = false;
    return out;
  }
  if (held_eos_) {
    append_piece(*tokenizer_.token_to_piece(*held_eos_, options_.render_special), out);
    held_eos_.reset();
  }
  if (options_.remove_special && tokenizer_.add_eos() && token == tokenizer_.eos()) {
    held_eos_ = token;
    return out;
  }
  append_piece(piece, out);
  return out;
}

std::string StreamingDecoder::finish() {
  std::string out = std::move(incomplete_utf8_);
  out +=
      tokenizer_.clean_spaces() ? clean_up_tokenization_spaces(cleanup_window_) : cleanup_window_;
  *this = StreamingDecoder(std::move(tokenizer_), options_);
  return out;
}

void StreamingDecoder::append_piece(std::string_view piece, std::string& out) {
  if (std::exchange(strip_leading_space_, false) && !piece.empty() && piece.front() == ' ') {
    piece.remove_prefix(1);
  }
  if (!tokenizer_.clean_spaces()) {
    release_complete_utf8(piece, out);
    return;
  }
  // Clean up to the last point where the clean-up of what follows cannot reach back.
  cleanup_window_ += piece;
  size_t cut = cleanup_window_.size();
  while (cut >= 2 && !is_space_cleanup_boundary(cleanup_window_, cut)) --cut;
  if (cut < 2) return;
  const std::string cleaned =
      clean_up_tokenization_spaces(std::string_view(cleanup_window_).substr(0, cut));
  cleanup_window_.erase(0, cut);
  release_complete_utf8(cleaned, out);
}

void StreamingDecoder::release_complete_utf8(std::string_view text, std::string& out) {
  incomplete_utf8_ += text;
  const size_t complete = utf8_complete_prefix_length(incomplete_utf8_);
  out.append(incomplete_utf8_, 0, complete);
  incomplete_utf8_.erase(0, complete);
}

}  // namespace drift
