#include "tokenizer/utf8.h"

namespace drift {
namespace {

bool is_continuation(uint8_t byte) { return (byte & 0xC0) == 0x80; }

}  // namespace

size_t utf8_sequence_length(uint8_t lead) {
  if (lead < 0xC0) return 1;  // ASCII, or a continuation byte standing alone
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  return 4;
}

void decode_utf8_lossy(std::string_view text, std::vector<uint32_t>& out) {
  const auto* bytes = reinterpret_cast<const uint8_t*>(text.data());
  const size_t size = text.size();
  size_t i = 0;
  while (i < size) {
    const uint8_t lead = bytes[i];
    if (lead < 0x80) {
      out.push_back(lead);
      ++i;
      continue;
    }
    // Lead bytes 0xC0..0xF7 announce 1..3 continuation bytes; 0x80..0xBF and 0xF8..0xFF are never
    // valid leads.
    size_t n_continuation = 0;
    uint32_t cpt = 0;
    if (lead >= 0xC0 && lead < 0xE0) {
      n_continuation = 1;
      cpt = lead & 0x1F;
    } else if (lead >= 0xE0 && lead < 0xF0) {
      n_continuation = 2;
      cpt = lead & 0x0F;
    } else if (lead >= 0xF0 && lead < 0xF8) {
      n_continuation = 3;
      cpt = lead & 0x07;
    }
    bool complete = n_continuation > 0 && i + n_continuation < size;
    for (size_t k = 1; complete && k <= n_continuation; ++k) {
      if (!is_continuation(bytes[i + k])) complete = false;
      cpt = (cpt << 6) | (bytes[i + k] & 0x3F);
    }
    if (!complete || cpt > 0x10FFFF) {
      out.push_back(kReplacementCharacter);
      ++i;
      continue;
    }
    out.push_back(cpt);
    i += 1 + n_continuation;
  }
}

void append_utf8(uint32_t cpt, std::string& out) {
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

bool is_valid_utf8(std::string_view text) {
  const auto* bytes = reinterpret_cast<const uint8_t*>(text.data());
  const size_t size = text.size();
  size_t i = 0;
  while (i < size) {
    const uint8_t lead = bytes[i];
    if (lead < 0x80) {
      ++i;
      continue;
    }
    size_t n = 0;
    uint32_t min = 0;
    uint32_t cpt = 0;
    if (lead >= 0xC2 && lead < 0xE0) {
      n = 1, min = 0x80, cpt = lead & 0x1F;
    } else if (lead >= 0xE0 && lead < 0xF0) {
      n = 2, min = 0x800, cpt = lead & 0x0F;
    } else if (lead >= 0xF0 && lead < 0xF5) {
      n = 3, min = 0x10000, cpt = lead & 0x07;
    } else {
      return false;
    }
    if (size - i <= n) return false;
    for (size_t k = 1; k <= n; ++k) {
      if (!is_continuation(bytes[i + k])) return false;
      cpt = (cpt << 6) | (bytes[i + k] & 0x3F);
    }
    if (cpt < min || cpt > 0x10FFFF || (cpt >= 0xD800 && cpt <= 0xDFFF)) return false;
    i += n + 1;
  }
  return true;
}

}  // namespace drift
