#include "server/responses_schema.h"

#include <fmt/format.h>

#include <limits>
#include <set>

#include "server/guided_decoding.h"
#include "server/json_fields.h"
#include "server/request_json.h"
#include "util/json_limits.h"

namespace drift::server {
namespace {

using Json = jinja::Json;
using MaybeError = std::optional<ApiError>;

MaybeError get_bool(const Json& object, std::string_view name, bool& out) {
  return read_bool_field(object, name, name, out);
}

// The fields of a Responses request drift reads; those it documents that drift cannot honour are
// refused with a reason, any other as unknown (OpenAI's API: "Unrecognized request argument").
MaybeError check_field_names(const Json& body) {
  static const std::set<std::string_view> kFields = {"model",
                                                     "input",
                                                     "instructions",
                                                     "tools",
                                                     "tool_choice",
                                                     "text",
                                                     "max_output_tokens",
                                                     "temperature",
                                                     "top_p",
                                                     "stream",
                                                     "store",
                                                     "previous_response_id",
                                                     "metadata",
                                                     "reasoning",
                                                     "parallel_tool_calls",
                                                     "user",
                                                     "safety_identifier",
                                                     "prompt_cache_key",
                                                     "truncation",
                                                     "service_tier",
                                                     "stream_options"};
  static const std::set<std::string_view> kUnsupported = {
      "background", "conversation", "include",           "max_tool_calls",
      "prompt",     "top_logprobs", "context_management"};
  for (const auto& [name, value] : body.items()) {
    if (kFields.contains(name)) continue;
    if (kUnsupported.contains(name) && !value.is_null())
      return bad_request(fmt::format("'{}' is not supported by this server", name), name);
    if (kUnsupported.contains(name)) continue;
    return bad_request(fmt::format("'{}': unrecognized request argument", name), name);
  }
  return std::nullopt;
}

// "a, b" -> whether `object` has only fields of `allowed`; the 400 names the first other one.
MaybeError check_item_fields(const Json& object, const std::string& param,
                             const std::set<std::string_view>& allowed) {
  // A null field is an absent one (the SDKs' model_dump writes every optional field).
  for (const auto& [name, value] : object.items())
    if (!value.is_null() && !allowed.contains(name))
      return bad_request(fmt::format("{}.{}: unknown field", param, name), param + "." + name);
  return std::nullopt;
}

// A text-only model: image and file parts are refused by name, other part types as unknown.
ApiError unsupported_part(const std::string& param, const std::string& type) {
  if (type == "input_image" || type == "input_file" || type == "input_audio")
    return bad_request(
        fmt::format("{}: '{}' parts are not supported: this server's model takes text only", param,
                    type),
        param + ".type");
  return bad_request(
      fmt::format("{}.type '{}' is not a content part this server reads", param, type),
      param + ".type");
}

// A message's content: a string, or text parts (input_text, output_text, and a refusal an earlier
// reply made) joined in order.
MaybeError read_content(const Json& content, const std::string& param, std::string& out) {
  if (content.is_string()) {
    out += content.get<std::string>();
    return std::nullopt;
  }
  if (!content.is_array())
    return wrong_type(param, "a string or an array of content parts", content);
  for (size_t j = 0; j < content.size(); ++j) {
    const std::string at = fmt::format("{}[{}]", param, j);
    const Json& part = content[j];
    if (!part.is_object()) return wrong_type(at, "a content part object", part);
    const Json* type = field(part, "type");
    if (!type || !type->is_string())
      return bad_request(fmt::format("{} needs a string 'type'", at), at + ".type");
    const std::string kind = type->get<std::string>();
    const char* text_field = kind == "refusal" ? "refusal" : "text";
    if (kind != "input_text" && kind != "output_text" && kind != "refusal")
      return unsupported_part(at, kind);
    if (auto e =
            check_item_fields(part, at, {"type", "text", "refusal", "annotations", "logprobs"}))
      return e;
    const Json* text = field(part, text_field);
    if (!text || !text->is_string())
      return bad_request(fmt::format("{}: a {} part needs a string '{}'", at, kind, text_field),
                         at + "." + text_field);
    out += text->get_ref<const std::string&>();
  }
  return std::nullopt;
}

// The assistant turn the next assistant-side item joins: the last turn, if it is an assistant's.
ChatMessage& assistant_turn(std::vector<ChatMessage>& out) {
  if (out.empty() || out.back().role != "assistant") out.emplace_back("assistant", "");
  return out.back();
}

MaybeError read_message_item(const Json& item, const std::string& param,
                             std::vector<ChatMessage>& out) {
  if (auto e = check_item_fields(item, param, {"type", "role", "content", "id", "status", "phase"}))
    return e;
  const Json* role = field(item, "role");
  static const std::set<std::string> kRoles = {"user", "assistant", "system", "developer"};
  if (!role || !role->is_string() || !kRoles.contains(role->get<std::string>()))
    return bad_request(fmt::format("{}.role must be \"user\", \"assistant\", \"system\" or "
                                   "\"developer\"",
                                   param),
                       param + ".role");
  const Json* content = field(item, "content");
  if (!content) return bad_request(fmt::format("{} needs 'content'", param), param + ".content");
  std::string text;
  if (auto e = read_content(*content, param + ".content", text)) return e;
  std::string who = role->get<std::string>();
  // Chat templates know "system"; OpenAI's "developer" is that turn under its newer name.
  if (who == "developer") who = "system";
  // A reply after its own reasoning item is one assistant turn (as the model wrote it).
  if (who == "assistant" && !out.empty() && out.back().role == "assistant" &&
      out.back().content.empty() && out.back().tool_calls.is_null()) {
    out.back().content = std::move(text);
    return std::nullopt;
  }
  out.emplace_back(std::move(who), std::move(text));
  return std::nullopt;
}

MaybeError read_function_call(const Json& item, const std::string& param,
                              std::vector<ChatMessage>& out) {
  if (auto e = check_item_fields(
          item, param, {"type", "call_id", "name", "arguments", "id", "status", "namespace"}))
    return e;
  std::optional<std::string> call_id, name, arguments;
  if (auto e = read_string_field(item, "call_id", param + ".call_id", call_id)) return e;
  if (auto e = read_string_field(item, "name", param + ".name", name)) return e;
  if (auto e = read_string_field(item, "arguments", param + ".arguments", arguments)) return e;
  if (!call_id || call_id->empty())
    return bad_request(fmt::format("{}: a function_call item needs a non-empty 'call_id'", param),
                       param + ".call_id");
  if (!name || !valid_function_name(*name))
    return bad_request(fmt::format("{}.name must be 1 to {} letters, digits, '_' or '-'", param,
                                   kMaxToolNameBytes),
                       param + ".name");
  if (!arguments)
    return bad_request(fmt::format("{}: a function_call item needs 'arguments'", param),
                       param + ".arguments");
  // Templates print the arguments as an object (`arguments | tojson`).
  Expected<Json> parsed = parse_bounded_json<Json>(*arguments);
  if (!parsed.ok() || !parsed->is_object())
    return bad_request(fmt::format("{}.arguments must be a JSON object's text", param),
                       param + ".arguments");
  for (const ChatMessage& m : out)
    if (m.tool_calls.is_array())
      for (const Json& call : m.tool_calls)
        if (call["id"] == *call_id)
          return bad_request(
              fmt::format("{}.call_id '{}' is used by an earlier function_call", param, *call_id),
              param + ".call_id");
  ChatMessage& turn = assistant_turn(out);
  if (turn.tool_calls.is_null()) turn.tool_calls = Json::array();
  if (turn.tool_calls.size() >= kMaxToolCallsPerTurn)
    return bad_request(
        fmt::format("an assistant turn may make at most {} tool calls", kMaxToolCallsPerTurn),
        param);
  turn.tool_calls.push_back(Json{{"id", *call_id},
                                 {"type", "function"},
                                 {"function", Json{{"name", *name}, {"arguments", *parsed}}}});
  return std::nullopt;
}

MaybeError read_function_call_output(const Json& item, const std::string& param,
                                     std::vector<ChatMessage>& out) {
  if (auto e = check_item_fields(item, param, {"type", "call_id", "output", "id", "status"}))
    return e;
  std::optional<std::string> call_id;
  if (auto e = read_string_field(item, "call_id", param + ".call_id", call_id)) return e;
  if (!call_id || call_id->empty())
    return bad_request(
        fmt::format("{}: a function_call_output item needs a non-empty 'call_id'", param),
        param + ".call_id");
  const Json* output = field(item, "output");
  if (!output)
    return bad_request(fmt::format("{}: a function_call_output item needs 'output'", param),
                       param + ".output");
  ChatMessage tool{"tool", ""};
  tool.tool_call_id = *call_id;
  if (auto e = read_content(*output, param + ".output", tool.content)) return e;
  out.push_back(std::move(tool));
  return std::nullopt;
}

// A reasoning item (an earlier reply's, or the client's own): its text is the assistant turn's
// reasoning_content, which some templates show again (gpt-oss's, before a tool call).
MaybeError read_reasoning_item(const Json& item, const std::string& param,
                               std::vector<ChatMessage>& out) {
  if (auto e = check_item_fields(
          item, param, {"type", "id", "summary", "content", "encrypted_content", "status"}))
    return e;
  std::string text;
  for (const char* name : {"content", "summary"}) {
    const Json* parts = field(item, name);
    if (!parts) continue;
    if (!parts->is_array()) return wrong_type(param + "." + name, "an array", *parts);
    for (size_t j = 0; j < parts->size(); ++j) {
      const Json& part = (*parts)[j];
      const Json* t = part.is_object() ? field(part, "text") : nullptr;
      if (!t || !t->is_string())
        return bad_request(fmt::format("{}.{}[{}] needs a string 'text'", param, name, j),
                           fmt::format("{}.{}[{}].text", param, name, j));
      if (std::string_view(name) == "content") text += t->get_ref<const std::string&>();
    }
  }
  out.emplace_back("assistant", "");
  out.back().reasoning_content = std::move(text);
  return std::nullopt;
}

// {"type": "function", "name", "description"?, "parameters"?, "strict"?} -> OpenAI's chat tool
// {"type": "function", "function": {"name", "description", "parameters"}}.
std::variant<Json, ApiError> read_tool(const Json& tool, size_t index,
                                       std::set<std::string>& names) {
  const std::string param = fmt::format("tools[{}]", index);
  if (!tool.is_object()) return wrong_type(param, "an object", tool);
  const Json* type = field(tool, "type");
  if (!type || *type != "function")
    return bad_request(fmt::format("{}.type {}: only function tools are supported by this server "
                                   "(built-in tools such as web_search or file_search are not)",
                                   param, type ? type->dump() : "missing"),
                       param + ".type");
  if (auto e =
          check_item_fields(tool, param, {"type", "name", "description", "parameters", "strict"}))
    return *e;
  std::variant<Json, ApiError> started = read_tool_name_and_description(tool, param, names);
  if (auto* e = std::get_if<ApiError>(&started)) return *e;
  Json function = std::move(std::get<Json>(started));
  if (const Json* strict = field(tool, "strict"); strict && !strict->is_boolean())
    return wrong_type(param + ".strict", "a boolean", *strict);
  const Json* schema = field(tool, "parameters");
  if (schema && !schema->is_object())
    return wrong_type(param + ".parameters", "a JSON schema object", *schema);
  function["parameters"] =
      schema ? *schema : Json{{"type", "object"}, {"properties", Json::object()}};
  return Json{{"type", "function"}, {"function", std::move(function)}};
}

MaybeError read_tool_choice(const Json& body, const std::set<std::string>& names,
                            ToolRequest& out) {
  out.choice = out.tools ? ToolChoice::kAuto : ToolChoice::kNone;
  const Json* choice = field(body, "tool_choice");
  if (!choice) return std::nullopt;
  if (choice->is_string()) {
    const std::string mode = choice->get<std::string>();
    if (mode == "none")
      out.choice = ToolChoice::kNone;
    else if (mode == "required")
      out.choice = ToolChoice::kRequired;
    else if (mode != "auto")
      return bad_request(
          "'tool_choice' must be \"auto\", \"none\", \"required\" or "
          "{\"type\": \"function\", \"name\": ...}",
          "tool_choice");
  } else if (choice->is_object()) {
    const Json* type = field(*choice, "type");
    if (!type || *type != "function")
      return bad_request(
          "'tool_choice.type' must be \"function\" (this server offers function "
          "tools only)",
          "tool_choice.type");
    const Json* name = field(*choice, "name");
    if (!name || !name->is_string() || !names.contains(name->get<std::string>()))
      return bad_request("tool_choice {\"type\": \"function\"} must name one of 'tools'",
                         "tool_choice.name");
    out.choice = ToolChoice::kNamed;
    out.named_function = name->get<std::string>();
  } else {
    return wrong_type("tool_choice", "a string or an object", *choice);
  }
  return check_demanded_call_has_tools(out);
}

MaybeError read_tools(const Json& body, ToolRequest& out) {
  std::set<std::string> names;
  if (auto e = read_tools_array(body, read_tool, names, out)) return e;
  if (auto e = get_bool(body, "parallel_tool_calls", out.parallel_tool_calls)) return e;
  return read_tool_choice(body, names, out);
}

// text: {"format": {"type": "text"} | {"type": "json_object"} | {"type": "json_schema", "name",
// "schema", "strict"?, "description"?}, "verbosity"?}.
MaybeError read_text_format(const Json& body, GenerationOptions& o) {
  const Json* text = field(body, "text");
  if (!text) return std::nullopt;
  if (!text->is_object()) return wrong_type("text", "an object", *text);
  if (auto e = check_item_fields(*text, "text", {"format", "verbosity"})) return e;
  const Json* format = field(*text, "format");
  if (!format) return std::nullopt;
  if (!format->is_object()) return wrong_type("text.format", "an object", *format);
  const Json* type = field(*format, "type");
  const std::string kind = type && type->is_string() ? type->get<std::string>() : "";
  if (kind == "text") return std::nullopt;
  if (kind == "json_object") {
    o.constraint =
        OutputConstraint{GrammarSpec{GrammarKind::kJsonObject, ""}, "text.format", nullptr};
    return std::nullopt;
  }
  if (kind != "json_schema")
    return bad_request("'text.format.type' must be \"text\", \"json_object\" or \"json_schema\"",
                       "text.format.type");
  if (auto e = check_item_fields(*format, "text.format",
                                 {"type", "name", "schema", "strict", "description"}))
    return e;
  std::optional<std::string> name;
  if (auto e = read_string_field(*format, "name", "text.format.name", name)) return e;
  if (!name) return bad_request("'text.format.name' is required", "text.format.name");
  if (const Json* strict = field(*format, "strict"); strict && !strict->is_boolean())
    return wrong_type("text.format.strict", "a boolean", *strict);
  const Json* schema = field(*format, "schema");
  if (!schema || !schema->is_object())
    return bad_request("'text.format.schema' must be a JSON schema object", "text.format.schema");
  o.constraint =
      json_schema_constraint(nlohmann::json::parse(schema->dump()), "text.format.schema");
  if (o.constraint->grammar.source.size() > kMaxGrammarSourceBytes)
    return bad_request(fmt::format("'text.format.schema' has {} bytes as JSON; at most {} are "
                                   "accepted",
                                   o.constraint->grammar.source.size(), kMaxGrammarSourceBytes),
                       "text.format.schema");
  return std::nullopt;
}

// reasoning: {"effort"?: "low" | "medium" | "high", "summary"?: ...}; effort is the template's
// reasoning_effort, which reasoning models' templates read (gpt-oss's).
MaybeError read_reasoning(const Json& body, std::optional<std::string>& effort) {
  const Json* reasoning = field(body, "reasoning");
  if (!reasoning) return std::nullopt;
  if (!reasoning->is_object()) return wrong_type("reasoning", "an object", *reasoning);
  if (auto e =
          check_item_fields(*reasoning, "reasoning", {"effort", "summary", "generate_summary"}))
    return e;
  if (auto e = read_string_field(*reasoning, "effort", "reasoning.effort", effort)) return e;
  if (effort && *effort != "low" && *effort != "medium" && *effort != "high")
    return bad_request(fmt::format("'reasoning.effort' \"{}\" is not offered: this server's "
                                   "models take \"low\", \"medium\" or \"high\"",
                                   *effort),
                       "reasoning.effort");
  std::optional<std::string> summary;
  if (auto e = read_string_field(*reasoning, "summary", "reasoning.summary", summary)) return e;
  return std::nullopt;
}

// metadata: at most 16 string values under keys of at most 64 bytes, values of at most 512.
MaybeError read_metadata(const Json& body) {
  const Json* metadata = field(body, "metadata");
  if (!metadata) return std::nullopt;
  if (!metadata->is_object()) return wrong_type("metadata", "an object", *metadata);
  if (metadata->size() > kMaxMetadataKeys)
    return bad_request(fmt::format("'metadata' may hold at most {} keys", kMaxMetadataKeys),
                       "metadata");
  for (const auto& [key, value] : metadata->items()) {
    if (key.size() > kMaxMetadataKeyBytes)
      return bad_request(
          fmt::format("'metadata' keys may have at most {} bytes", kMaxMetadataKeyBytes),
          "metadata");
    if (!value.is_string() || value.get_ref<const std::string&>().size() > kMaxMetadataValueBytes)
      return bad_request(fmt::format("'metadata.{}' must be a string of at most {} bytes", key,
                                     kMaxMetadataValueBytes),
                         "metadata");
  }
  return std::nullopt;
}

MaybeError read_options(const Json& body, GenerationOptions& o, bool& store) {
  std::optional<int64_t> i;
  if (auto e = read_int_field(body, "max_output_tokens", "max_output_tokens", 1,
                              std::numeric_limits<int32_t>::max(), i))
    return e;
  if (i) o.max_tokens = int32_t(*i);
  if (auto e = read_number_field(body, "temperature", "temperature", 0, 2, false,
                                 o.sampling.temperature))
    return e;
  if (auto e = read_number_field(body, "top_p", "top_p", 0, 1, true, o.sampling.top_p)) return e;
  if (auto e = get_bool(body, "stream", o.stream)) return e;
  if (auto e = get_bool(body, "store", store)) return e;
  for (const char* name : {"user", "safety_identifier", "prompt_cache_key", "service_tier"}) {
    std::optional<std::string> ignored;  // the client's bookkeeping; nothing here reads it
    if (auto e = read_string_field(body, name, name, ignored)) return e;
  }
  if (const Json* t = field(body, "truncation"); t && *t != "disabled")
    return bad_request(
        "'truncation' must be \"disabled\": this server does not drop input to fit "
        "the context",
        "truncation");
  if (const Json* so = field(body, "stream_options"); so && !so->is_object())
    return wrong_type("stream_options", "an object", *so);
  return read_text_format(body, o);
}

MaybeError read_input(const Json& body, ResponsesRequest& r) {
  const Json* input = field(body, "input");
  if (!input) return bad_request("'input' is required", "input");
  if (input->is_string()) {
    r.input_items = Json::array({Json{{"type", "message"}, {"role", "user"}, {"content", *input}}});
  } else if (input->is_array()) {
    if (input->empty()) return bad_request("'input' must not be empty", "input");
    r.input_items = *input;
  } else {
    return wrong_type("input", "a string or an array of items", *input);
  }
  return read_input_items(r.input_items, "input", r.messages);
}

// What the response object repeats of the request, OpenAI's defaults for the rest.
Json echo_fields(const Json& body, const ResponsesRequest& r) {
  auto given = [&](std::string_view name, Json fallback) {
    const Json* v = field(body, name);
    return v ? *v : fallback;
  };
  return Json{{"instructions", given("instructions", nullptr)},
              {"metadata", given("metadata", Json::object())},
              {"tools", given("tools", Json::array())},
              {"tool_choice", given("tool_choice", "auto")},
              // Not given: the server's sampling defaults (GET /v1/models), not OpenAI's 1.0.
              {"temperature", given("temperature", nullptr)},
              {"top_p", given("top_p", nullptr)},
              {"max_output_tokens", given("max_output_tokens", nullptr)},
              {"parallel_tool_calls", r.tools.parallel_tool_calls},
              {"previous_response_id", given("previous_response_id", nullptr)},
              {"store", r.store},
              {"text", given("text", Json{{"format", Json{{"type", "text"}}}})},
              {"reasoning", given("reasoning", Json{{"effort", nullptr}, {"summary", nullptr}})},
              {"truncation", "disabled"},
              {"user", given("user", nullptr)}};
}

}  // namespace

std::optional<ApiError> read_input_items(const Json& items, std::string_view param,
                                         std::vector<ChatMessage>& out) {
  if (items.size() > kMaxInputItems)
    return bad_request(
        fmt::format("'{}' may hold at most {} items, got {}", param, kMaxInputItems, items.size()),
        param);
  for (size_t i = 0; i < items.size(); ++i) {
    const Json& item = items[i];
    const std::string at = fmt::format("{}[{}]", param, i);
    if (!item.is_object()) return wrong_type(at, "an item object", item);
    const Json* type = field(item, "type");
    if (type && !type->is_string()) return wrong_type(at + ".type", "a string", *type);
    // An item without a type is a message (the SDK's EasyInputMessage).
    const std::string kind = type ? type->get<std::string>() : "message";
    MaybeError e;
    if (kind == "message")
      e = read_message_item(item, at, out);
    else if (kind == "function_call")
      e = read_function_call(item, at, out);
    else if (kind == "function_call_output")
      e = read_function_call_output(item, at, out);
    else if (kind == "reasoning")
      e = read_reasoning_item(item, at, out);
    else
      e = bad_request(fmt::format("{}.type '{}' is not an input item this server reads (it reads "
                                  "message, function_call, function_call_output and reasoning)",
                                  at, kind),
                      at + ".type");
    if (e) return e;
  }
  return std::nullopt;
}

std::optional<ApiError> check_tool_outputs(const std::vector<ChatMessage>& messages) {
  std::set<std::string> calls;
  for (const ChatMessage& m : messages) {
    if (m.tool_calls.is_array())
      for (const Json& call : m.tool_calls) calls.insert(call["id"].get<std::string>());
    if (m.role == "tool" && !calls.contains(*m.tool_call_id))
      return bad_request(fmt::format("a function_call_output's call_id '{}' answers no "
                                     "function_call of the conversation",
                                     *m.tool_call_id),
                         "input");
  }
  return std::nullopt;
}

std::variant<ResponsesRequest, ApiError> parse_responses_request(std::string_view text) {
  auto parsed = parse_request_json<Json>(text);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  const Json& body = std::get<Json>(parsed);
  ResponsesRequest r;
  if (auto e = check_field_names(body)) return *e;
  if (auto e = read_string_field(body, "model", "model", r.model)) return *e;
  if (auto e = read_string_field(body, "instructions", "instructions", r.instructions)) return *e;
  if (auto e = read_string_field(body, "previous_response_id", "previous_response_id",
                                 r.previous_response_id))
    return *e;
  if (auto e = read_input(body, r)) return *e;
  if (auto e = read_tools(body, r.tools)) return *e;
  if (auto e = read_reasoning(body, r.reasoning_effort)) return *e;
  if (auto e = read_metadata(body)) return *e;
  if (auto e = read_options(body, r.options, r.store)) return *e;
  r.echo = echo_fields(body, r);
  return r;
}

}  // namespace drift::server
