// The tool (function-calling) fields of a chat request: `tools`, `tool_choice`,
// `parallel_tool_calls`, the tool calls of earlier assistant turns, and vLLM's
// `chat_template_kwargs`. They are read from the body parsed with its key order kept (jinja::Json),
// because templates print tool schemas with `tojson` and Python keeps a client's key order.
#pragma once

#include <fmt/format.h>

#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "engine/request.h"
#include "jinja/json.h"
#include "server/api_error.h"
#include "server/json_fields.h"

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

// For the APIs whose tools are shaped otherwise (Anthropic's, Responses'): the body's "tools"
// array, at most kMaxTools, each entry turned into the OpenAI shape templates print by the API's
// `read_tool(entry, index, names)`, which records the tool's name in `names` (for tool_choice).
template <typename ReadTool>
std::optional<ApiError> read_tools_array(const jinja::Json& body, ReadTool read_tool,
                                         std::set<std::string>& names, ToolRequest& out) {
  const jinja::Json* tools = field(body, "tools");
  if (!tools) return std::nullopt;
  if (!tools->is_array()) return wrong_type("tools", "an array", *tools);
  if (tools->size() > kMaxTools)
    return bad_request(
        fmt::format("'tools' may hold at most {} tools, got {}", kMaxTools, tools->size()),
        "tools");
  jinja::Json converted = jinja::Json::array();
  for (size_t i = 0; i < tools->size(); ++i) {
    std::variant<jinja::Json, ApiError> tool = read_tool((*tools)[i], i, names);
    if (auto* e = std::get_if<ApiError>(&tool)) return *e;
    converted.push_back(std::move(std::get<jinja::Json>(tool)));
  }
  if (!converted.empty()) out.tools = std::move(converted);
  return std::nullopt;
}

// The start of a tool in the OpenAI function shape templates print, for the APIs whose tools are
// shaped otherwise: {"name", "description"?} from the tool's fields of those names, the name
// checked (valid_function_name) and unique among `names`, where it is recorded. `param` names
// the tool in a 400 ("tools[2]").
std::variant<jinja::Json, ApiError> read_tool_name_and_description(const jinja::Json& tool,
                                                                   const std::string& param,
                                                                   std::set<std::string>& names);

// A tool_choice that demands a call (required, or a named function) needs tools to call.
std::optional<ApiError> check_demanded_call_has_tools(const ToolRequest& request);

// Reads and checks the fields above; each problem is a 400 naming its field.
std::variant<ToolRequest, ApiError> parse_tool_request(const jinja::Json& body);

// Sets each message's tool_calls and tool_call_id from body["messages"] (the same messages,
// already validated for role and content): [{"id", "type": "function", "function": {"name",
// "arguments": a JSON text}}], arguments parsed into the object templates print.
std::optional<ApiError> read_message_tool_calls(const jinja::Json& body,
                                                std::vector<ChatMessage>& messages);

}  // namespace drift::server
