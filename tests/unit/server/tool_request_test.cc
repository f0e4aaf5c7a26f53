// The tool fields of a chat request: what clients send by default is accepted, every malformed
// field is a 400 naming it, and tools and earlier calls keep the client's key order for the
// template.
#include "server/tool_request.h"

#include <gtest/gtest.h>

#include <string>

namespace drift::server {
namespace {

using Json = jinja::Json;

const char* kWeather = R"({"type": "function", "function": {"name": "get_weather",
  "description": "Current weather", "parameters": {"type": "object",
  "properties": {"city": {"type": "string"}}, "required": ["city"]}}})";

Json body_with(const std::string& fields) {
  return Json::parse(R"({"messages": [{"role": "user", "content": "x"}])" + fields + "}");
}

TEST(ToolRequest, HarmlessDefaultsAreAcceptedAndOfferNoTools) {
  for (const char* fields :
       {"", R"(, "tools": [])", R"(, "tool_choice": "none")",
        R"(, "tools": [], "tool_choice": "auto")", R"(, "parallel_tool_calls": true)"}) {
    auto r = parse_tool_request(body_with(fields));
    ASSERT_TRUE(std::holds_alternative<ToolRequest>(r)) << fields;
    EXPECT_FALSE(std::get<ToolRequest>(r).active()) << fields;
  }
}

TEST(ToolRequest, ToolsDefaultToAutoAndKeepTheClientsKeyOrder) {
  auto r = parse_tool_request(body_with(std::string(R"(, "tools": [)") + kWeather + "]"));
  ASSERT_TRUE(std::holds_alternative<ToolRequest>(r));
  const ToolRequest& t = std::get<ToolRequest>(r);
  EXPECT_TRUE(t.active());
  EXPECT_EQ(t.choice, ToolChoice::kAuto);
  // "type" before "function", "name" before "description": as sent, not sorted.
  EXPECT_TRUE(t.tools->dump().starts_with(
      R"([{"type":"function","function":{"name":"get_weather","description")"))
      << t.tools->dump();
}

TEST(ToolRequest, ANamedFunctionMustBeOneOfTheTools) {
  const std::string tools = std::string(R"(, "tools": [)") + kWeather + "]";
  auto named = parse_tool_request(body_with(
      tools + R"(, "tool_choice": {"type": "function", "function": {"name": "get_weather"}})"));
  ASSERT_TRUE(std::holds_alternative<ToolRequest>(named));
  EXPECT_EQ(std::get<ToolRequest>(named).choice, ToolChoice::kNamed);
  EXPECT_EQ(std::get<ToolRequest>(named).named_function, "get_weather");
  auto unknown = parse_tool_request(body_with(
      tools + R"(, "tool_choice": {"type": "function", "function": {"name": "launch"}})"));
  ASSERT_TRUE(std::holds_alternative<ApiError>(unknown));
  EXPECT_EQ(std::get<ApiError>(unknown).param, "tool_choice");
  EXPECT_NE(std::get<ApiError>(unknown).message.find("'launch'"), std::string::npos);
}

TEST(ToolRequest, MalformedFieldsAreRefusedByName) {
  std::string many = R"(, "tools": [)";
  for (int i = 0; i < 10000; ++i)
    many += (i ? "," : "") + std::string(R"({"type": "function", "function": {"name": "f)") +
            std::to_string(i) + R"("}})";
  many += "]";
  const std::string weather = std::string(R"(, "tools": [)") + kWeather;
  struct Case {
    std::string fields, param;
  } cases[] = {
      {R"(, "tools": {})", "tools"},
      {many, "tools"},
      {R"(, "tools": [{"type": "retrieval"}])", "tools[0].type"},
      {R"(, "tools": [{"type": "function"}])", "tools[0].function"},
      {R"(, "tools": [{"type": "function", "function": {"name": "has space"}}])",
       "tools[0].function.name"},
      {weather + "," + kWeather + "]", "tools[1].function.name"},  // the same name twice
      {R"(, "tools": [{"type": "function", "function": {"name": "f", "parameters": []}}])",
       "tools[0].function.parameters"},
      {R"(, "tool_choice": "required")", "tool_choice"},  // no tools to call
      {weather + R"(], "tool_choice": "always")", "tool_choice"},
      {weather + R"(], "tool_choice": 3)", "tool_choice"},
      {weather + R"(], "parallel_tool_calls": "yes")", "parallel_tool_calls"},
      {R"(, "chat_template_kwargs": [1])", "chat_template_kwargs"},
  };
  for (const Case& c : cases) {
    auto r = parse_tool_request(body_with(c.fields));
    ASSERT_TRUE(std::holds_alternative<ApiError>(r)) << c.fields.substr(0, 200);
    EXPECT_EQ(std::get<ApiError>(r).param, c.param) << c.fields.substr(0, 200);
  }
}

TEST(ToolRequest, EarlierCallsGetTheirArgumentsAsObjectsForTheTemplate) {
  const Json body = Json::parse(R"({"messages": [
    {"role": "user", "content": "Weather?"},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
      "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\", \"days\": 2}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}]})");
  std::vector<ChatMessage> messages = {{"user", "Weather?"}, {"assistant", ""}, {"tool", "sunny"}};
  ASSERT_FALSE(read_message_tool_calls(body, messages).has_value());
  EXPECT_TRUE(messages[0].tool_calls.is_null());
  ASSERT_TRUE(messages[1].tool_calls.is_array());
  EXPECT_EQ(messages[1].tool_calls[0]["function"]["arguments"].dump(),
            R"({"city":"Paris","days":2})");
  EXPECT_EQ(messages[1].tool_calls[0]["id"], "call_1");
  EXPECT_EQ(messages[2].tool_call_id, "call_1");

  const Json user_calls = Json::parse(R"({"messages": [{"role": "user", "content": "x",
    "tool_calls": []}]})");
  std::vector<ChatMessage> one = {{"user", "x"}};
  auto e = read_message_tool_calls(user_calls, one);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->param, "messages[0].tool_calls");
}

}  // namespace
}  // namespace drift::server
