// Anthropic Messages bodies read into the server's chat request (anthropic_schema.h): what the
// template gets for each block, and a 400 naming the field for each thing a client can get wrong.
#include "server/anthropic_schema.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

namespace drift::server {
namespace {

using nlohmann::json;

json minimal() {
  return {
      {"model", "m"}, {"max_tokens", 16}, {"messages", {{{"role", "user"}, {"content", "Hi"}}}}};
}

AnthropicRequest parse_ok(const std::string& body,
                          AnthropicEndpoint endpoint = AnthropicEndpoint::kMessages) {
  auto r = parse_anthropic_request(body, endpoint);
  if (auto* e = std::get_if<ApiError>(&r)) ADD_FAILURE() << e->message;
  return std::get<AnthropicRequest>(std::move(r));
}
AnthropicRequest parse_ok(const json& body,
                          AnthropicEndpoint endpoint = AnthropicEndpoint::kMessages) {
  return parse_ok(body.dump(), endpoint);
}

// The 400's param, and that its message says `words`.
std::string refused(const std::string& body, std::string_view words = {},
                    AnthropicEndpoint endpoint = AnthropicEndpoint::kMessages) {
  auto r = parse_anthropic_request(body, endpoint);
  const ApiError* e = std::get_if<ApiError>(&r);
  if (!e) {
    ADD_FAILURE() << "accepted: " << body;
    return {};
  }
  EXPECT_EQ(e->status, 400);
  EXPECT_NE(e->message.find(words), std::string::npos) << e->message;
  return e->param.value_or("");
}
std::string refused(const json& body, std::string_view words = {},
                    AnthropicEndpoint endpoint = AnthropicEndpoint::kMessages) {
  return refused(body.dump(), words, endpoint);
}

TEST(AnthropicSchema, SystemAndStringContentBecomeMessages) {
  json body = minimal();
  body["system"] =
      json::array({{{"type", "text"}, {"text", "Be "}}, {{"type", "text"}, {"text", "brief."}}});
  body["messages"].push_back({{"role", "assistant"}, {"content", "Hello."}});
  body["messages"].push_back(
      {{"role", "user"}, {"content", {{{"type", "text"}, {"text", "Again"}}}}});
  const AnthropicRequest r = parse_ok(body);
  ASSERT_EQ(r.messages.size(), 4u);
  EXPECT_EQ(r.messages[0].role, "system");
  EXPECT_EQ(r.messages[0].content, "Be brief.");
  EXPECT_EQ(r.messages[1].role, "user");
  EXPECT_EQ(r.messages[1].content, "Hi");
  EXPECT_EQ(r.messages[2].role, "assistant");
  EXPECT_EQ(r.messages[3].content, "Again");
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(r.options.max_tokens, 16);
  EXPECT_FALSE(r.options.stream);
  EXPECT_FALSE(r.tools.active());
}

TEST(AnthropicSchema, OptionsMapToTheEnginesFields) {
  json body = minimal();
  body.update({{"temperature", 0.5},
               {"top_p", 0.9},
               {"top_k", 7},
               {"stop_sequences", {"END", "\n\n"}},
               {"stream", true},
               {"metadata", {{"user_id", "u-1"}}}});
  const AnthropicRequest r = parse_ok(body);
  EXPECT_FLOAT_EQ(*r.options.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(*r.options.sampling.top_p, 0.9f);
  EXPECT_EQ(*r.options.sampling.top_k, 7);
  EXPECT_EQ(r.options.stop, (std::vector<std::string>{"END", "\n\n"}));
  EXPECT_EQ(r.options.stop_param, "stop_sequences") << "named if the engine refuses them";
  EXPECT_TRUE(r.options.stream);
}

TEST(AnthropicSchema, ToolUseAndToolResultBecomeToolCallsAndToolTurns) {
  // A raw body: the client's key order ("z" before "city") must reach the template.
  const std::string body = R"({"model": "m", "max_tokens": 16, "messages": [
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": [
      {"type": "thinking", "thinking": "Call the tool.", "signature": ""},
      {"type": "text", "text": "Checking."},
      {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"z": 1, "city": "Paris"}}]},
    {"role": "user", "content": [
      {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "18C"}]},
      {"type": "text", "text": "Thanks"}]}]})";
  const AnthropicRequest r = parse_ok(body);
  ASSERT_EQ(r.messages.size(), 4u);
  const ChatMessage& assistant = r.messages[1];
  EXPECT_EQ(assistant.content, "Checking.");
  EXPECT_EQ(assistant.reasoning_content, "Call the tool.");
  ASSERT_EQ(assistant.tool_calls.size(), 1u);
  // The client's key order is kept: templates print the arguments as given.
  EXPECT_EQ(
      assistant.tool_calls[0].dump(),
      R"({"id":"toolu_1","type":"function","function":{"name":"get_weather","arguments":{"z":1,"city":"Paris"}}})");
  EXPECT_EQ(r.messages[2].role, "tool");
  EXPECT_EQ(r.messages[2].tool_call_id, "toolu_1");
  EXPECT_EQ(r.messages[2].content, "18C");
  EXPECT_EQ(r.messages[3].role, "user");
  EXPECT_EQ(r.messages[3].content, "Thanks");
}

