#include "tokenizer/token_pieces.h"

#include <fmt/format.h>

#include <vector>

#include "tokenizer/byte_level_mapping.h"
#include "util/utf8.h"

namespace drift {
namespace {

constexpr std::string_view kSentencePieceSpace = "\xE2\x96\x81";  // U+2581

std::string unescape_sentencepiece(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    if (text.substr(i, kSentencePieceSpace.size()) == kSentencePieceSpace) {
      out.push_back(' ');
      i += kSentencePieceSpace.size();
    } else {
      out.push_back(text[i++]);
    }
  }
  return out;
}

// Byte-level characters back to bytes. A character outside the alphabet cannot come from a
// correctly converted vocabulary; llama.cpp writes it as "[UNK_BYTE_0x<utf-8 hex><token text>]",
// and so does this.
std::string decode_byte_level(std::string_view text) {
  std::vector<uint32_t> cpts;
  decode_utf8(text, Utf8Policy::kLenient, cpts);
  std::string out;
  out.reserve(text.size());
  for (const uint32_t cpt : cpts) {
    if (const auto byte = byte_level_byte(cpt)) {
      out.push_back(static_cast<char>(*byte));
      continue;
    }
    std::string utf8;
    append_utf8(cpt, utf8, Utf8Policy::kLenient);
    out += "[UNK_BYTE_0x";
    for (const char c : utf8) out += fmt::format("{:02x}", static_cast<uint8_t>(c));
    out += text;
    out += "]";
  }
  return out;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The byte of a byte token "<0xXX>": the hex digits at [3, 5), read as far as they are hex (as
// strtol reads them), 0 when there are none.
char byte_token_value(std::string_view text) {
  int value = 0;
  for (size_t i = 3; i < 5 && i < text.size(); ++i) {
    const int digit = hex_digit(text[i]);
    if (digit < 0) break;
    value = value * 16 + digit;
  }
  return static_cast<char>(value);
}

}  // namespace

std::string render_token_piece(VocabType type, std::string_view text, uint32_t attr) {
  if (attr & (kTokenAttrUnknown | kTokenAttrControl | kTokenAttrUserDefined)) {
    return std::string(text);
  }
  if (attr & kTokenAttrNormal) {
    return type == VocabType::kSentencePiece ? unescape_sentencepiece(text)
                                             : decode_byte_level(text);
  }
  if (attr & kTokenAttrByte) return std::string(1, byte_token_value(text));
  return {};
}

}  // namespace drift
