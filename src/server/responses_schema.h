// OpenAI Responses request bodies (POST /v1/responses) -> the server's chat request: the input
// (a string, or a list of items: messages with text parts, function_call and
// function_call_output items, reasoning items) as ChatMessages, `instructions` as a system
// message first, function tools as OpenAI chat tool objects (what chat templates and the
// tool-call grammar take), `text.format` as the output constraint, and the generation options.
// Only the shapes are the Responses API's: the request then takes the chat endpoint's path.
//
// The same item reader reads a stored response's conversation back (a continued response's
// history is the earlier input items plus the earlier output items, which are items of the same
// kinds), so a conversation renders alike whether it comes whole or through
// previous_response_id.
//
// The body is read with its key order kept (jinja::Json), because templates print tool schemas
// and call arguments in the client's order. Every problem is a 400 naming the field; unknown
// fields are refused, as OpenAI's API refuses them, and so are the tools and inputs a text-only
// local model cannot honour (built-in tools, images, files).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "engine/request.h"
#include "jinja/json.h"
#include "server/api_error.h"
#include "server/openai_schema.h"
#include "server/tool_request.h"

namespace drift::server {

inline constexpr size_t kMaxInputItems = 4096;      // as kMaxMessages
inline constexpr size_t kMaxMetadataKeys = 16;      // OpenAI's bounds on `metadata`
inline constexpr size_t kMaxMetadataKeyBytes = 64;  //
inline constexpr size_t kMaxMetadataValueBytes = 512;

struct ResponsesRequest {
  std::optional<std::string> model;
  // The input as items (a string input becomes one user message item), as a later response that
  // continues this one reads them again.
  jinja::Json input_items = jinja::Json::array();
  // `input_items` read into turns (the instructions not included).
  std::vector<ChatMessage> messages;
  std::optional<std::string> instructions;
  ToolRequest tools;          // tools, tool_choice, parallel_tool_calls
  GenerationOptions options;  // max_output_tokens, temperature, top_p, text.format, stream
  bool store = true;          // OpenAI's default
  std::optional<std::string> previous_response_id;
  std::optional<std::string> reasoning_effort;  // reasoning.effort: the template's variable
  // The request's fields a response object repeats (instructions, metadata, tools, tool_choice,
  // temperature, top_p, max_output_tokens, parallel_tool_calls, previous_response_id, store,
  // text, reasoning, truncation), with OpenAI's defaults for those not given.
  jinja::Json echo = jinja::Json::object();
};

// The body as the server received it: UTF-8 and the bounds of util/json_limits.h are checked
// first (request_json.h), then the fields.
std::variant<ResponsesRequest, ApiError> parse_responses_request(std::string_view body);

// Appends the turns of input `items` (an array) to `out`; `param` names the array in a 400
// ("input"). A function_call item joins the assistant turn before it (or starts one); a
// function_call_output item becomes a tool turn.
std::optional<ApiError> read_input_items(const jinja::Json& items, std::string_view param,
                                         std::vector<ChatMessage>& out);

// Every tool turn of `messages` answers a call an earlier assistant turn made (a 400 naming
// "input" otherwise): checked once a continued response's history is joined to its input.
std::optional<ApiError> check_tool_outputs(const std::vector<ChatMessage>& messages);

}  // namespace drift::server
