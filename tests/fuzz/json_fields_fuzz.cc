// libFuzzer target for JSON that arrives inside a string: a schema sent as text (guided_json,
// response_format's json_schema.schema), an earlier tool call's arguments, and a model's reply
// read as tool calls in each syntax drift parses. The input is the string's content. Whatever it
// holds, the request is accepted or refused with a 4xx naming the field, and nothing may crash,
// hang or recurse past util/json_limits.h's depth (ASan catches a stack overflow).
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "chat/tool_call_syntax.h"
#include "server/api_error.h"
#include "server/openai_schema.h"
#include "server/request_json.h"
#include "server/tool_request.h"
#include "util/utf8.h"

namespace {

using drift::server::ApiError;

void check_error(const ApiError& e) {
  if (e.status < 400 || e.status > 499 || e.message.empty() || !e.param || e.param->empty())
    abort();
  (void)nlohmann::json::parse(drift::server::error_json(e));  // aborts if it is not JSON
}

template <typename T>
void check(const std::variant<T, ApiError>& result) {
  if (auto* e = std::get_if<ApiError>(&result)) check_error(*e);
}

void schema_fields(const std::string& text) {
  nlohmann::json completion = {{"prompt", "hi"}, {"guided_json", text}};
  check(drift::server::parse_completion_request(completion));
  nlohmann::json chat = {
      {"messages", {{{"role", "user"}, {"content", "hi"}}}},
      {"response_format",
       {{"type", "json_schema"}, {"json_schema", {{"name", "x"}, {"schema", text}}}}}};
  check(drift::server::parse_chat_request(chat));
}

void tool_call_arguments(const std::string& text) {
  drift::jinja::Json body = {{"messages",
                              {{{"role", "assistant"},
                                {"tool_calls",
                                 {{{"id", "c1"},
                                   {"type", "function"},
                                   {"function", {{"name", "f"}, {"arguments", text}}}}}}}}}};
  std::vector<drift::ChatMessage> messages(1);
  messages[0].role = "assistant";
  if (auto e = drift::server::read_message_tool_calls(body, messages)) check_error(*e);
}

void model_replies(std::string_view text) {
  using drift::ToolCallSyntax;
  for (ToolCallSyntax syntax : {ToolCallSyntax::kHermes, ToolCallSyntax::kLlama3,
                                ToolCallSyntax::kMistral, ToolCallSyntax::kGeneric}) {
    drift::ParsedReply reply = drift::parse_tool_calls(syntax, text);
    for (const auto& call : reply.tool_calls)
      if (call.name.empty()) abort();
    (void)drift::streamable_content_length(syntax, text);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  model_replies(text);  // a model's reply is any bytes
  // A string field of a body is valid UTF-8: the body's check refuses anything else first.
  if (!drift::is_valid_utf8(text)) return 0;
  schema_fields(text);
  tool_call_arguments(text);
  return 0;
}
