// Anthropic's reply shapes (anthropic_response.h): the event sequence a stream gets for each mix
// of thinking, text and tool calls, the whole message, stop reasons and error bodies.
#include "server/anthropic_response.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace drift::server {
namespace {

using nlohmann::json;

struct Event {
  std::string name;
  json data;
};

// Splits SSE frames into events, checking each frame's shape: "event: NAME\ndata: JSON\n\n"
// whose JSON "type" is NAME.
std::vector<Event> events_of(const std::string& frames) {
  std::vector<Event> out;
  size_t at = 0;
  while (at < frames.size()) {
    const size_t end = frames.find("\n\n", at);
    EXPECT_NE(end, std::string::npos) << "an unterminated frame: " << frames.substr(at);
    if (end == std::string::npos) break;
    const std::string frame = frames.substr(at, end - at);
    at = end + 2;
    const size_t newline = frame.find('\n');
    EXPECT_TRUE(frame.starts_with("event: ")) << frame;
    EXPECT_EQ(frame.substr(newline + 1, 6), "data: ") << frame;
    Event e{frame.substr(7, newline - 7), json::parse(frame.substr(newline + 7))};
    EXPECT_EQ(e.data["type"], e.name) << frame;
    out.push_back(std::move(e));
  }
  return out;
}

std::vector<std::string> names(const std::vector<Event>& events) {
  std::vector<std::string> out;
  for (const Event& e : events) out.push_back(e.name);
  return out;
}

TEST(AnthropicResponse, AStreamOfThinkingTextAndACallOpensAndClosesEachBlock) {
  AnthropicReplyCodec codec("msg_1", "m", /*show_thinking=*/true);
  std::string frames = codec.stream_start({}, 12);
  frames += codec.reasoning_delta(0, "Think", nullptr);
  frames += codec.reasoning_delta(0, "ing.", nullptr);
  frames += codec.content_delta(0, "Hel", nullptr);
  frames += codec.content_delta(0, "lo", nullptr);
  const std::vector<ToolCall> calls = {{"toolu_a", "f", R"({"b": 1, "a": [2]})"},
                                       {"toolu_b", "g", "{}"}};
  frames += codec.tool_calls(0, calls);
  frames += codec.choice_end(0, {"tool_calls", std::nullopt, 9}, nullptr);
  frames += codec.stream_end(12, 9);
  const std::vector<Event> events = events_of(frames);
  EXPECT_EQ(names(events),
            (std::vector<std::string>{
                "message_start", "ping",                                              //
                "content_block_start", "content_block_delta", "content_block_delta",  // thinking
                "content_block_stop",                                                 //
                "content_block_start", "content_block_delta", "content_block_delta",  // text
                "content_block_stop",                                                 //
                "content_block_start", "content_block_delta", "content_block_stop",   // f
                "content_block_start", "content_block_delta", "content_block_stop",   // g
                "message_delta", "message_stop"}));
  const json& message = events[0].data["message"];
  EXPECT_EQ(message["id"], "msg_1");
  EXPECT_EQ(message["role"], "assistant");
  EXPECT_EQ(message["content"], json::array());
  EXPECT_EQ(message["usage"]["input_tokens"], 12);
  EXPECT_EQ(events[2].data["content_block"]["type"], "thinking");
  EXPECT_EQ(events[2].data["index"], 0);
  EXPECT_EQ(events[3].data["delta"], json({{"type", "thinking_delta"}, {"thinking", "Think"}}));
  EXPECT_EQ(events[5].data["index"], 0);
  EXPECT_EQ(events[6].data["content_block"], json({{"type", "text"}, {"text", ""}}));
  EXPECT_EQ(events[6].data["index"], 1);
  EXPECT_EQ(events[8].data["delta"], json({{"type", "text_delta"}, {"text", "lo"}}));
  EXPECT_EQ(events[9].data["index"], 1);
  EXPECT_EQ(
      events[10].data["content_block"],
      json({{"type", "tool_use"}, {"id", "toolu_a"}, {"name", "f"}, {"input", json::object()}}));
  EXPECT_EQ(events[10].data["index"], 2);
  EXPECT_EQ(events[11].data["delta"],
            json({{"type", "input_json_delta"}, {"partial_json", R"({"b":1,"a":[2]})"}}))
      << "the arguments in the model's key order";
  EXPECT_EQ(events[13].data["index"], 3);
  EXPECT_EQ(events[16].data["delta"],
            json({{"stop_reason", "tool_use"}, {"stop_sequence", nullptr}}));
  EXPECT_EQ(events[16].data["usage"]["output_tokens"], 9);
}

TEST(AnthropicResponse, AStopSequenceIsNamedAndHiddenThinkingSendsNothing) {
  AnthropicReplyCodec codec("msg_2", "m", /*show_thinking=*/false);
  std::string frames = codec.stream_start({}, 3);
  EXPECT_EQ(codec.reasoning_delta(0, "hidden", nullptr), "");
  frames += codec.content_delta(0, "1, 2", nullptr);
  frames += codec.choice_end(0, {"stop", std::string(", 3"), 4}, nullptr);
  frames += codec.stream_end(3, 4);
  const std::vector<Event> events = events_of(frames);
  EXPECT_EQ(names(events), (std::vector<std::string>{"message_start", "ping", "content_block_start",
                                                     "content_block_delta", "content_block_stop",
                                                     "message_delta", "message_stop"}));
  EXPECT_EQ(events[2].data["index"], 0);
  EXPECT_EQ(events[5].data["delta"],
            json({{"stop_reason", "stop_sequence"}, {"stop_sequence", ", 3"}}));
}

TEST(AnthropicResponse, TheWholeMessageHasABlockPerPart) {
  AnthropicReplyCodec codec("msg_3", "the-model", /*show_thinking=*/true);
  ChoiceResult c;
  c.text = "Let me check.";
  c.finish_reason = "tool_calls";
  c.reasoning_content = "Need weather.";
  c.tool_calls = {{"toolu_x", "get_weather", R"({"city": "Paris"})"}};
  const json body = json::parse(codec.response({c}, 20, 7));
  EXPECT_EQ(body, json::parse(R"({"id": "msg_3", "type": "message", "role": "assistant",
      "model": "the-model", "content": [
        {"type": "thinking", "thinking": "Need weather.", "signature": ""},
        {"type": "text", "text": "Let me check."},
        {"type": "tool_use", "id": "toolu_x", "name": "get_weather", "input": {"city": "Paris"}}],
      "stop_reason": "tool_use", "stop_sequence": null,
      "usage": {"input_tokens": 20, "output_tokens": 7}})"));
  // Arguments a model wrote that are no JSON object (or nest too deep) stay as their text.
  c.tool_calls = {{"toolu_y", "f", "not json"},
                  {"toolu_z", "f", std::string(1000, '[') + std::string(1000, ']')}};
  const json odd = json::parse(codec.response({c}, 1, 2))["content"];
  EXPECT_EQ(odd[2]["input"], "not json");
  EXPECT_EQ(odd[3]["input"], std::string(1000, '[') + std::string(1000, ']'));
  c = ChoiceResult();
  c.finish_reason = "length";
  EXPECT_EQ(json::parse(codec.response({c}, 1, 2))["stop_reason"], "max_tokens");
  EXPECT_EQ(json::parse(codec.response({c}, 1, 2))["content"], json::array());
}

TEST(AnthropicResponse, StopReasonsAndErrorTypes) {
  EXPECT_EQ(anthropic_stop_reason("stop", false), "end_turn");
  EXPECT_EQ(anthropic_stop_reason("stop", true), "stop_sequence");
  EXPECT_EQ(anthropic_stop_reason("length", false), "max_tokens");
  EXPECT_EQ(anthropic_stop_reason("tool_calls", false), "tool_use");
  EXPECT_EQ(json::parse(anthropic_error_json(bad_request("bad 'x'", "x"))),
            json::parse(R"({"type": "error", "error": {"type": "invalid_request_error",
                "message": "bad 'x'"}})"));
  EXPECT_EQ(json::parse(anthropic_error_json(
                bad_request("no schema type 'x'", "tools")))["error"]["message"],
            "tools: no schema type 'x'")
      << "the field a message does not name goes in front";
  EXPECT_EQ(anthropic_error_type(401), "authentication_error");
  EXPECT_EQ(anthropic_error_type(404), "not_found_error");
  EXPECT_EQ(anthropic_error_type(429), "rate_limit_error");
  EXPECT_EQ(anthropic_error_type(503), "overloaded_error");
  EXPECT_EQ(anthropic_error_type(500), "api_error");
  AnthropicReplyCodec codec("msg_4", "m", true);
  const std::vector<Event> events = events_of(codec.stream_error(unavailable("shutting down")));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].name, "error");
  EXPECT_EQ(events[0].data["error"]["type"], "overloaded_error");
}

}  // namespace
}  // namespace drift::server
