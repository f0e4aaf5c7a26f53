// Ollama request bodies read into the server's requests (ollama_schema.h): what the template and
// the sampler get for each field, and a 400 naming the field for each thing a client can get
// wrong.
#include "server/ollama_schema.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

namespace drift::server {
namespace {

using nlohmann::json;

json chat(json extra = json::object()) {
  json body = {{"model", "m"}, {"messages", {{{"role", "user"}, {"content", "Hi"}}}}};
  body.update(extra);
  return body;
}

OllamaGenerateRequest parse_ok(const json& body, OllamaEndpoint endpoint = OllamaEndpoint::kChat) {
  auto r = parse_ollama_generate_request(body.dump(), endpoint);
  if (auto* e = std::get_if<ApiError>(&r)) ADD_FAILURE() << e->message;
  return std::get<OllamaGenerateRequest>(std::move(r));
}

// The 400's param, and that its message says `words`.
std::string refused(const json& body, std::string_view words = {},
                    OllamaEndpoint endpoint = OllamaEndpoint::kChat) {
  auto r = parse_ollama_generate_request(body.dump(), endpoint);
  const ApiError* e = std::get_if<ApiError>(&r);
  if (!e) {
    ADD_FAILURE() << "accepted: " << body.dump();
    return {};
  }
  EXPECT_EQ(e->status, 400);
  EXPECT_NE(e->message.find(words), std::string::npos) << e->message;
  return e->param.value_or("");
}

TEST(OllamaSchema, ChatStreamsByDefaultAndReadsEveryRole) {
  json body = chat();
  body["messages"] = {{{"role", "system"}, {"content", "S"}},
                      {{"role", "user"}, {"content", "U"}},
                      {{"role", "assistant"}, {"content", "A"}, {"thinking", "T"}}};
  const OllamaGenerateRequest r = parse_ok(body);
  EXPECT_EQ(r.model, "m");
  EXPECT_TRUE(r.options.stream);
  ASSERT_EQ(r.messages.size(), 3u);
  EXPECT_EQ(r.messages[0].role, "system");
  EXPECT_EQ(r.messages[2].content, "A");
  EXPECT_EQ(r.messages[2].reasoning_content, "T");
  EXPECT_FALSE(r.load_only);
  EXPECT_FALSE(parse_ok(chat({{"stream", false}})).options.stream);
}

TEST(OllamaSchema, OptionsBecomeTheSamplingSettings) {
  const OllamaGenerateRequest r = parse_ok(chat({{"options",
                                                  {{"temperature", 0.5},
                                                   {"top_k", 7},
                                                   {"top_p", 0.9},
                                                   {"min_p", 0.05},
                                                   {"seed", 42},
                                                   {"num_predict", 12},
                                                   {"repeat_penalty", 1.1},
                                                   {"repeat_last_n", 32},
                                                   {"presence_penalty", 0.25},
                                                   {"frequency_penalty", -0.5},
                                                   {"stop", {"\n\n", "END"}},
                                                   {"num_ctx", 2048},
                                                   {"num_thread", 8},
                                                   {"mirostat", 0}}}}));
  const SamplingSettings& s = r.options.sampling;
  EXPECT_FLOAT_EQ(*s.temperature, 0.5f);
  EXPECT_EQ(s.top_k, 7);
  EXPECT_FLOAT_EQ(*s.top_p, 0.9f);
  EXPECT_FLOAT_EQ(*s.min_p, 0.05f);
  EXPECT_EQ(s.seed, 42u);
  EXPECT_FLOAT_EQ(*s.repetition_penalty, 1.1f);
  EXPECT_EQ(s.penalty_last_n, 32);
  EXPECT_FLOAT_EQ(*s.presence_penalty, 0.25f);
  EXPECT_FLOAT_EQ(*s.frequency_penalty, -0.5f);
  EXPECT_EQ(r.options.max_tokens, 12);
  EXPECT_EQ(r.options.stop, (std::vector<std::string>{"\n\n", "END"}));
  EXPECT_EQ(r.options.stop_param, "options.stop") << "named if the engine refuses them";
  EXPECT_EQ(r.num_ctx, 2048);
  // -1 (no limit) and -2 (fill the context) leave the bound to the engine.
  EXPECT_FALSE(parse_ok(chat({{"options", {{"num_predict", -1}}}})).options.max_tokens);
  EXPECT_FALSE(parse_ok(chat({{"options", {{"num_predict", -2}}}})).options.max_tokens);
}

TEST(OllamaSchema, BadOptionsAreRefusedByName) {
  EXPECT_EQ(refused(chat({{"options", {{"temperature", "hot"}}}}), "a number"),
            "options.temperature");
  EXPECT_EQ(refused(chat({{"options", {{"top_k", -1}}}})), "options.top_k");
  EXPECT_EQ(refused(chat({{"options", {{"num_predict", 0}}}})), "options.num_predict");
  EXPECT_EQ(refused(chat({{"options", {{"num_predict", -3}}}})), "options.num_predict");
  EXPECT_EQ(refused(chat({{"options", {{"stop", "x"}}}})), "options.stop");
  EXPECT_EQ(refused(chat({{"options", {{"stop", {"x", 3}}}}})), "options.stop");
  EXPECT_EQ(refused(chat({{"options", {{"warp", 9}}}}), "not an option"), "options.warp");
  EXPECT_EQ(refused(chat({{"options", {{"mirostat", 2}}}}), "not supported"), "options.mirostat");
  EXPECT_EQ(refused(chat({{"options", {{"typical_p", 0.5}}}})), "options.typical_p");
  EXPECT_EQ(refused(chat({{"options", "fast"}})), "options");
}

TEST(OllamaSchema, FormatIsJsonOrASchema) {
  const OllamaGenerateRequest json_mode = parse_ok(chat({{"format", "json"}}));
  ASSERT_TRUE(json_mode.options.constraint);
  EXPECT_EQ(json_mode.options.constraint->grammar.kind, GrammarKind::kJsonObject);
  EXPECT_EQ(json_mode.options.constraint->param, "format");
  const OllamaGenerateRequest schema =
      parse_ok(chat({{"format", {{"type", "object"}, {"required", {"a"}}}}}));
  ASSERT_TRUE(schema.options.constraint);
  EXPECT_EQ(schema.options.constraint->grammar.kind, GrammarKind::kJsonSchema);
  EXPECT_FALSE(parse_ok(chat({{"format", ""}})).options.constraint);
  EXPECT_EQ(refused(chat({{"format", "yaml"}})), "format");
  EXPECT_EQ(refused(chat({{"format", 3}})), "format");
}

TEST(OllamaSchema, ToolCallsGetIdsAndAToolTurnAnswersTheLatestCallOfItsName) {
  json body =
      chat({{"tools",
             {{{"type", "function"},
               {"function",
                {{"name", "get_weather"},
                 {"parameters", {{"type", "object"}, {"properties", json::object()}}}}}}}}});
  body["messages"].push_back(
      {{"role", "assistant"},
       {"content", ""},
       {"tool_calls",
        {{{"function", {{"name", "get_weather"}, {"arguments", {{"city", "Paris"}}}}}},
         {{"id", "mine"},
          {"function", {{"name", "get_weather"}, {"arguments", {{"city", "Rome"}}}}}}}}});
  body["messages"].push_back(
      {{"role", "tool"}, {"tool_name", "get_weather"}, {"content", "sunny"}});
  const OllamaGenerateRequest r = parse_ok(body);
  ASSERT_TRUE(r.tools.tools);
  EXPECT_EQ(r.tools.choice, ToolChoice::kAuto);
  ASSERT_EQ(r.messages.size(), 3u);
  const jinja::Json& calls = r.messages[1].tool_calls;
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0]["id"], "call_1_0");
  EXPECT_EQ(calls[0]["type"], "function");
  EXPECT_EQ(calls[0]["function"]["arguments"]["city"], "Paris");
  EXPECT_EQ(calls[1]["id"], "mine");
  EXPECT_EQ(r.messages[2].role, "tool");
  EXPECT_EQ(r.messages[2].tool_call_id, "mine");
  EXPECT_EQ(r.messages[2].name, "get_weather");
}

