// The tool (function-calling) fields of a chat request: `tools`, `tool_choice`,
// `parallel_tool_calls`, the tool calls of earlier assistant turns, and vLLM's
// `chat_template_kwargs`. They are read from the body parsed with its key order kept (jinja::Json),
// because templates print tool schemas with `tojson` and Python keeps a client's key order.
#pragma once

#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "engine/request.h"
#include "jinja/json.h"
#include "server/api_error.h"

namespace drift::server {

inline constexpr size_t kMaxTools = 128;             // as OpenAI's API allows
inline constexpr size_t kMaxToolNameBytes = 64;      // [a-zA-Z0-9_-]{1,64}, as OpenAI's API
inline constexpr size_t kMaxToolCallsPerTurn = 128;  // an assistant turn's tool_calls

enum class ToolChoice { kNone, kAuto, kRequired, kNamed };

struct ToolRequest {
  // The functions offered, validated; absent when none (`tools` absent or []).
  std::optional<jinja::Json> tools;
  ToolChoice choice = ToolChoice::kNone;  // "auto" by default when tools are given
  std::string named_function;             // kNamed: the function that must be called
  bool parallel_tool_calls = true;
  jinja::Json template_kwargs = jinja::Json::object();

  // The model sees the tools and its replies are read for calls.
  bool active() const { return tools && choice != ToolChoice::kNone; }
};

// A function name as OpenAI's and Anthropic's APIs allow it: 1 to kMaxToolNameBytes of
// [a-zA-Z0-9_-].
bool valid_function_name(std::string_view name);

// Reads and checks the fields above; each problem is a 400 naming its field.
std::variant<ToolRequest, ApiError> parse_tool_request(const jinja::Json& body);

// Sets each message's tool_calls and tool_call_id from body["messages"] (the same messages,
// already validated for role and content): [{"id", "type": "function", "function": {"name",
// "arguments": a JSON text}}], arguments parsed into the object templates print.
std::optional<ApiError> read_message_tool_calls(const jinja::Json& body,
                                                std::vector<ChatMessage>& messages);

}  // namespace drift::server
