// OpenAI Responses bodies read into the server's chat request (responses_schema.h): what the
// template gets for each kind of input item, and a 400 naming the field for each thing a client
// can get wrong.
#include "server/responses_schema.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

namespace drift::server {
namespace {

using nlohmann::json;

json minimal() { return {{"model", "m"}, {"input", "Hi"}}; }

ResponsesRequest parse_ok(const json& body) {
  auto r = parse_responses_request(body.dump());
  if (auto* e = std::get_if<ApiError>(&r)) ADD_FAILURE() << e->message;
  return std::get<ResponsesRequest>(std::move(r));
}

// The 400's param, and that its message says `words`.
std::string refused(const json& body, std::string_view words = {}) {
  auto r = parse_responses_request(body.dump());
  const ApiError* e = std::get_if<ApiError>(&r);
  if (!e) {
    ADD_FAILURE() << "accepted: " << body.dump();
    return {};
  }
  EXPECT_EQ(e->status, 400);
  EXPECT_NE(e->message.find(words), std::string::npos) << e->message;
  return e->param.value_or("");
}

json with(json body, const json& fields) {
  body.update(fields);
  return body;
}

TEST(ResponsesSchema, AStringInputIsOneUserMessageAndDefaultsAreOpenAIs) {
  const ResponsesRequest r = parse_ok(minimal());
  ASSERT_EQ(r.messages.size(), 1u);
  EXPECT_EQ(r.messages[0].role, "user");
  EXPECT_EQ(r.messages[0].content, "Hi");
  EXPECT_EQ(r.model, "m");
  EXPECT_TRUE(r.store);
  EXPECT_FALSE(r.previous_response_id);
  EXPECT_FALSE(r.options.stream);
  EXPECT_FALSE(r.options.max_tokens);
  EXPECT_FALSE(r.tools.active());
  // The item a continuation reads again.
  EXPECT_EQ(r.input_items.dump(), R"([{"type":"message","role":"user","content":"Hi"}])");
  EXPECT_EQ(r.echo["tool_choice"], "auto");
  EXPECT_EQ(r.echo["store"], true);
  EXPECT_TRUE(r.echo["metadata"].is_object());
}

TEST(ResponsesSchema, MessageItemsKeepRolesAndJoinTextParts) {
  const ResponsesRequest r = parse_ok(
      with(minimal(),
           {{"instructions", "Be brief."},
            {"input",
             {{{"role", "developer"}, {"content", "Rules."}},
              {{"type", "message"},
               {"role", "user"},
               {"content",
                {{{"type", "input_text"}, {"text", "Hello "}},
                 {{"type", "input_text"}, {"text", "there"}}}}},
              {{"type", "message"},
               {"role", "assistant"},
               {"id", "msg_1"},
               {"status", "completed"},
               {"content",
                {{{"type", "output_text"}, {"text", "Hi!"}, {"annotations", json::array()}}}}}}}}));
  ASSERT_EQ(r.messages.size(), 3u);
  EXPECT_EQ(r.instructions, "Be brief.");   // the endpoint puts it first, as a system turn
  EXPECT_EQ(r.messages[0].role, "system");  // developer is system to a chat template
  EXPECT_EQ(r.messages[1].content, "Hello there");
  EXPECT_EQ(r.messages[2].role, "assistant");
  EXPECT_EQ(r.messages[2].content, "Hi!");
}

TEST(ResponsesSchema, FunctionCallsJoinTheAssistantTurnAndOutputsAreToolTurns) {
  const ResponsesRequest r = parse_ok(
      with(minimal(), {{"input",
                        {{{"role", "user"}, {"content", "Weather?"}},
                         {{"type", "reasoning"},
                          {"id", "rs_1"},
                          {"summary", json::array()},
                          {"content", {{{"type", "reasoning_text"}, {"text", "Call it."}}}}},
                         {{"type", "function_call"},
                          {"call_id", "c1"},
                          {"name", "get_weather"},
                          {"arguments", R"({"city":"Oslo","unit":"celsius"})"}},
                         {{"type", "function_call"},
                          {"call_id", "c2"},
                          {"name", "get_weather"},
                          {"arguments", R"({"city":"Rome"})"}},
                         {{"type", "function_call_output"}, {"call_id", "c1"}, {"output", "12 C"}},
                         {{"type", "function_call_output"},
                          {"call_id", "c2"},
                          {"output", {{{"type", "input_text"}, {"text", "20 C"}}}}}}}}));
  ASSERT_EQ(r.messages.size(), 4u);
  const ChatMessage& turn = r.messages[1];
  EXPECT_EQ(turn.role, "assistant");
  EXPECT_EQ(turn.reasoning_content, "Call it.");
  ASSERT_EQ(turn.tool_calls.size(), 2u);
  // Arguments as the object templates print, in the client's key order.
  EXPECT_EQ(turn.tool_calls[0]["function"]["arguments"].dump(),
            R"({"city":"Oslo","unit":"celsius"})");
  EXPECT_EQ(turn.tool_calls[1]["id"], "c2");
  EXPECT_EQ(r.messages[2].role, "tool");
  EXPECT_EQ(r.messages[2].tool_call_id, "c1");
  EXPECT_EQ(r.messages[3].content, "20 C");
  EXPECT_FALSE(check_tool_outputs(r.messages));
}

TEST(ResponsesSchema, AnOutputForACallNobodyMadeIsRefusedOnceTheConversationIsWhole) {
  const ResponsesRequest r = parse_ok(
      with(minimal(),
           {{"input", {{{"type", "function_call_output"}, {"call_id", "c9"}, {"output", "x"}}}}}));
  auto e = check_tool_outputs(r.messages);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param, "input");
  EXPECT_NE(e->message.find("c9"), std::string::npos);
  // Its call in an earlier (stored) turn answers it.
  std::vector<ChatMessage> history;
  ASSERT_FALSE(read_input_items(
      jinja::Json::parse(
          R"([{"type":"function_call","call_id":"c9","name":"f","arguments":"{}"}])"),
      "previous_response_id", history));
  for (const ChatMessage& m : r.messages) history.push_back(m);
  EXPECT_FALSE(check_tool_outputs(history));
}

TEST(ResponsesSchema, ToolsBecomeChatToolsAndChoicesMap) {
  const json tool = {
      {"type", "function"},
      {"name", "get_weather"},
      {"description", "Weather"},
      {"parameters", {{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}}}}},
      {"strict", true}};
  ResponsesRequest r = parse_ok(with(minimal(), {{"tools", {tool}}}));
  ASSERT_TRUE(r.tools.tools);
  EXPECT_EQ((*r.tools.tools)[0]["function"]["name"], "get_weather");
  EXPECT_EQ((*r.tools.tools)[0]["function"]["parameters"]["type"], "object");
  EXPECT_EQ(r.tools.choice, ToolChoice::kAuto);
  r = parse_ok(with(minimal(), {{"tools", {tool}}, {"tool_choice", "required"}}));
  EXPECT_EQ(r.tools.choice, ToolChoice::kRequired);
  r = parse_ok(with(minimal(), {{"tools", {tool}}, {"tool_choice", "none"}}));
  EXPECT_FALSE(r.tools.active());
  r = parse_ok(with(minimal(), {{"tools", {tool}},
                                {"tool_choice", {{"type", "function"}, {"name", "get_weather"}}},
                                {"parallel_tool_calls", false}}));
  EXPECT_EQ(r.tools.choice, ToolChoice::kNamed);
  EXPECT_EQ(r.tools.named_function, "get_weather");
  EXPECT_FALSE(r.tools.parallel_tool_calls);
  EXPECT_EQ(refused(with(minimal(), {{"tools", {tool}},
                                     {"tool_choice", {{"type", "function"}, {"name", "other"}}}})),
            "tool_choice.name");
  EXPECT_EQ(
      refused(with(minimal(), {{"tools", {{{"type", "web_search"}}}}}), "only function tools"),
      "tools[0].type");
  EXPECT_EQ(refused(with(minimal(), {{"tools", {tool, tool}}})), "tools[1].name");
  EXPECT_EQ(refused(with(minimal(), {{"tool_choice", "required"}})), "tool_choice");
}