TEST(OllamaSchema, BadMessagesAreRefusedByName) {
  EXPECT_EQ(refused(chat({{"messages", "hi"}})), "messages");
  EXPECT_EQ(refused(chat({{"messages", {{{"role", "robot"}, {"content", "x"}}}}})),
            "messages[0].role");
  EXPECT_EQ(refused(chat({{"messages", {{{"role", "user"}, {"content", 3}}}}})),
            "messages[0].content");
  EXPECT_EQ(
      refused(chat({{"messages", {{{"role", "user"}, {"images", {"aGk="}}}}}}), "reads text only"),
      "messages[0].images");
  EXPECT_EQ(refused(chat({{"messages", {{{"role", "user"}, {"mood", "x"}}}}})), "messages[0].mood");
  EXPECT_EQ(refused(chat({{"messages", {{{"role", "user"}, {"tool_calls", json::array()}}}}})),
            "messages[0].tool_calls");
  EXPECT_EQ(
      refused(chat({{"messages",
                     {{{"role", "assistant"},
                       {"tool_calls", {{{"function", {{"name", "f"}, {"arguments", "x"}}}}}}}}}})),
      "messages[0].tool_calls[0].function.arguments");
  EXPECT_EQ(refused(chat({{"tools", {{{"type", "function"}}}}})).substr(0, 5), "tools");
  EXPECT_EQ(refused(chat({{"model", ""}})), "model");
  EXPECT_EQ(refused(chat({{"stream", "yes"}})), "stream");
  EXPECT_EQ(refused(chat({{"keep_alive", json::array()}})), "keep_alive");
  EXPECT_EQ(refused(chat({{"colour", "red"}}), "unknown field"), "colour");
}

