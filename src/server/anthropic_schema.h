// Anthropic Messages request bodies (POST /v1/messages and /v1/messages/count_tokens) -> the
// server's chat request: the conversation as ChatMessages (a `system` first; `tool_use` blocks as
// an assistant turn's tool_calls, `tool_result` blocks as tool turns, `thinking` blocks as its
// reasoning_content), the tools as OpenAI tool objects (what chat templates and the tool-call
// grammar take), and the generation options. Only the shapes are Anthropic's: the request then
// takes the chat endpoint's path (templating, tool calls, stop strings, limits).
//
// The body is read with its key order kept (jinja::Json), because templates print tool schemas
// and call inputs in the client's order. Every problem is a 400 naming the field; unknown fields
// are refused, as Anthropic's API refuses them, and so are the blocks and tools a text-only
// local model cannot honour (images, documents, server tools).
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

enum class AnthropicEndpoint {
  kMessages,     // /v1/messages: max_tokens required
  kCountTokens,  // /v1/messages/count_tokens: the prompt's fields only
};

struct AnthropicRequest {
  std::string model;
  std::vector<ChatMessage> messages;  // the system prompt, if any, first
  ToolRequest tools;                  // tools, tool_choice, disable_parallel_tool_use
  GenerationOptions options;          // max_tokens, sampling, stop_sequences, stream
  // `thinking: {"type": "disabled"}` leaves a reasoning model's thinking blocks out of the reply.
  bool show_thinking = true;
  // output_config.effort ("low", "medium", "high"): the template's reasoning_effort.
  std::optional<std::string> effort;
};

// The body as the server received it: UTF-8 and the bounds of util/json_limits.h are checked
// first (request_json.h), then the fields.
std::variant<AnthropicRequest, ApiError> parse_anthropic_request(std::string_view body,
                                                                 AnthropicEndpoint endpoint);

}  // namespace drift::server
