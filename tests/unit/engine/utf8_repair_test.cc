#include "engine/utf8_repair.h"

#include <gtest/gtest.h>

namespace drift {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";

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