TEST(OllamaSchema, ThinkIsABoolOrAnEffort) {
  EXPECT_FALSE(parse_ok(chat({{"think", false}})).think->enabled);
  const OllamaGenerateRequest high = parse_ok(chat({{"think", "high"}}));
  EXPECT_TRUE(high.think->enabled);
  EXPECT_EQ(high.think->effort, "high");
  EXPECT_FALSE(parse_ok(chat()).think);
  EXPECT_EQ(refused(chat({{"think", "max"}})), "think");
}

TEST(OllamaSchema, GenerateIsATurnOfSystemAndPromptOrRawText) {
  const OllamaGenerateRequest r =
      parse_ok({{"model", "m"}, {"prompt", "P"}, {"system", "S"}, {"keep_alive", "5m"}},
               OllamaEndpoint::kGenerate);
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages[0].role, "system");
  EXPECT_EQ(r.messages[1].content, "P");
  EXPECT_FALSE(r.raw_prompt);
  const OllamaGenerateRequest raw =
      parse_ok({{"model", "m"}, {"prompt", "P"}, {"raw", true}}, OllamaEndpoint::kGenerate);
  EXPECT_EQ(raw.raw_prompt, "P");
  EXPECT_TRUE(raw.messages.empty());
  EXPECT_TRUE(parse_ok({{"model", "m"}}, OllamaEndpoint::kGenerate).load_only);
  EXPECT_TRUE(parse_ok({{"model", "m"}, {"messages", json::array()}}).load_only);
  EXPECT_EQ(refused({{"model", "m"}, {"prompt", "P"}, {"template", "{{ .Prompt }}"}},
                    "not supported", OllamaEndpoint::kGenerate),
            "template");
  EXPECT_EQ(refused({{"model", "m"}, {"prompt", "P"}, {"context", {1, 2}}}, "not supported",
                    OllamaEndpoint::kGenerate),
            "context");
  EXPECT_EQ(refused({{"model", "m"}, {"prompt", "P"}, {"raw", true}, {"system", "S"}}, "raw",
                    OllamaEndpoint::kGenerate),
            "system");
  EXPECT_EQ(refused({{"model", "m"}, {"messages", json::array()}}, "unknown field",
                    OllamaEndpoint::kGenerate),
            "messages");
}

TEST(OllamaSchema, EmbedTakesAStringOrStringsAndTheLegacyAPrompt) {
  auto one = parse_ollama_embed_request(R"({"model": "m", "input": "a"})", false);
  ASSERT_TRUE(std::holds_alternative<OllamaEmbedRequest>(one));
  EXPECT_EQ(std::get<OllamaEmbedRequest>(one).inputs, std::vector<std::string>{"a"});
  EXPECT_TRUE(std::get<OllamaEmbedRequest>(one).truncate);
  auto two = parse_ollama_embed_request(
      R"({"model": "m", "input": ["a", "b"], "truncate": false, "dimensions": 8})", false);
  ASSERT_TRUE(std::holds_alternative<OllamaEmbedRequest>(two));
  EXPECT_EQ(std::get<OllamaEmbedRequest>(two).inputs.size(), 2u);
  EXPECT_FALSE(std::get<OllamaEmbedRequest>(two).truncate);
  EXPECT_EQ(std::get<OllamaEmbedRequest>(two).dimensions, 8);
  auto legacy = parse_ollama_embed_request(R"({"model": "m", "prompt": "a"})", true);
  ASSERT_TRUE(std::holds_alternative<OllamaEmbedRequest>(legacy));
  EXPECT_TRUE(std::get<OllamaEmbedRequest>(legacy).legacy);
  for (const char* bad :
       {R"({"model": "m"})", R"({"model": "m", "input": []})", R"({"model": "m", "input": [""]})",
        R"({"model": "m", "input": [1]})", R"({"model": "m", "input": "a", "truncate": 1})",
        R"({"model": "m", "input": "a", "dimensions": 0})", R"({"model": "m", "prompt": "a"})",
        R"({"input": "a"})"}) {
    auto r = parse_ollama_embed_request(bad, false);
    ASSERT_TRUE(std::holds_alternative<ApiError>(r)) << bad;
    EXPECT_EQ(std::get<ApiError>(r).status, 400) << bad;
  }
  EXPECT_TRUE(std::holds_alternative<ApiError>(
      parse_ollama_embed_request(R"({"model": "m", "prompt": ["a"]})", true)));
}

TEST(OllamaSchema, ShowTakesModelOrNameAndNamesMayCarryTheLatestTag) {
  auto show = parse_ollama_show_request(R"({"name": "m:latest", "verbose": true})");
  ASSERT_TRUE(std::holds_alternative<std::string>(show));
  EXPECT_EQ(std::get<std::string>(show), "m:latest");
  EXPECT_TRUE(std::holds_alternative<ApiError>(parse_ollama_show_request("{}")));
  EXPECT_TRUE(std::holds_alternative<ApiError>(parse_ollama_show_request("[1]")));
  EXPECT_EQ(ollama_base_name("m:latest"), "m");
  EXPECT_EQ(ollama_base_name("m:q4"), "m:q4");
  EXPECT_EQ(ollama_base_name("m"), "m");
}

}  // namespace
}  // namespace drift::server
