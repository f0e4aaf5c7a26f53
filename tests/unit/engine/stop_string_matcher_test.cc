#include "engine/stop_string_matcher.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace drift {
namespace {

// Feeds deltas and returns everything released, and whether a stop string matched.
std::pair<std::string, bool> run(std::vector<std::string> stops, std::vector<std::string> deltas) {
  StopStringMatcher m(std::move(stops));
  std::string out;
  for (const auto& d : deltas) {
    auto r = m.push(d);
    out += r.text;
    if (r.stopped) return {out, true};
  }
  return {out + m.flush(), false};
}

TEST(StopStringMatcher, NoStopsPassesEverythingThrough) {
  StopStringMatcher m({});
  EXPECT_EQ(m.push("Hello").text, "Hello");
  EXPECT_EQ(m.push(" world").text, " world");
  EXPECT_EQ(m.flush(), "");
}

TEST(StopStringMatcher, HoldsBackAPossiblePrefixUntilItCannotMatch) {
  StopStringMatcher m({"END"});
  auto a = m.push("abc E");
  EXPECT_EQ(a.text, "abc ");  // "E" may start "END"
  EXPECT_FALSE(a.stopped);
  auto b = m.push("N");
  EXPECT_EQ(b.text, "");  // "EN" still may
  auto c = m.push("x");
  EXPECT_EQ(c.text, "ENx");  // "ENx" cannot
  EXPECT_FALSE(c.stopped);
}

TEST(StopStringMatcher, StopSpanningThreeDeltasCutsBeforeIt) {
  auto [text, stopped] = run({"<stop>"}, {"one <s", "to", "p> two"});
  EXPECT_TRUE(stopped);
  EXPECT_EQ(text, "one ");
}

TEST(StopStringMatcher, EarliestOfSeveralStopsWins) {
  auto [text, stopped] = run({"xyz", "b"}, {"a", "bxyz"});
  EXPECT_TRUE(stopped);
  EXPECT_EQ(text, "a");
}

TEST(StopStringMatcher, StopInsideOneDelta) {
  auto [text, stopped] = run({"\n\n"}, {"line one\n\nline two"});
  EXPECT_TRUE(stopped);
  EXPECT_EQ(text, "line one");
}

TEST(StopStringMatcher, FlushReleasesHeldTextWhenGenerationEnds) {
  auto [text, stopped] = run({"ENDING"}, {"the END"});
  EXPECT_FALSE(stopped);
  EXPECT_EQ(text, "the END");
}

TEST(StopStringMatcher, NothingAfterAStop) {
  StopStringMatcher m({"x"});
  EXPECT_TRUE(m.push("ax").stopped);
  auto later = m.push("more");
  EXPECT_EQ(later.text, "");
  EXPECT_EQ(m.flush(), "");
}

TEST(StopStringMatcher, MultiByteCharactersAreNeverSplit) {
  // "é" is C3 A9; a stop string starting with "é" holds the whole character back.
  StopStringMatcher m({"\xC3\xA9t\xC3\xA9"});
  auto a = m.push("caf\xC3\xA9");
  EXPECT_EQ(a.text, "caf");
  auto b = m.push("s");
  EXPECT_EQ(b.text, "\xC3\xA9s");
}

TEST(StopStringMatcher, LongestPrefixAmongOverlappingStops) {
  StopStringMatcher m({"abcd", "bcx"});
  // "abc" is a prefix of "abcd" (3 bytes), "bc" of "bcx" (2): hold 3.
  EXPECT_EQ(m.push("zabc").text, "z");
  auto r = m.push("x");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "a");  // "z" went out with the first push
}

TEST(StopStringMatcher, EmptyStopStringsAreIgnored) {
  auto [text, stopped] = run({""}, {"abc"});
  EXPECT_FALSE(stopped);
  EXPECT_EQ(text, "abc");
}

}  // namespace
}  // namespace drift
