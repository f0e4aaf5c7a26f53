// GPT-2's byte-level alphabet: each of the 256 byte values is written as one printable character
// (printable Latin-1 bytes as themselves, the other 68 as U+0100..U+0143 in byte order), so that
// byte-level BPE vocabularies hold text-like tokens ("Ġ" for a space, "Ċ" for a newline).
#pragma once

#include <cstdint>
#include <optional>

namespace drift {

// The character that stands for `byte`.
uint32_t byte_level_codepoint(uint8_t byte);

// The byte a character stands for; nullopt for characters outside the alphabet.
std::optional<uint8_t> byte_level_byte(uint32_t cpt);

}  // namespace drift
