// util/utf8's three policies: lenient decoding as llama.cpp's tokenizers do it, strict decoding as
// Python (the template engine) does it, repair for text handed to clients; and the completeness
// test streaming relies on.
#include "util/utf8.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace drift {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";

std::vector<uint32_t> decode(std::string_view text) {
  std::vector<uint32_t> cpts;
  decode_utf8(text, Utf8Policy::kLenient, cpts);
  return cpts;
}

TEST(Utf8Lenient, ValidTextGivesItsCodePoints) {
  EXPECT_EQ(decode("aé中🙂"), (std::vector<uint32_t>{'a', 0xE9, 0x4E2D, 0x1F642}));
  EXPECT_EQ(decode(std::string("a\0b", 3)), (std::vector<uint32_t>{'a', 0, 'b'}));
}

TEST(Utf8Lenient, EachBadByteBecomesOneReplacementCharacter) {
  constexpr uint32_t R = kReplacementCharacter;
  EXPECT_EQ(decode("\xFF\xFE"), (std::vector<uint32_t>{R, R}));
  EXPECT_EQ(decode("\x80z"), (std::vector<uint32_t>{R, 'z'}));
  // A truncated sequence: the lead byte and each continuation byte are replaced one by one.
  EXPECT_EQ(decode("\xE2\x82z"), (std::vector<uint32_t>{R, R, 'z'}));
  EXPECT_EQ(decode("\xF0\x9F\x98"), (std::vector<uint32_t>{R, R, R}));
  // Past U+10FFFF.
  EXPECT_EQ(decode("\xF4\x90\x80\x80"), (std::vector<uint32_t>{R, R, R, R}));
}

TEST(Utf8Lenient, OverlongFormsAndSurrogatesAreReadAsWritten) {
  EXPECT_EQ(decode("\xC0\xAF"), (std::vector<uint32_t>{'/'}));
  EXPECT_EQ(decode("\xED\xA0\x80"), (std::vector<uint32_t>{0xD800}));
}

TEST(Utf8Lenient, EncodingRoundTripsEveryLength) {
  for (const uint32_t cpt : {0x00u, 0x7Fu, 0x80u, 0x7FFu, 0x800u, 0xFFFFu, 0x10000u, 0x10FFFFu}) {
    std::string utf8;
    append_utf8(cpt, utf8, Utf8Policy::kLenient);
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

TEST(Utf8Strict, RefusesOverlongFormsAndSurrogatesByteByByte) {
  constexpr char32_t R = char32_t(kReplacementCharacter);
  EXPECT_EQ(decode_utf8("a\xC3\xA9\xF0\x9F\x98\x80", Utf8Policy::kStrict),
            (std::u32string{U'a', 0xE9, 0x1F600}));
  EXPECT_EQ(decode_utf8("\xC0\xAF", Utf8Policy::kStrict), (std::u32string{R, R}));
  EXPECT_EQ(decode_utf8("\xED\xA0\x80", Utf8Policy::kStrict), (std::u32string{R, R, R}));
  EXPECT_EQ(decode_utf8("\xE2\x82z", Utf8Policy::kStrict), (std::u32string{R, R, U'z'}));
  // What the two decode policies agree on: everything well-formed.
  std::vector<uint32_t> lenient;
  decode_utf8("caf\xC3\xA9 \xE4\xB8\xAD", Utf8Policy::kLenient, lenient);
  const std::u32string strict = decode_utf8("caf\xC3\xA9 \xE4\xB8\xAD", Utf8Policy::kStrict);
  EXPECT_EQ(std::vector<uint32_t>(strict.begin(), strict.end()), lenient);
}

TEST(Utf8Strict, EncodingReplacesWhatIsNotACharacter) {
  EXPECT_EQ(encode_utf8(std::u32string{0xD800, U'a', 0x110000}, Utf8Policy::kStrict),
            "\xEF\xBF\xBD"
            "a"
            "\xEF\xBF\xBD");
  std::string lenient;
  append_utf8(0xD800, lenient, Utf8Policy::kLenient);
  EXPECT_EQ(lenient, "\xED\xA0\x80") << "a surrogate, as written";
}

TEST(Utf8Repair, WellFormedTextPassesUnchanged) {
  for (std::string s : {"", "plain ascii", "caf\xC3\xA9", "\xE2\x82\xAC 5", "\xF0\x9F\x98\x80",
                        "\xF4\x8F\xBF\xBF", "\xED\x9F\xBF"}) {
    EXPECT_EQ(valid_utf8_prefix_length(s), s.size()) << s;
    EXPECT_EQ(repair_utf8(s), s);
  }
}

TEST(Utf8Repair, EachMaximalSubpartBecomesOneReplacement) {
  // Cases from the Unicode standard's "U+FFFD substitution of maximal subparts" (table 3-8).
  EXPECT_EQ(repair_utf8("a\xE2\x82"), "a" + kFffd);  // truncated 3-byte
  EXPECT_EQ(repair_utf8("\xE2\x82"
                        "b"),
            kFffd + "b");                                                     // cut short by ASCII
  EXPECT_EQ(repair_utf8("\xF0\x9F\x98"), kFffd);                              // truncated 4-byte
  EXPECT_EQ(repair_utf8("\x80\xBF"), kFffd + kFffd);                          // lone continuations
  EXPECT_EQ(repair_utf8("\xC0\xAF"), kFffd + kFffd);                          // overlong lead C0
  EXPECT_EQ(repair_utf8("\xE0\x80\xAF"), kFffd + kFffd + kFffd);              // overlong 3-byte
  EXPECT_EQ(repair_utf8("\xED\xA0\x80"), kFffd + kFffd + kFffd);              // a surrogate
  EXPECT_EQ(repair_utf8("\xF4\x90\x80\x80"), kFffd + kFffd + kFffd + kFffd);  // > U+10FFFF
  EXPECT_EQ(repair_utf8("\xF5"), kFffd);
  EXPECT_EQ(repair_utf8("\xE2\xE2\x82\xAC"), kFffd + "\xE2\x82\xAC");  // bad lead, then a €
  EXPECT_EQ(valid_utf8_prefix_length("ok\xE2\x82"), 2u);
}

}  // namespace
}  // namespace drift
