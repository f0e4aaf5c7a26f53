// Decodes generated tokens one at a time into text that is safe to show: each push returns only
// text that no later token can change, so a character whose bytes are spread over several tokens
// (byte-fallback or byte-level tokens) comes out whole, never as broken UTF-8, and the model's
// space clean-up (" ." -> ".") is applied once the following text is known. The concatenation of
// every push and finish() equals Tokenizer::decode of the whole sequence.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace drift {

class StreamingDecoder {
 public:
  explicit StreamingDecoder(Tokenizer tokenizer, DecodeOptions options = {});

  // Adds the next token and returns the text that became final (often empty). An id outside the
  // vocabulary is an error and leaves the decoder unchanged.
  Expected<std::string> push(int32_t token);

  // Ends the sequence: returns everything still held back, including the bytes of a character
  // that never completed, and makes the decoder ready for a new sequence.
  std::string finish();

 private:
  void append_piece(std::string_view piece, std::string& out);
  void release_complete_utf8(std::string_view text, std::string& out);

  Tokenizer tokenizer_;
  DecodeOptions options_;
  bool at_start_ = true;              // no token pushed yet
  bool strip_leading_space_ = false;  // the next piece is the first one decoded
  std::optional<int32_t> held_eos_;   // remove_special: an EOS dropped if nothing follows it
  std::string cleanup_window_;        // decoded text the space clean-up may still change
  std::string incomplete_utf8_;       // final text ending inside a character
};

}  // namespace drift