TEST(AnthropicSchema, ToolsBecomeOpenAIToolsAndToolChoiceMaps) {
  const std::string raw = R"({"model": "m", "max_tokens": 16,
      "messages": [{"role": "user", "content": "Hi"}],
      "tools": [{"name": "get_weather", "description": "Weather now",
                 "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}]})";
  AnthropicRequest r = parse_ok(raw);
  json body = json::parse(raw);
  ASSERT_TRUE(r.tools.tools);
  EXPECT_EQ(
      r.tools.tools->dump(),
      R"([{"type":"function","function":{"name":"get_weather","description":"Weather now","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}])");
  EXPECT_EQ(r.tools.choice, ToolChoice::kAuto);
  body["tool_choice"] = {{"type", "any"}, {"disable_parallel_tool_use", true}};
  r = parse_ok(body);
  EXPECT_EQ(r.tools.choice, ToolChoice::kRequired);
  EXPECT_FALSE(r.tools.parallel_tool_calls);
  body["tool_choice"] = {{"type", "tool"}, {"name", "get_weather"}};
  r = parse_ok(body);
  EXPECT_EQ(r.tools.choice, ToolChoice::kNamed);
  EXPECT_EQ(r.tools.named_function, "get_weather");
  body["tool_choice"] = {{"type", "none"}};
  EXPECT_FALSE(parse_ok(body).tools.active());
}

TEST(AnthropicSchema, CountTokensTakesThePromptFieldsWithoutMaxTokens) {
  json body = minimal();
  body.erase("max_tokens");
  EXPECT_EQ(parse_ok(body, AnthropicEndpoint::kCountTokens).messages.size(), 1u);
  EXPECT_EQ(refused(body, "'max_tokens' is required"), "max_tokens");
  body["stream"] = true;
  EXPECT_EQ(refused(body, "unknown field", AnthropicEndpoint::kCountTokens), "stream");
}

TEST(AnthropicSchema, BadBodiesAreRefusedNamingTheField) {
  EXPECT_EQ(refused(std::string("{\"model\": "), "not valid JSON"), "");
  EXPECT_EQ(refused(std::string("[1]"), "must be a JSON object"), "");
  json body = minimal();
  body.erase("model");
  EXPECT_EQ(refused(body, "'model' is required"), "model");
  body = minimal();
  body["max_tokens"] = "16";
  EXPECT_EQ(refused(body, "must be an integer"), "max_tokens");
  body["max_tokens"] = 0;
  EXPECT_EQ(refused(body, "[1, "), "max_tokens");
  body = minimal();
  body["temperature"] = 1.5;
  EXPECT_EQ(refused(body, "[0, 1]"), "temperature");
  body = minimal();
  body["messages"] = "Hi";
  EXPECT_EQ(refused(body, "must be an array"), "messages");
  body["messages"] = json::array();
  EXPECT_EQ(refused(body, "must not be empty"), "messages");
  body = minimal();
  body["messages"][0]["role"] = "system";
  EXPECT_EQ(refused(body, "\"user\" or \"assistant\""), "messages[0].role");
  body = minimal();
  body["stop_sequences"] = {"END", 3};
  EXPECT_EQ(refused(body, "an array of strings"), "stop_sequences");
  body = minimal();
  body["frequency_penalty"] = 1;
  EXPECT_EQ(refused(body, "unknown field"), "frequency_penalty");
  body = minimal();
  body["system"] = 3;
  EXPECT_EQ(refused(body, "a string or an array of text blocks"), "system");
}

