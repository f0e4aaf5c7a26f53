#include "server/request_json.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <utility>

namespace drift::server {
namespace {

// A body's text goes through util/utf8's strict check; the 400 names where it stops.
TEST(ParseRequestJson, NamesTheByteOffsetOfTheFirstBadUtf8Sequence) {
  const std::string before = "{\"a\": \"";  // 7 bytes
  for (const char* good : {"", "plain ascii", "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80",
                           "\xF4\x8F\xBF\xBF"})  // U+10FFFF
    EXPECT_TRUE(std::holds_alternative<nlohmann::json>(parse_request_json(before + good + "\"}")))
        << good;
  const std::pair<const char*, size_t> bad[] = {
      {"ab\x80", 2},            // stray continuation
      {"a\xC3(", 1},            // missing continuation
      {"\xC0\xAF", 0},          // overlong "/"
      {"\xE0\x80\xAF", 0},      // overlong, 3 bytes
      {"x\xED\xA0\x80", 1},     // surrogate U+D800
      {"\xF4\x90\x80\x80", 0},  // above U+10FFFF
      {"\xFF", 0},              // never valid
  };
  for (const auto& [text, offset] : bad) {
    auto r = parse_request_json(before + text + "\"}");
    ASSERT_TRUE(std::holds_alternative<ApiError>(r)) << text;
    EXPECT_NE(std::get<ApiError>(r).message.find(fmt::format("(byte offset {})", 7 + offset)),
              std::string::npos)
        << std::get<ApiError>(r).message;
  }
  auto truncated = parse_request_json(std::string("{\"a\": \"abc\xE2\x82"));
  ASSERT_TRUE(std::holds_alternative<ApiError>(truncated));
  EXPECT_NE(std::get<ApiError>(truncated).message.find("(byte offset 10)"), std::string::npos);
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
