// UTF-8 as the tokenizers need it: lenient where llama.cpp is lenient (its encoders never reject
// input), and a completeness test for streaming output.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace drift {

inline constexpr uint32_t kReplacementCharacter = 0xFFFD;

// Length of the sequence a lead byte announces, by its high bits alone, as llama.cpp's
// SentencePiece and BPE symbol splitting count it: 1 for ASCII and for stray continuation bytes,
// else 2, 3 or 4.
size_t utf8_sequence_length(uint8_t lead);

// Appends the code points of `text`, replacing each byte that does not start a complete sequence
// (lead byte followed by enough continuation bytes, value at most U+10FFFF) by one U+FFFD. Overlong
// forms and surrogates are decoded as written, as llama.cpp's BPE pre-tokenizer does.
void decode_utf8_lossy(std::string_view text, std::vector<uint32_t>& out);

// Appends the UTF-8 form of a code point (up to U+10FFFF; surrogates are encoded as written).
void append_utf8(uint32_t cpt, std::string& out);

// Length of the longest prefix of `text` that does not stop inside a character: a trailing lead
// byte followed by fewer continuation bytes than it announces is left out, anything else
// (including invalid bytes, which no later byte can complete) is kept.
size_t utf8_complete_prefix_length(std::string_view text);

// Whether `text` is well-formed UTF-8 (no overlong forms, no surrogates, nothing past U+10FFFF).
bool is_valid_utf8(std::string_view text);

}  // namespace drift
