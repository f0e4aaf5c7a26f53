#include "tokenizer/byte_level_mapping.h"

#include <array>

namespace drift {
namespace {

constexpr bool is_printable_latin1(uint32_t byte) {
  return (byte >= 0x21 && byte <= 0x7E) || (byte >= 0xA1 && byte <= 0xAC) ||
         (byte >= 0xAE && byte <= 0xFF);
}

constexpr std::array<uint16_t, 256> make_byte_to_codepoint() {
  std::array<uint16_t, 256> table{};
  uint16_t next_substitute = 0x100;
  for (uint32_t byte = 0; byte < 256; ++byte) {
    table[byte] = is_printable_latin1(byte) ? static_cast<uint16_t>(byte) : next_substitute++;
  }
  return table;
}

constexpr std::array<uint16_t, 256> kByteToCodepoint = make_byte_to_codepoint();
constexpr uint32_t kFirstSubstitute = 0x100;
constexpr uint32_t kSubstituteCount = 68;

// The substitutes in order: index k is the byte written as U+0100 + k.
constexpr std::array<uint8_t, kSubstituteCount> make_substitute_bytes() {
  std::array<uint8_t, kSubstituteCount> table{};
  for (uint32_t byte = 0; byte < 256; ++byte) {
    if (!is_printable_latin1(byte)) table[kByteToCodepoint[byte] - kFirstSubstitute] = byte;
  }
  return table;
}

constexpr std::array<uint8_t, kSubstituteCount> kSubstituteBytes = make_substitute_bytes();

}  // namespace

uint32_t byte_level_codepoint(uint8_t byte) { return kByteToCodepoint[byte]; }

std::optional<uint8_t> byte_level_byte(uint32_t cpt) {
  if (cpt < 256) {
    if (is_printable_latin1(cpt)) return static_cast<uint8_t>(cpt);
    return std::nullopt;
  }
  if (cpt - kFirstSubstitute < kSubstituteCount) return kSubstituteBytes[cpt - kFirstSubstitute];
  return std::nullopt;
}

}  // namespace drift
