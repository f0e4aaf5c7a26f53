#include "util/utf8.h"

namespace drift {
namespace {

constexpr std::string_view kReplacementUtf8 = "\xEF\xBF\xBD";  // U+FFFD

bool is_continuation(uint8_t byte) { return (byte & 0xC0) == 0x80; }

// Decodes text, calling emit(code point) for each character or U+FFFD. Lead bytes C0..F7
// announce 1..3 continuation bytes; 80..BF and F8..FF never lead. Lenient accepts whatever the
// announced bytes spell up to U+10FFFF; strict also refuses overlong forms and surrogates.
template <typename Emit>
void decode_with(std::string_view text, Utf8Policy policy, Emit emit) {
  const auto* bytes = reinterpret_cast<const uint8_t*>(text.data());
  const size_t size = text.size();
  size_t i = 0;
  while (i < size) {
    const uint8_t lead = bytes[i];
    if (lead < 0x80) {
      emit(lead);
      ++i;
      continue;
    }
    size_t n_continuation = 0;
    uint32_t cpt = 0;
    uint32_t min = 0;
    if (lead >= 0xC0 && lead < 0xE0) {
      n_continuation = 1, cpt = lead & 0x1F, min = 0x80;
    } else if (lead >= 0xE0 && lead < 0xF0) {
      n_continuation = 2, cpt = lead & 0x0F, min = 0x800;
    } else if (lead >= 0xF0 && lead < 0xF8) {
      n_continuation = 3, cpt = lead & 0x07, min = 0x10000;
    }
    bool ok = n_continuation > 0 && i + n_continuation < size;
    for (size_t k = 1; ok && k <= n_continuation; ++k) {
      if (!is_continuation(bytes[i + k])) ok = false;
      cpt = (cpt << 6) | (bytes[i + k] & 0x3F);
    }
    ok = ok && cpt <= 0x10FFFF;
    if (ok && policy == Utf8Policy::kStrict) ok = cpt >= min && !(cpt >= 0xD800 && cpt <= 0xDFFF);
    if (!ok) {
      emit(kReplacementCharacter);
      ++i;
      continue;
    }
    emit(cpt);
    i += 1 + n_continuation;
  }
}

// Bytes of the well-formed sequence starting at text[i] (Unicode table 3-7), or, when there is
// none, the negated length of its maximal subpart: the longest prefix that could still have
// begun a well-formed sequence (at least 1 byte).
int well_formed_sequence_at(std::string_view text, size_t i) {
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

void decode_utf8(std::string_view text, Utf8Policy policy, std::vector<uint32_t>& out) {
  decode_with(text, policy, [&](uint32_t cpt) { out.push_back(cpt); });
}

std::u32string decode_utf8(std::string_view text, Utf8Policy policy) {
  std::u32string out;
  out.reserve(text.size());
  decode_with(text, policy, [&](uint32_t cpt) { out.push_back(char32_t(cpt)); });
  return out;
}

void append_utf8(uint32_t cpt, std::string& out, Utf8Policy policy) {
  if (policy == Utf8Policy::kStrict && (cpt > 0x10FFFF || (cpt >= 0xD800 && cpt <= 0xDFFF)))
    cpt = kReplacementCharacter;
  if (cpt < 0x80) {
    out.push_back(static_cast<char>(cpt));
  } else if (cpt < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cpt >> 6)));
    out.push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  } else if (cpt < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cpt >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cpt >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | ((cpt >> 18) & 0x07)));
    out.push_back(static_cast<char>(0x80 | ((cpt >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cpt >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  }
}

std::string encode_utf8(std::u32string_view text, Utf8Policy policy) {
  std::string out;
  out.reserve(text.size());
  for (char32_t c : text) append_utf8(uint32_t(c), out, policy);
  return out;
}

size_t utf8_sequence_length(uint8_t lead) {
  if (lead < 0xC0) return 1;  // ASCII, or a continuation byte standing alone
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  return 4;
}

size_t utf8_complete_prefix_length(std::string_view text) {
  const size_t size = text.size();
  // Find the last byte that is not a continuation byte, at most 3 bytes back from the end.
  size_t n_trailing = 0;
  while (n_trailing < size && n_trailing < 3 &&
         is_continuation(static_cast<uint8_t>(text[size - 1 - n_trailing]))) {
    ++n_trailing;
  }
  if (n_trailing == size) return size;  // only continuation bytes: nothing can complete them
  const auto lead = static_cast<uint8_t>(text[size - 1 - n_trailing]);
  if (lead < 0xC0 || lead >= 0xF8) return size;  // ASCII or an invalid lead: already final
  const size_t needed = utf8_sequence_length(lead) - 1;
  return n_trailing < needed ? size - 1 - n_trailing : size;
}

size_t valid_utf8_prefix_length(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    if (uint8_t(text[i]) < 0x80) {  // the common case, ASCII
      ++i;
      continue;
    }
    const int n = well_formed_sequence_at(text, i);
    if (n < 0) break;
    i += size_t(n);
  }
  return i;
}

std::string repair_utf8(std::string_view text) {
  size_t i = valid_utf8_prefix_length(text);
  std::string out(text.substr(0, i));
  while (i < text.size()) {
    const int n = well_formed_sequence_at(text, i);
    if (n > 0) {
      out.append(text.substr(i, size_t(n)));
      i += size_t(n);
    } else {
      out.append(kReplacementUtf8);
      i += size_t(-n);
    }
  }
  return out;
}

}  // namespace drift
