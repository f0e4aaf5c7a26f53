// Reading tool calls back out of replies in each model family's syntax, the syntax read from
// real templates, holding back streamed text that may start a call, and the generic syntax's
// system message for templates that cannot show tools.
#include "chat/tool_call_syntax.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

namespace drift {
namespace {

std::string read_template(const std::string& name) {
  std::ifstream in(std::string(DRIFT_TEST_DATA_DIR) + "/templates/" + name);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(ToolCallSyntax, IsReadFromTheTemplatesThatRenderCalls) {
  EXPECT_EQ(detect_tool_call_syntax(read_template("Qwen-Qwen2.5-7B-Instruct.jinja")),
            ToolCallSyntax::kHermes);
  EXPECT_EQ(
      detect_tool_call_syntax(read_template("NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja")),
      ToolCallSyntax::kHermes);
  EXPECT_EQ(detect_tool_call_syntax(read_template("Qwen-Qwen3-0.6B.jinja")),
            ToolCallSyntax::kHermes);
  EXPECT_EQ(detect_tool_call_syntax(read_template("meta-llama-Llama-3.1-8B-Instruct.jinja")),
            ToolCallSyntax::kLlama3);
  EXPECT_EQ(detect_tool_call_syntax(read_template("meta-llama-Llama-3.2-3B-Instruct.jinja")),
            ToolCallSyntax::kLlama3);
  EXPECT_EQ(detect_tool_call_syntax(read_template("mistralai-Mistral-Nemo-Instruct-2407.jinja")),
            ToolCallSyntax::kMistral);
  EXPECT_EQ(detect_tool_call_syntax(read_template("HuggingFaceTB-SmolLM2-135M-Instruct.jinja")),
            ToolCallSyntax::kGeneric);
  EXPECT_EQ(detect_tool_call_syntax(read_template("chatml.jinja")), ToolCallSyntax::kGeneric);
}

TEST(ToolCallSyntax, HermesBlocksBecomeCallsAndTheTextAroundThemContent) {
  const ParsedReply r = parse_tool_calls(
      ToolCallSyntax::kHermes,
      "Let me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Paris\", \"days\": [1, 2]}}\n</tool_call>\n<tool_call>\n{\"name\": \"search\", "
      "\"arguments\": \"{\\\"q\\\": \\\"museums\\\"}\"}\n</tool_call>");
  EXPECT_EQ(r.content, "Let me look.");
  ASSERT_EQ(r.tool_calls.size(), 2u);
  EXPECT_EQ(r.tool_calls[0].name, "get_weather");
  EXPECT_EQ(r.tool_calls[0].arguments, R"({"city":"Paris","days":[1,2]})");
  EXPECT_EQ(r.tool_calls[1].name, "search");
  EXPECT_EQ(r.tool_calls[1].arguments, R"({"q":"museums"})");  // a string holding JSON
}

TEST(ToolCallSyntax, AnUnclosedHermesBlockAtTheEndIsStillACall) {
  const ParsedReply r = parse_tool_calls(ToolCallSyntax::kHermes,
                                         "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n");
  ASSERT_EQ(r.tool_calls.size(), 1u);
  EXPECT_EQ(r.tool_calls[0].arguments, "{}");
  EXPECT_EQ(r.content, "");
}

TEST(ToolCallSyntax, AReplyCutShortKeepsTheCallsItCompleted) {
  const ParsedReply r = parse_tool_calls(ToolCallSyntax::kHermes,
                                         "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": "
                                         "1}}\n</tool_call>\n<tool_call>\n{\"na");
  ASSERT_EQ(r.tool_calls.size(), 1u);
  EXPECT_EQ(r.tool_calls[0].arguments, R"({"a":1})");
}

TEST(ToolCallSyntax, AReplyThatIsNotAWellFormedCallIsContentUnchanged) {
  for (const char* reply : {"<tool_call>\n{\"name\": \"f\", \"arguments\": {\n</tool_call>",
                            "<tool_call>{\"arguments\": {}}</tool_call>",
                            "I would call <tool_call> here", "plain text"}) {
    const ParsedReply r = parse_tool_calls(ToolCallSyntax::kHermes, reply);
    EXPECT_TRUE(r.tool_calls.empty()) << reply;
    EXPECT_EQ(r.content, reply);
  }
  const ParsedReply llama = parse_tool_calls(ToolCallSyntax::kLlama3, "{\"answer\": 4}");
  EXPECT_TRUE(llama.tool_calls.empty());
  EXPECT_EQ(llama.content, "{\"answer\": 4}");
}

TEST(ToolCallSyntax, Llama3AndMistralReplies) {
  const ParsedReply llama =
      parse_tool_calls(ToolCallSyntax::kLlama3,
                       " {\"name\": \"get_weather\", \"parameters\": {\"city\": \"Rome\"}}");
  ASSERT_EQ(llama.tool_calls.size(), 1u);
  EXPECT_EQ(llama.tool_calls[0].name, "get_weather");
  EXPECT_EQ(llama.tool_calls[0].arguments, R"({"city":"Rome"})");
  const ParsedReply mistral = parse_tool_calls(
      ToolCallSyntax::kMistral,
      R"([{"name": "a", "arguments": {"x": 1}}, {"name": "b", "arguments": {"y": "z"}}])");
  ASSERT_EQ(mistral.tool_calls.size(), 2u);
  EXPECT_EQ(mistral.tool_calls[1].name, "b");
  EXPECT_EQ(mistral.tool_calls[1].arguments, R"({"y":"z"})");
}

TEST(ToolCallSyntax, GenericRepliesAreACallOrAResponse) {
  const ParsedReply call = parse_tool_calls(
      ToolCallSyntax::kGeneric, R"({"tool_call": {"name": "f", "arguments": {"n": 2}}})");
  ASSERT_EQ(call.tool_calls.size(), 1u);
  EXPECT_EQ(call.tool_calls[0].arguments, R"({"n":2})");
  const ParsedReply response =
      parse_tool_calls(ToolCallSyntax::kGeneric, R"({"response": "Hello there"})");
  EXPECT_TRUE(response.tool_calls.empty());
  EXPECT_EQ(response.content, "Hello there");
  const ParsedReply text = parse_tool_calls(ToolCallSyntax::kGeneric, "Just text.");
  EXPECT_EQ(text.content, "Just text.");
}

TEST(ToolCallSyntax, StreamingHoldsBackOnlyWhatMayStartACall) {
  EXPECT_EQ(streamable_content_length(ToolCallSyntax::kHermes, "Hello"), 5u);
  EXPECT_EQ(streamable_content_length(ToolCallSyntax::kHermes, "Hello <tool"), 6u);
  EXPECT_EQ(streamable_content_length(ToolCallSyntax::kHermes, "Hello <tool_call>{\"na"), 6u);
  EXPECT_EQ(streamable_content_length(ToolCallSyntax::kHermes, "a < b"), 5u);
  EXPECT_EQ(streamable_content_length(ToolCallSyntax::kGeneric, "  "), 0u);
  EXPECT_EQ(streamable_content_length(ToolCallSyntax::kGeneric, " {\"tool"), 0u);
  EXPECT_EQ(streamable_content_length(ToolCallSyntax::kGeneric, "Sure"), 4u);
  EXPECT_EQ(streamable_content_length(ToolCallSyntax::kMistral, "[{"), 0u);
  EXPECT_EQ(streamable_content_length(ToolCallSyntax::kLlama3, "The answer"), 10u);
}

TEST(ToolCallSyntax, GenericToolsGoInTheSystemMessageAndEarlierCallsInTheContent) {
  const jinja::Json tools = jinja::Json::parse(
      R"([{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}])");
  const jinja::Json messages = jinja::Json::parse(R"([
    {"role": "user", "content": "Weather?"},
    {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function",
      "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}])");
  const jinja::Json out = with_generic_tools(messages, tools, /*required=*/false);
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[0]["role"], "system");
  const std::string system = out[0]["content"];
  EXPECT_NE(system.find(R"({"name":"get_weather","parameters":{"type":"object"}})"),
            std::string::npos)
      << system;
  EXPECT_NE(system.find("\"response\""), std::string::npos);
  EXPECT_EQ(out[2]["content"],
            R"({"tool_call":{"name":"get_weather","arguments":{"city":"Paris"}}})");
  EXPECT_FALSE(out[2].contains("tool_calls"));
  // The generic reply shape round-trips through the parser.
  const ParsedReply back =
      parse_tool_calls(ToolCallSyntax::kGeneric, out[2]["content"].get<std::string>());
  ASSERT_EQ(back.tool_calls.size(), 1u);
  EXPECT_EQ(back.tool_calls[0].arguments, R"({"city":"Paris"})");

  // A system message of the client's keeps its place and gains the tools; "required" offers no
  // "response" shape.
  const jinja::Json with_system = with_generic_tools(
      jinja::Json::parse(
          R"([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "x"}])"),
      tools, /*required=*/true);
  ASSERT_EQ(with_system.size(), 2u);
  const std::string merged = with_system[0]["content"];
  EXPECT_TRUE(merged.starts_with("Be brief.\n\n")) << merged;
  EXPECT_EQ(merged.find("\"response\""), std::string::npos);
}

}  // namespace
}  // namespace drift