TEST(ResponsesSchema, TextFormatIsTheOutputConstraint) {
  ResponsesRequest r =
      parse_ok(with(minimal(), {{"text", {{"format", {{"type", "json_object"}}}}}}));
  ASSERT_TRUE(r.options.constraint);
  EXPECT_EQ(r.options.constraint->grammar.kind, GrammarKind::kJsonObject);
  r = parse_ok(with(minimal(), {{"text",
                                 {{"format",
                                   {{"type", "json_schema"},
                                    {"name", "x"},
                                    {"schema", {{"type", "object"}}},
                                    {"strict", true}}}}}}));
  ASSERT_TRUE(r.options.constraint);
  EXPECT_EQ(r.options.constraint->grammar.kind, GrammarKind::kJsonSchema);
  EXPECT_EQ(r.options.constraint->param, "text.format.schema");
  r = parse_ok(with(minimal(), {{"text", {{"format", {{"type", "text"}}}}}}));
  EXPECT_FALSE(r.options.constraint);
  EXPECT_EQ(
      refused(with(minimal(), {{"text", {{"format", {{"type", "json_schema"}, {"name", "x"}}}}}})),
      "text.format.schema");
  EXPECT_EQ(refused(with(minimal(), {{"text", {{"format", {{"type", "yaml"}}}}}})),
            "text.format.type");
}

