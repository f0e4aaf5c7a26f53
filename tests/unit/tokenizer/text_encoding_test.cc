// The text-level building blocks of the tokenizers: lenient UTF-8 decoding as llama.cpp does it,
// the completeness test streaming relies on, GPT-2's byte-level alphabet and the code point
// classes the pre-tokenizers split on.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "tokenizer/byte_level_mapping.h"
#include "tokenizer/unicode_categories.h"
#include "tokenizer/utf8.h"

namespace drift {
namespace {

std::vector<uint32_t> decode(std::string_view text) {
  std::vector<uint32_t> cpts;
  decode_utf8_lossy(text, cpts);
  return cpts;
}

TEST(Utf8Decode, ValidTextGivesItsCodePoints) {
  EXPECT_EQ(decode("aé中🙂"), (std::vector<uint32_t>{'a', 0xE9, 0x4E2D, 0x1F642}));
  EXPECT_EQ(decode(std::string("a\0b", 3)), (std::vector<uint32_t>{'a', 0, 'b'}));
}

TEST(Utf8Decode, EachBadByteBecomesOneReplacementCharacter) {
  constexpr uint32_t R = kReplacementCharacter;
  EXPECT_EQ(decode("\xFF\xFE"), (std::vector<uint32_t>{R, R}));
  EXPECT_EQ(decode("\x80z"), (std::vector<uint32_t>{R, 'z'}));
  // A truncated sequence: the lead byte and each continuation byte are replaced one by one.
  EXPECT_EQ(decode("\xE2\x82z"), (std::vector<uint32_t>{R, R, 'z'}));
  EXPECT_EQ(decode("\xF0\x9F\x98"), (std::vector<uint32_t>{R, R, R}));
  // Past U+10FFFF.
  EXPECT_EQ(decode("\xF4\x90\x80\x80"), (std::vector<uint32_t>{R, R, R, R}));
}

TEST(Utf8Decode, OverlongFormsAndSurrogatesAreReadAsWritten) {
  EXPECT_EQ(decode("\xC0\xAF"), (std::vector<uint32_t>{'/'}));
  EXPECT_EQ(decode("\xED\xA0\x80"), (std::vector<uint32_t>{0xD800}));
}

TEST(Utf8Encode, RoundTripsEveryLength) {
  for (const uint32_t cpt : {0x00u, 0x7Fu, 0x80u, 0x7FFu, 0x800u, 0xFFFFu, 0x10000u, 0x10FFFFu}) {
    std::string utf8;
    append_utf8(cpt, utf8);
    EXPECT_EQ(decode(utf8), std::vector<uint32_t>{cpt}) << cpt;
  }
}

TEST(Utf8CompletePrefix, HoldsBackOnlyACharacterStillBeingWritten) {
  EXPECT_EQ(utf8_complete_prefix_length(""), 0u);
  EXPECT_EQ(utf8_complete_prefix_length("ab"), 2u);
  EXPECT_EQ(utf8_complete_prefix_length("a\xF0\x9F\x98"), 1u);  // 3 of the 4 bytes of 🙂
  EXPECT_EQ(utf8_complete_prefix_length("a\xF0\x9F\x98\x82"), 5u);
  EXPECT_EQ(utf8_complete_prefix_length("a\xC3"), 1u);
  EXPECT_EQ(utf8_complete_prefix_length("a\xE4\xB8"), 1u);
  // Bytes no continuation can complete are released at once.
  EXPECT_EQ(utf8_complete_prefix_length("a\x80"), 2u);
  EXPECT_EQ(utf8_complete_prefix_length("a\xFF"), 2u);
  EXPECT_EQ(utf8_complete_prefix_length("\x80\x80\x80\x80"), 4u);
}

TEST(Utf8Validity, RejectsEveryKindOfMalformedText) {
  EXPECT_TRUE(is_valid_utf8("plain, é, 中, 🙂"));
  EXPECT_FALSE(is_valid_utf8("\xC0\xAF"));          // overlong
  EXPECT_FALSE(is_valid_utf8("\xED\xA0\x80"));      // surrogate
  EXPECT_FALSE(is_valid_utf8("\xF4\x90\x80\x80"));  // past U+10FFFF
  EXPECT_FALSE(is_valid_utf8("\xE2\x82"));          // truncated
  EXPECT_FALSE(is_valid_utf8("\x80"));
}

TEST(ByteLevelMapping, IsGpt2sAlphabet) {
  EXPECT_EQ(byte_level_codepoint(' '), 0x120u);   // Ġ
  EXPECT_EQ(byte_level_codepoint('\n'), 0x10Au);  // Ċ
  EXPECT_EQ(byte_level_codepoint('\t'), 0x109u);  // ĉ
  EXPECT_EQ(byte_level_codepoint(0x00), 0x100u);
  EXPECT_EQ(byte_level_codepoint('a'), static_cast<uint32_t>('a'));
  EXPECT_EQ(byte_level_codepoint(0xAD), 0x143u);  // the soft hyphen is the last substitute
  EXPECT_EQ(byte_level_codepoint(0xE9), 0xE9u);
}

TEST(ByteLevelMapping, IsABijectionOnTheBytes) {
  std::set<uint32_t> seen;
  for (int b = 0; b < 256; ++b) {
    const uint32_t cpt = byte_level_codepoint(static_cast<uint8_t>(b));
    EXPECT_TRUE(seen.insert(cpt).second) << b;
    EXPECT_EQ(byte_level_byte(cpt), static_cast<uint8_t>(b));
  }
  EXPECT_FALSE(byte_level_byte(' ').has_value());
  EXPECT_FALSE(byte_level_byte(0x144).has_value());
  EXPECT_FALSE(byte_level_byte(0x4E2D).has_value());
}

TEST(CodepointClass, FollowsUnicode15Point1) {
  EXPECT_EQ(codepoint_class('a'), CodepointClass::kLetter);
  EXPECT_EQ(codepoint_class('7'), CodepointClass::kNumber);
  EXPECT_EQ(codepoint_class(' '), CodepointClass::kSeparator);
  EXPECT_EQ(codepoint_class('\n'), CodepointClass::kControl);
  EXPECT_EQ(codepoint_class('$'), CodepointClass::kSymbol);
  EXPECT_EQ(codepoint_class('_'), CodepointClass::kPunctuation);
  EXPECT_EQ(codepoint_class(0x0663), CodepointClass::kNumber);  // ٣
  EXPECT_EQ(codepoint_class(0x216B), CodepointClass::kNumber);  // Ⅻ (Nl)
  EXPECT_EQ(codepoint_class(0x0301), CodepointClass::kMark);
  EXPECT_EQ(codepoint_class(0x4E2D), CodepointClass::kLetter);
  EXPECT_EQ(codepoint_class(0x1F642), CodepointClass::kSymbol);
  EXPECT_EQ(codepoint_class(0x200B), CodepointClass::kControl);  // zero width space (Cf)
  // New in Unicode 15.1 (llama.cpp's tables), unassigned in 14.
  EXPECT_EQ(codepoint_class(0x2FFC), CodepointClass::kSymbol);
  EXPECT_EQ(codepoint_class(0x2EBF0), CodepointClass::kLetter);
  // Assigned only in Unicode 16.
  EXPECT_EQ(codepoint_class(0x10D40), CodepointClass::kUndefined);
  EXPECT_EQ(codepoint_class(0x110000), CodepointClass::kUndefined);
}

TEST(CodepointClass, WhitespaceIsTheWhiteSpaceProperty) {
  for (const uint32_t c : {0x09u, 0x0Au, 0x0Bu, 0x0Cu, 0x0Du, 0x20u, 0x85u, 0xA0u, 0x1680u, 0x2000u,
                           0x200Au, 0x2028u, 0x2029u, 0x202Fu, 0x205Fu, 0x3000u}) {
    EXPECT_TRUE(is_unicode_whitespace(c)) << c;
  }
  for (const uint32_t c : {0x08u, 0x0Eu, 0x200Bu, 0x180Eu, 0xFEFFu, static_cast<uint32_t>('a')}) {
    EXPECT_FALSE(is_unicode_whitespace(c)) << c;
  }
}

}  // namespace
}  // namespace drift