TEST(AnthropicSchema, BlocksTheModelCannotReadAreRefused) {
  json body = minimal();
  body["messages"][0]["content"] = json::parse(
      R"([{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA=="}}])");
  EXPECT_EQ(refused(body, "images are not supported"), "messages[0].content[0].type");
  body["messages"][0]["content"] = {
      {{"type", "tool_result"}, {"tool_use_id", "t"}, {"content", {{{"type", "image"}}}}}};
  body["messages"].insert(body["messages"].begin(),
                          json::parse(R"({"role": "assistant", "content": [
                              {"type": "tool_use", "id": "t", "name": "f", "input": {}}]})"));
  EXPECT_EQ(refused(body, "images are not supported"), "messages[1].content[0].content[0].type");
  body = minimal();
  body["messages"][0]["content"] = json::parse(R"([{"type": "video", "url": "x"}])");
  EXPECT_EQ(refused(body, "'video' is not a content block"), "messages[0].content[0].type");
  body["messages"][0]["content"] = json::parse(R"([{"text": "no type"}])");
  EXPECT_EQ(refused(body, "needs a string 'type'"), "messages[0].content[0].type");
  body["messages"][0]["content"] = json::parse(R"([{"type": "text", "text": 5}])");
  EXPECT_EQ(refused(body, "needs a string 'text'"), "messages[0].content[0].text");
  body["messages"][0]["content"] =
      json::parse(R"([{"type": "tool_result", "tool_use_id": "toolu_unknown", "content": "x"}])");
  EXPECT_EQ(refused(body, "answers no tool_use block"), "messages[0].content[0].tool_use_id");
  body["messages"][0]["content"] =
      json::parse(R"([{"type": "tool_use", "id": "t", "name": "f", "input": {}}])");
  EXPECT_EQ(refused(body, "belongs in an assistant turn"), "messages[0].content[0].type");
  body["messages"] = json::parse(R"([{"role": "assistant", "content": [
      {"type": "tool_use", "id": "t", "name": "f", "input": "not an object"}]}])");
  EXPECT_EQ(refused(body, "must be an object"), "messages[0].content[0].input");
}

TEST(AnthropicSchema, BadToolsAndToolChoicesAreRefused) {
  json body = minimal();
  body["tools"] = json::parse(R"([{"name": "bad name", "input_schema": {}}])");
  EXPECT_EQ(refused(body, "letters, digits"), "tools[0].name");
  body["tools"] = json::parse(R"([{"name": "f"}])");
  EXPECT_EQ(refused(body, "JSON schema object"), "tools[0].input_schema");
  body["tools"] = json::parse(R"([{"type": "web_search_20250305", "name": "web_search"}])");
  EXPECT_EQ(refused(body, "server tools are not supported"), "tools[0].type");
  body["tools"] = json::parse(R"([{"name": "f", "input_schema": {"type": "object"}}])");
  body["tool_choice"] = {{"type", "tool"}, {"name", "g"}};
  EXPECT_EQ(refused(body, "must name one of 'tools'"), "tool_choice.name");
  body["tool_choice"] = "auto";
  EXPECT_EQ(refused(body, "must be an object"), "tool_choice");
  body.erase("tools");
  body["tool_choice"] = {{"type", "any"}};
  EXPECT_EQ(refused(body, "gives no 'tools'"), "tool_choice");
}

TEST(AnthropicSchema, ThinkingIsCheckedAndDisabledHidesIt) {
  json body = minimal();
  body["thinking"] = {{"type", "enabled"}, {"budget_tokens", 2048}};
  EXPECT_TRUE(parse_ok(body).show_thinking);
  body["thinking"] = {{"type", "disabled"}};
  EXPECT_FALSE(parse_ok(body).show_thinking);
  body["thinking"] = {{"type", "enabled"}, {"budget_tokens", 10}};
  EXPECT_EQ(refused(body, "budget_tokens"), "thinking.budget_tokens");
}

TEST(AnthropicSchema, OutputConfigConstrainsTheReplyAndSetsTheEffort) {
  json body = minimal();
  body["output_config"] = {{"effort", "high"},
                           {"format", {{"type", "json_schema"}, {"schema", {{"type", "object"}}}}}};
  body["cache_control"] = {{"type", "ephemeral"}};
  const AnthropicRequest r = parse_ok(body);
  ASSERT_TRUE(r.options.constraint);
  EXPECT_EQ(r.options.constraint->param, "output_config.format");
  EXPECT_EQ(r.effort, "high");
  body["output_config"] = {{"effort", "max"}};
  EXPECT_EQ(refused(body, "\"max\" is not offered"), "output_config.effort");
  body["output_config"] = {{"format", {{"type", "json_object"}}}};
  EXPECT_EQ(refused(body, "json_schema"), "output_config.format");
  body = minimal();
  body["cache_control"] = {{"type", "permanent"}};
  EXPECT_EQ(refused(body, "ephemeral"), "cache_control");
  body = minimal();
  body["speed"] = "fast";
  EXPECT_EQ(refused(body, "not supported by this server"), "speed");
}

TEST(AnthropicSchema, DeepBodiesAreRefusedBeforeTheyAreParsed) {
  std::string deep = R"({"model": "m", "max_tokens": 4, "metadata": )";
  deep += std::string(100000, '[') + std::string(100000, ']') + "}";
  EXPECT_EQ(refused(deep, "nest"), "");
}

}  // namespace
}  // namespace drift::server