TEST(ResponsesSchema, OptionsMapToTheEnginesFields) {
  const ResponsesRequest r = parse_ok(with(minimal(), {{"max_output_tokens", 32},
                                                       {"temperature", 0.5},
                                                       {"top_p", 0.9},
                                                       {"stream", true},
                                                       {"store", false},
                                                       {"previous_response_id", "resp_1"},
                                                       {"reasoning", {{"effort", "low"}}},
                                                       {"metadata", {{"k", "v"}}}}));
  EXPECT_EQ(r.options.max_tokens, 32);
  EXPECT_FLOAT_EQ(*r.options.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(*r.options.sampling.top_p, 0.9f);
  EXPECT_TRUE(r.options.stream);
  EXPECT_FALSE(r.store);
  EXPECT_EQ(r.previous_response_id, "resp_1");
  EXPECT_EQ(r.reasoning_effort, "low");
  EXPECT_EQ(r.echo["metadata"]["k"], "v");
  EXPECT_EQ(r.echo["max_output_tokens"], 32);
}

TEST(ResponsesSchema, BadInputIsA400NamingTheField) {
  EXPECT_EQ(refused(json{{"model", "m"}}, "required"), "input");
  EXPECT_EQ(refused(with(minimal(), {{"input", json::array()}})), "input");
  EXPECT_EQ(refused(with(minimal(), {{"input", 3}})), "input");
  EXPECT_EQ(
      refused(with(minimal(), {{"input",
                                {{{"role", "user"},
                                  {"content", {{{"type", "input_image"}, {"image_url", "x"}}}}}}}}),
              "text only"),
      "input[0].content[0].type");
  EXPECT_EQ(
      refused(
          with(minimal(),
               {{"input",
                 {{{"role", "user"}, {"content", {{{"type", "input_file"}, {"file_id", "f"}}}}}}}}),
          "text only"),
      "input[0].content[0].type");
  EXPECT_EQ(refused(with(minimal(), {{"input", {{{"role", "robot"}, {"content", "x"}}}}})),
            "input[0].role");
  EXPECT_EQ(refused(with(minimal(), {{"input", {{{"type", "item_reference"}, {"id", "x"}}}}})),
            "input[0].type");
  EXPECT_EQ(refused(with(minimal(), {{"input",
                                      {{{"type", "function_call"},
                                        {"call_id", "c"},
                                        {"name", "f"},
                                        {"arguments", "[1]"}}}}})),
            "input[0].arguments");
  EXPECT_EQ(
      refused(with(
          minimal(),
          {{"input",
            {{{"type", "function_call"}, {"call_id", "c"}, {"name", "f"}, {"arguments", "{}"}},
             {{"type", "function_call"}, {"call_id", "c"}, {"name", "f"}, {"arguments", "{}"}}}}})),
      "input[1].call_id");
  EXPECT_EQ(refused(with(minimal(), {{"max_output_tokens", 0}})), "max_output_tokens");
  EXPECT_EQ(refused(with(minimal(), {{"temperature", 2.5}})), "temperature");
  EXPECT_EQ(refused(with(minimal(), {{"top_p", 0}})), "top_p");
  EXPECT_EQ(refused(with(minimal(), {{"store", "yes"}})), "store");
  EXPECT_EQ(refused(with(minimal(), {{"reasoning", {{"effort", "max"}}}})), "reasoning.effort");
  EXPECT_EQ(refused(with(minimal(), {{"metadata", {{"k", 1}}}})), "metadata");
  EXPECT_EQ(refused(with(minimal(), {{"truncation", "auto"}})), "truncation");
  EXPECT_EQ(refused(with(minimal(), {{"background", true}}), "not supported"), "background");
  EXPECT_EQ(refused(with(minimal(), {{"frobnicate", 1}}), "unrecognized"), "frobnicate");
  EXPECT_EQ(refused(with(minimal(), {{"instructions", 1}})), "instructions");
}

}  // namespace
}  // namespace drift::server
