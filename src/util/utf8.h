// The one UTF-8 codec. What to do with ill-formed bytes depends on who reads the result, so each
// function names its policy:
//   strict  — well-formed only (Unicode table 3-7): no overlong forms, no surrogates, nothing past
//             U+10FFFF. For checking client input (is_valid_utf8) and for the template engine,
//             which must answer as Python does (decode_utf8 with Utf8Policy::kStrict).
//   lenient — as llama.cpp's tokenizers decode: a lead byte followed by the continuation bytes it
//             announces is decoded as written, overlong forms and surrogates included
//             (Utf8Policy::kLenient), so drift's token ids match llama.cpp's for any input.
//   repair  — for text handed to a client: each maximal ill-formed subpart becomes one U+FFFD,
//             the Unicode-recommended practice that WHATWG decoders and Python's "replace" follow
//             (repair_utf8).
// Decoding never fails: under either decode policy a byte that does not start an acceptable
// sequence becomes one U+FFFD and decoding goes on at the next byte.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace drift {

inline constexpr uint32_t kReplacementCharacter = 0xFFFD;

enum class Utf8Policy : uint8_t { kStrict, kLenient };

// Appends the code points of `text` under `policy`.
void decode_utf8(std::string_view text, Utf8Policy policy, std::vector<uint32_t>& out);
std::u32string decode_utf8(std::string_view text, Utf8Policy policy);

// Appends the UTF-8 form of a code point. Strict: a surrogate or a value past U+10FFFF becomes
// U+FFFD; lenient: surrogates are encoded as written (the low 21 bits of anything larger).
void append_utf8(uint32_t cpt, std::string& out, Utf8Policy policy);
std::string encode_utf8(std::u32string_view text, Utf8Policy policy);

// Length of the sequence a lead byte announces, by its high bits alone, as llama.cpp's
// SentencePiece and BPE symbol splitting count it: 1 for ASCII and for stray continuation bytes,
// else 2, 3 or 4.
size_t utf8_sequence_length(uint8_t lead);

// Length of the longest prefix of `text` that does not stop inside a character: a trailing lead
// byte followed by fewer continuation bytes than it announces is left out, anything else
// (including invalid bytes, which no later byte can complete) is kept. For streaming output.
size_t utf8_complete_prefix_length(std::string_view text);

// Strict: the length of the well-formed prefix of `text` (all of it when it is valid), and
// whether all of it is.
size_t valid_utf8_prefix_length(std::string_view text);
inline bool is_valid_utf8(std::string_view text) {
  return valid_utf8_prefix_length(text) == text.size();
}

// Repair: `text` with every maximal ill-formed subpart replaced by U+FFFD (valid text unchanged).
std::string repair_utf8(std::string_view text);

}  // namespace drift
