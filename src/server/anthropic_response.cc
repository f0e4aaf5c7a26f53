#include "server/anthropic_response.h"

#include "jinja/json.h"
#include "server/sse.h"
#include "util/json_limits.h"

namespace drift::server {
namespace {

using nlohmann::json;

// A call's input: the arguments' JSON object in the model's key order. A harmony reply's
// arguments are the model's text as written (a model can be led to write any nesting, hence the
// bounded parse); one that is not a JSON object within the bounds is kept as a string rather than
// lost.
jinja::Json call_input(const ToolCall& call) {
  Expected<jinja::Json> input = parse_bounded_json<jinja::Json>(call.arguments);
  if (input.ok() && input->is_object()) return std::move(input).value();
  return call.arguments;
}

std::string dump(const jinja::Json& j) {
  return j.dump(-1, ' ', false, jinja::Json::error_handler_t::replace);
}

std::string event(std::string_view type, const jinja::Json& data) {
  return sse_named_event(type, dump(data));
}

jinja::Json usage(int64_t input_tokens, int64_t output_tokens) {
  return jinja::Json{{"input_tokens", input_tokens}, {"output_tokens", output_tokens}};
}

}  // namespace

std::string_view anthropic_error_type(int status) {
  switch (status) {
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 413:
      return "request_too_large";
    case 429:
      return "rate_limit_error";
    case 503:
    case 529:
      return "overloaded_error";
    default:
      return status >= 500 ? "api_error" : "invalid_request_error";
  }
}

// Anthropic's shape has no "param": a message that does not name its field gets it in front.
std::string anthropic_error_json(const ApiError& error) {
  std::string message = error.message;
  if (error.param && message.find(*error.param) == std::string::npos)
    message = *error.param + ": " + message;
  const json body{{"type", "error"},
                  {"error", {{"type", anthropic_error_type(error.status)}, {"message", message}}}};
  return body.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string_view anthropic_stop_reason(std::string_view reason, bool stopped_by_string) {
  if (reason == "length") return "max_tokens";
  if (reason == "tool_calls") return "tool_use";
  return stopped_by_string ? "stop_sequence" : "end_turn";
}

std::string AnthropicReplyCodec::stream_start(std::span<const std::string> /*echoes*/,
                                              int64_t prompt_tokens) {
  jinja::Json message{{"id", id_},
                      {"type", "message"},
                      {"role", "assistant"},
                      {"model", model_},
                      {"content", jinja::Json::array()},
                      {"stop_reason", nullptr},
                      {"stop_sequence", nullptr},
                      {"usage", usage(prompt_tokens, 0)}};
  return event("message_start", {{"type", "message_start"}, {"message", std::move(message)}}) +
         event("ping", {{"type", "ping"}});
}

std::string AnthropicReplyCodec::close_block() {
  if (open_ == Block::kNone) return {};
  open_ = Block::kNone;
  return event("content_block_stop", {{"type", "content_block_stop"}, {"index", next_block_++}});
}

std::string AnthropicReplyCodec::open_block(Block kind) {
  if (open_ == kind) return {};
  std::string out = close_block();
  open_ = kind;
  const jinja::Json block =
      kind == Block::kText ? jinja::Json{{"type", "text"}, {"text", ""}}
                           : jinja::Json{{"type", "thinking"}, {"thinking", ""}, {"signature", ""}};
  return out +
         event("content_block_start",
               {{"type", "content_block_start"}, {"index", next_block_}, {"content_block", block}});
}

std::string AnthropicReplyCodec::reasoning_delta(int32_t /*index*/, std::string_view text,
                                                 nlohmann::json /*logprobs*/) {
  if (!show_thinking_) return {};
  std::string out = open_block(Block::kThinking);
  return out + event("content_block_delta",
                     {{"type", "content_block_delta"},
                      {"index", next_block_},
                      {"delta", {{"type", "thinking_delta"}, {"thinking", std::string(text)}}}});
}

std::string AnthropicReplyCodec::content_delta(int32_t /*index*/, std::string_view text,
                                               nlohmann::json /*logprobs*/) {
  std::string out = open_block(Block::kText);
  return out + event("content_block_delta",
                     {{"type", "content_block_delta"},
                      {"index", next_block_},
                      {"delta", {{"type", "text_delta"}, {"text", std::string(text)}}}});
}

std::string AnthropicReplyCodec::tool_calls(int32_t /*index*/, std::span<const ToolCall> calls) {
  std::string out = close_block();
  for (const ToolCall& call : calls) {
    const int32_t index = next_block_++;
    const jinja::Json block{{"type", "tool_use"},
                            {"id", call.id},
                            {"name", call.name},
                            {"input", jinja::Json::object()}};
    out += event("content_block_start",
                 {{"type", "content_block_start"}, {"index", index}, {"content_block", block}});
    out += event(
        "content_block_delta",
        {{"type", "content_block_delta"},
         {"index", index},
         {"delta", {{"type", "input_json_delta"}, {"partial_json", dump(call_input(call))}}}});
    out += event("content_block_stop", {{"type", "content_block_stop"}, {"index", index}});
  }
  return out;
}

std::string AnthropicReplyCodec::choice_end(int32_t /*index*/, const ChoiceEnd& end,
                                            nlohmann::json /*logprobs*/) {
  std::string out = close_block();
  const jinja::Json delta{
      {"stop_reason", anthropic_stop_reason(end.reason, end.stop_string.has_value())},
      {"stop_sequence", end.stop_string ? jinja::Json(*end.stop_string) : jinja::Json(nullptr)}};
  return out + event("message_delta", {{"type", "message_delta"},
                                       {"delta", delta},
                                       {"usage", {{"output_tokens", end.completion_tokens}}}});
}

std::string AnthropicReplyCodec::stream_end(int64_t /*prompt_tokens*/,
                                            int64_t /*completion_tokens*/) {
  return event("message_stop", {{"type", "message_stop"}});
}

std::string AnthropicReplyCodec::stream_error(const ApiError& error) {
  return sse_named_event("error", anthropic_error_json(error));
}

std::string AnthropicReplyCodec::response(const std::vector<ChoiceResult>& choices,
                                          int64_t prompt_tokens, int64_t completion_tokens) {
  // One choice: the Messages API has no n.
  const ChoiceResult& c = choices.at(0);
  jinja::Json content = jinja::Json::array();
  if (show_thinking_ && c.reasoning_content && !c.reasoning_content->empty())
    content.push_back(
        {{"type", "thinking"}, {"thinking", *c.reasoning_content}, {"signature", ""}});
  if (!c.text.empty()) content.push_back({{"type", "text"}, {"text", c.text}});
  for (const ToolCall& call : c.tool_calls)
    content.push_back(
        {{"type", "tool_use"}, {"id", call.id}, {"name", call.name}, {"input", call_input(call)}});
  const jinja::Json body{
      {"id", id_},
      {"type", "message"},
      {"role", "assistant"},
      {"model", model_},
      {"content", std::move(content)},
      {"stop_reason", anthropic_stop_reason(c.finish_reason, c.stop_string.has_value())},
      {"stop_sequence", c.stop_string ? jinja::Json(*c.stop_string) : jinja::Json(nullptr)},
      {"usage", usage(prompt_tokens, completion_tokens)}};
  return dump(body);
}

}  // namespace drift::server
