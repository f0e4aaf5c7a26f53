#include "engine/utf8_repair.h"

#include <cstdint>

namespace drift {

namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// Bytes of the well-formed sequence starting at text[i] (Unicode table 3-7), or, when there is
// none, the negated length of its maximal subpart: the longest prefix that could still have
// begun a well-formed sequence (at least 1 byte).
int sequence_at(std::string_view text, size_t i) {
  const auto byte = [&](size_t k) { return uint8_t(text[k]); };
  const uint8_t lead = byte(i);
  if (lead < 0x80) return 1;
  int length = 0;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) lo = 0xA0;  // no overlong forms
    if (lead == 0xED) hi = 0x9F;  // no surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) lo = 0x90;  // no overlong forms
    if (lead == 0xF4) hi = 0x8F;  // nothing past U+10FFFF
  } else {
    return -1;  // a continuation byte, C0, C1 or F5..FF: never starts a character
  }
  for (int k = 1; k < length; ++k) {
    if (i + size_t(k) >= text.size()) return -k;
    const uint8_t b = byte(i + size_t(k));
    const bool ok = k == 1 ? (b >= lo && b <= hi) : (b >= 0x80 && b <= 0xBF);
    if (!ok) return -k;
  }
  return length;
}

}  // namespace

size_t valid_utf8_prefix_length(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    if (uint8_t(text[i]) < 0x80) {  // the common case, ASCII
      ++i;
      continue;
    }
    const int n = sequence_at(text, i);
    if (n < 0) break;
    i += size_t(n);
  }
  return i;
}

std::string repair_utf8(std::string_view text) {
  size_t i = valid_utf8_prefix_length(text);
  std::string out(text.substr(0, i));
  while (i < text.size()) {
    const int n = sequence_at(text, i);
    if (n > 0) {
      out.append(text.substr(i, size_t(n)));
      i += size_t(n);
    } else {
      out.append(kReplacement);
      i += size_t(-n);
    }
  }
  return out;
}

}  // namespace drift
