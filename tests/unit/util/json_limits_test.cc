#include "util/json_limits.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

namespace drift {
namespace {

using nlohmann::json;

TEST(JsonNestingDepth, CountsBracketsOutsideStringsOnly) {
  EXPECT_EQ(json_nesting_depth("{}", 64), 1);
  EXPECT_EQ(json_nesting_depth("7", 64), 0);
  EXPECT_EQ(json_nesting_depth(R"({"a": [[1], {"b": []}]})", 64), 4);
  EXPECT_EQ(json_nesting_depth(R"({"a": "[[[[{{{{"})", 64), 1);
  EXPECT_EQ(json_nesting_depth(R"({"a": "\"[[[["})", 64), 1);     // escaped quote stays in string
  EXPECT_EQ(json_nesting_depth(std::string(1000, '['), 64), 65);  // stops at limit + 1
}

TEST(ParseBoundedJson, ParsesWhatIsWithinTheLimits) {
  Expected<json> v = parse_bounded_json<json>(R"({"a": [1, {"b": null}]})");
  ASSERT_TRUE(v.ok()) << v.error().message;
  EXPECT_EQ((*v)["a"][1]["b"], nullptr);
  Expected<nlohmann::ordered_json> ordered = parse_bounded_json<nlohmann::ordered_json>("[1]");
  ASSERT_TRUE(ordered.ok());
  EXPECT_EQ(ordered->size(), 1u);
}

TEST(ParseBoundedJson, DepthLimitIsInclusive) {
  const int limit = JsonLimits{}.max_depth;
  EXPECT_TRUE(parse_bounded_json<json>(std::string(limit, '[') + std::string(limit, ']')).ok());
  Expected<json> deep =
      parse_bounded_json<json>(std::string(limit + 1, '[') + std::string(limit + 1, ']'));
  ASSERT_FALSE(deep.ok());
  EXPECT_EQ(deep.error().message, "nests arrays/objects deeper than 64 levels");
}

// The reported crash: 60,000 levels parse (nlohmann's parser is iterative), then the first
// recursive walk of the value overflows the stack. The text is refused before it is parsed.
TEST(ParseBoundedJson, RefusesTheNestingThatOnceOverflowedTheStack) {
  const int levels = 60000;
  std::string text;
  for (int i = 0; i < levels; ++i) text += "{\"a\":";
  text += "1" + std::string(levels, '}');
  Expected<json> v = parse_bounded_json<json>(text);
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.error().message.find("deeper than 64"), std::string::npos);
}

TEST(ParseBoundedJson, RefusesTooManyBytesAndBadJsonWithTheReason) {
  Expected<json> big = parse_bounded_json<json>("[1, 2, 3]", {.max_bytes = 8});
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.error().message, "has 9 bytes; at most 8 are accepted");
  for (const char* bad : {"", "{", "[1,]", "1e400", "{\"a\" 1}"}) {
    Expected<json> v = parse_bounded_json<json>(bad);
    ASSERT_FALSE(v.ok()) << bad;
    EXPECT_EQ(v.error().message.rfind("is not valid JSON", 0), 0u) << v.error().message;
  }
}

}  // namespace
}  // namespace drift
