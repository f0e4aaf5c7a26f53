#include "server/request_json.h"

#include <gtest/gtest.h>

#include <string>

namespace drift::server {
namespace {

TEST(FindInvalidUtf8, AcceptsWellFormedText) {
  EXPECT_EQ(find_invalid_utf8(""), std::nullopt);
  EXPECT_EQ(find_invalid_utf8("plain ascii"), std::nullopt);
  EXPECT_EQ(find_invalid_utf8("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"), std::nullopt);
  EXPECT_EQ(find_invalid_utf8("\xF4\x8F\xBF\xBF"), std::nullopt);  // U+10FFFF
}

TEST(FindInvalidUtf8, NamesTheOffsetOfEachKindOfBadSequence) {
  EXPECT_EQ(find_invalid_utf8("ab\x80"), 2u);            // stray continuation
  EXPECT_EQ(find_invalid_utf8("a\xC3("), 1u);            // missing continuation
  EXPECT_EQ(find_invalid_utf8("\xC0\xAF"), 0u);          // overlong "/"
  EXPECT_EQ(find_invalid_utf8("\xE0\x80\xAF"), 0u);      // overlong, 3 bytes
  EXPECT_EQ(find_invalid_utf8("x\xED\xA0\x80"), 1u);     // surrogate U+D800
  EXPECT_EQ(find_invalid_utf8("\xF4\x90\x80\x80"), 0u);  // above U+10FFFF
  EXPECT_EQ(find_invalid_utf8("\xFF"), 0u);              // never valid
  EXPECT_EQ(find_invalid_utf8("abc\xE2\x82"), 3u);       // truncated at the end
}

TEST(ParseRequestJson, ReturnsTheObject) {
  auto r = parse_request_json(R"({"prompt": "hi", "n": 2})");
  ASSERT_TRUE(std::holds_alternative<nlohmann::json>(r));
  EXPECT_EQ(std::get<nlohmann::json>(r)["n"], 2);
}

TEST(ParseRequestJson, RefusesEachBadBodyWith400) {
  for (std::string body : {std::string("{\"prompt\": "), std::string("[1, 2]"), std::string("42"),
                           std::string("{\"a\": \"\xC3(\"}"), std::string(""),
                           "{\"a\": " + std::string(100, '[') + std::string(100, ']') + "}",
                           std::string("{\"max_tokens\": 1e400}")}) {
    auto r = parse_request_json(body);
    ASSERT_TRUE(std::holds_alternative<ApiError>(r)) << body;
    EXPECT_EQ(std::get<ApiError>(r).status, 400) << body;
  }
}

TEST(ParseRequestJson, DepthLimitIsInclusive) {
  const std::string ok = std::string(64, '[') + std::string(64, ']');
  const std::string deep = std::string(65, '[') + std::string(65, ']');
  auto a = parse_request_json("{\"a\": " + ok.substr(1, ok.size() - 2) + "}");
  EXPECT_TRUE(std::holds_alternative<nlohmann::json>(a));
  auto b = parse_request_json("{\"a\": " + deep.substr(1, deep.size() - 2) + "}");
  ASSERT_TRUE(std::holds_alternative<ApiError>(b));
  EXPECT_NE(std::get<ApiError>(b).message.find("deeper than 64"), std::string::npos);
}

TEST(ErrorJson, HasOpenAIShapeAndSurvivesInvalidUtf8InMessages) {
  ApiError e = bad_request("bad \xFF byte", "prompt");
  auto j = nlohmann::json::parse(error_json(e));
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_EQ(j["error"]["param"], "prompt");
  EXPECT_TRUE(j["error"]["code"].is_null());
  EXPECT_EQ(j["error"]["message"], "bad \xEF\xBF\xBD byte");
  auto o = nlohmann::json::parse(error_json(overloaded("overloaded: full")));
  EXPECT_EQ(o["error"]["code"], "overloaded");
}

}  // namespace
}  // namespace drift::server
