// The text-level building blocks of the tokenizers: GPT-2's byte-level alphabet and the code point
// classes the pre-tokenizers split on (UTF-8 itself is tested in tests/unit/util/utf8_test.cc).
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "tokenizer/byte_level_mapping.h"
#include "tokenizer/unicode_categories.h"

namespace drift {
namespace {

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
