#include "server/anthropic_schema.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "server/guided_decoding.h"
#include "server/json_fields.h"
#include "server/request_json.h"

namespace drift::server {
namespace {

using Json = jinja::Json;
using MaybeError = std::optional<ApiError>;

MaybeError get_int(const Json& body, std::string_view name, int64_t lo, int64_t hi,
                   std::optional<int64_t>& out) {
  return read_int_field(body, name, name, lo, hi, out);
}

// A number in [lo, hi] (or (lo, hi] when lo_open).
MaybeError get_number(const Json& body, std::string_view name, double lo, double hi, bool lo_open,
                      std::optional<float>& out) {
  return read_number_field(body, name, name, lo, hi, lo_open, out);
}

// The fields each endpoint takes (Anthropic's API refuses others: "Extra inputs are not
// permitted"), and those it documents that drift cannot honour, refused with a reason.
MaybeError check_field_names(const Json& body, AnthropicEndpoint endpoint) {
  static const std::set<std::string_view> kPromptFields = {
      "model",       "messages", "system",        "tools",
      "tool_choice", "thinking", "output_config", "cache_control"};
  static const std::set<std::string_view> kMessageFields = {
      "max_tokens", "stop_sequences", "temperature", "top_p", "top_k", "metadata", "stream"};
  static const std::set<std::string_view> kUnsupported = {
      "service_tier",  "container",   "mcp_servers",     "context_management", "speed",
      "inference_geo", "diagnostics", "user_profile_id", "workspace_id"};
  for (const auto& [name, value] : body.items()) {
    if (kPromptFields.contains(name)) continue;
    if (endpoint == AnthropicEndpoint::kMessages && kMessageFields.contains(name)) continue;
    if (kUnsupported.contains(name))
      return bad_request(fmt::format("'{}' is not supported by this server", name), name);
    return bad_request(fmt::format("'{}': unknown field (extra inputs are not permitted)", name),
                       name);
  }
  return std::nullopt;
}

// A text-only model: images and documents are refused by name, other block types as unknown.
ApiError unsupported_block(const std::string& param, const std::string& type) {
  if (type == "image" || type == "document")
    return bad_request(
        fmt::format("{}: {}s are not supported: this server's model reads text only", param, type),
        param + ".type");
  return bad_request(
      fmt::format("{}.type '{}' is not a content block this server reads", param, type),
      param + ".type");
}

// A block's "type", checked to be a string.
std::variant<std::string, ApiError> block_type(const Json& block, const std::string& param) {
  if (!block.is_object()) return wrong_type(param, "a content block object", block);
  const Json* type = field(block, "type");
  if (!type || !type->is_string())
    return bad_request(fmt::format("{} needs a string 'type'", param), param + ".type");
  return type->get<std::string>();
}

// A text block's text, appended to `out`.
MaybeError append_text_block(const Json& block, const std::string& param, std::string& out) {
  const Json* text = field(block, "text");
  if (!text || !text->is_string())
    return bad_request(fmt::format("{}: a text block needs a string 'text'", param),
                       param + ".text");
  out += text->get_ref<const std::string&>();
  return std::nullopt;
}

// A string, or an array of text blocks joined in order (the system prompt, a tool result).
MaybeError read_text_content(const Json& content, const std::string& param, std::string& out) {
  if (content.is_string()) {
    out = content.get<std::string>();
    return std::nullopt;
  }
  if (!content.is_array()) return wrong_type(param, "a string or an array of text blocks", content);
  for (size_t j = 0; j < content.size(); ++j) {
    const std::string at = fmt::format("{}[{}]", param, j);
    auto type = block_type(content[j], at);
    if (auto* e = std::get_if<ApiError>(&type)) return *e;
    if (std::get<std::string>(type) != "text")
      return unsupported_block(at, std::get<std::string>(type));
    if (auto e = append_text_block(content[j], at, out)) return e;
  }
  return std::nullopt;
}

// The ids of the calls earlier assistant turns made, with their names: a tool_result answers one.
using CallIds = std::map<std::string, std::string>;

MaybeError read_tool_use(const Json& block, const std::string& param, CallIds& ids,
                         Json& tool_calls) {
  std::optional<std::string> id, name;
  if (auto e = read_string_field(block, "id", param + ".id", id)) return e;
  if (auto e = read_string_field(block, "name", param + ".name", name)) return e;
  if (!id || id->empty() || !name)
    return bad_request(
        fmt::format("{}: a tool_use block needs a non-empty 'id' and a 'name'", param), param);
  const Json* input = field(block, "input");
  if (!input || !input->is_object())
    return bad_request(fmt::format("{}.input must be an object", param), param + ".input");
  if (!ids.emplace(*id, *name).second)
    return bad_request(fmt::format("{}.id '{}' is used by an earlier tool_use block", param, *id),
                       param + ".id");
  if (tool_calls.size() >= kMaxToolCallsPerTurn)
    return bad_request(
        fmt::format("an assistant turn may make at most {} tool calls", kMaxToolCallsPerTurn),
        param);
  // An OpenAI tool call with its arguments as an object: what templates print.
  tool_calls.push_back(Json{{"id", *id},
                            {"type", "function"},
                            {"function", Json{{"name", *name}, {"arguments", *input}}}});
  return std::nullopt;
}

MaybeError read_tool_result(const Json& block, const std::string& param, const CallIds& ids,
                            std::vector<ChatMessage>& out) {
  std::optional<std::string> id;
  if (auto e = read_string_field(block, "tool_use_id", param + ".tool_use_id", id)) return e;
  if (!id)
    return bad_request(fmt::format("{}: a tool_result block needs a 'tool_use_id'", param),
                       param + ".tool_use_id");
  if (!ids.contains(*id))
    return bad_request(fmt::format("{}.tool_use_id '{}' answers no tool_use block of an earlier "
                                   "assistant turn",
                                   param, *id),
                       param + ".tool_use_id");
  if (const Json* is_error = field(block, "is_error"); is_error && !is_error->is_boolean())
    return wrong_type(param + ".is_error", "a boolean", *is_error);
  ChatMessage tool{"tool", ""};
  tool.tool_call_id = *id;
  if (const Json* content = field(block, "content"))
    if (auto e = read_text_content(*content, param + ".content", tool.content)) return e;
  out.push_back(std::move(tool));
  return std::nullopt;
}

// One message's blocks: a user turn's tool results become tool turns (before its text, as
// Anthropic puts them first); an assistant turn's text, tool_use and thinking blocks one turn.
MaybeError read_blocks(const Json& content, const std::string& param, const std::string& role,
                       CallIds& ids, std::vector<ChatMessage>& out) {
  ChatMessage turn{role, ""};
  std::vector<ChatMessage> tool_results;
  bool has_text = false;
  for (size_t j = 0; j < content.size(); ++j) {
    const std::string at = fmt::format("{}[{}]", param, j);
    auto type_or = block_type(content[j], at);
    if (auto* e = std::get_if<ApiError>(&type_or)) return *e;
    const std::string& type = std::get<std::string>(type_or);
    const bool assistant = role == "assistant";
    if (type == "text") {
      if (auto e = append_text_block(content[j], at, turn.content)) return e;
      has_text = true;
    } else if (type == "tool_use" && assistant) {
      if (turn.tool_calls.is_null()) turn.tool_calls = Json::array();
      if (auto e = read_tool_use(content[j], at, ids, turn.tool_calls)) return e;
    } else if (type == "thinking" && assistant) {
      std::optional<std::string> thinking;
      if (auto e = read_string_field(content[j], "thinking", at + ".thinking", thinking)) return e;
      turn.reasoning_content = turn.reasoning_content.value_or("") + thinking.value_or("");
    } else if (type == "tool_result" && !assistant) {
      if (auto e = read_tool_result(content[j], at, ids, tool_results)) return e;
    } else if (type == "tool_use" || type == "thinking" || type == "tool_result") {
      return bad_request(fmt::format("{}: a {} block belongs in {} turn", at, type,
                                     assistant ? "a user" : "an assistant"),
                         at + ".type");
    } else {
      return unsupported_block(at, type);
    }
  }
  for (ChatMessage& m : tool_results) out.push_back(std::move(m));
  if (role == "assistant" || has_text || tool_results.empty()) out.push_back(std::move(turn));
  return std::nullopt;
}

MaybeError read_messages(const Json& body, std::vector<ChatMessage>& out) {
  if (const Json* system = field(body, "system")) {
    ChatMessage m{"system", ""};
    if (auto e = read_text_content(*system, "system", m.content)) return e;
    out.push_back(std::move(m));
  }
  const Json* list = field(body, "messages");
  if (!list) return bad_request("'messages' is required", "messages");
  if (!list->is_array()) return wrong_type("messages", "an array", *list);
  if (list->empty()) return bad_request("'messages' must not be empty", "messages");
  if (list->size() > kMaxMessages)
    return bad_request(
        fmt::format("'messages' may hold at most {} messages, got {}", kMaxMessages, list->size()),
        "messages");
  CallIds ids;
  for (size_t i = 0; i < list->size(); ++i) {
    const Json& m = (*list)[i];
    const std::string param = fmt::format("messages[{}]", i);
    if (!m.is_object()) return wrong_type(param, "an object", m);
    for (const auto& [name, value] : m.items())
      if (name != "role" && name != "content")
        return bad_request(fmt::format("{}.{}: unknown field", param, name), param + "." + name);
    const Json* role = field(m, "role");
    if (!role || !role->is_string() || (*role != "user" && *role != "assistant"))
      return bad_request(fmt::format("{}.role must be \"user\" or \"assistant\"", param),
                         param + ".role");
    const Json* content = field(m, "content");
    const std::string at = param + ".content";
    if (!content) return bad_request(fmt::format("{} needs 'content'", param), at);
    if (content->is_string()) {
      out.push_back(ChatMessage{role->get<std::string>(), content->get<std::string>()});
      continue;
    }
    if (!content->is_array()) return wrong_type(at, "a string or an array of blocks", *content);
    if (auto e = read_blocks(*content, at, role->get<std::string>(), ids, out)) return e;
  }
  return std::nullopt;
}

// {"name", "description"?, "input_schema", "type"?: "custom", "cache_control"?} -> OpenAI's
// {"type": "function", "function": {"name", "description", "parameters"}}.
std::variant<Json, ApiError> read_tool(const Json& tool, size_t index,
                                       std::set<std::string>& names) {
  const std::string param = fmt::format("tools[{}]", index);
  if (!tool.is_object()) return wrong_type(param, "an object", tool);
  if (const Json* type = field(tool, "type"); type && *type != "custom")
    return bad_request(fmt::format("{}.type {}: server tools are not supported; give a client "
                                   "tool ({{\"name\", \"description\", \"input_schema\"}})",
                                   param, type->dump()),
                       param + ".type");
  std::variant<Json, ApiError> started = read_tool_name_and_description(tool, param, names);
  if (auto* e = std::get_if<ApiError>(&started)) return *e;
  Json function = std::move(std::get<Json>(started));
  const Json* schema = field(tool, "input_schema");
  if (!schema || !schema->is_object())
    return bad_request(fmt::format("{}.input_schema must be a JSON schema object", param),
                       param + ".input_schema");
  function["parameters"] = *schema;
  return Json{{"type", "function"}, {"function", std::move(function)}};
}

MaybeError read_tool_choice(const Json& body, const std::set<std::string>& names,
                            ToolRequest& out) {
  out.choice = out.tools ? ToolChoice::kAuto : ToolChoice::kNone;
  const Json* choice = field(body, "tool_choice");
  if (!choice) return std::nullopt;
  std::optional<std::string> type;
  if (!choice->is_object()) return wrong_type("tool_choice", "an object", *choice);
  if (auto e = read_string_field(*choice, "type", "tool_choice.type", type)) return e;
  if (type == "auto") {
    out.choice = out.tools ? ToolChoice::kAuto : ToolChoice::kNone;
  } else if (type == "any") {
    out.choice = ToolChoice::kRequired;
  } else if (type == "none") {
    out.choice = ToolChoice::kNone;
  } else if (type == "tool") {
    std::optional<std::string> name;
    if (auto e = read_string_field(*choice, "name", "tool_choice.name", name)) return e;
    if (!name || !names.contains(*name))
      return bad_request(
          fmt::format("tool_choice {{\"type\": \"tool\"}} must name one of 'tools' (got {})",
                      name ? "'" + *name + "'" : "no name"),
          "tool_choice.name");
    out.choice = ToolChoice::kNamed;
    out.named_function = *name;
  } else {
    return bad_request("'tool_choice.type' must be \"auto\", \"any\", \"tool\" or \"none\"",
                       "tool_choice.type");
  }
  if (const Json* no_parallel = field(*choice, "disable_parallel_tool_use")) {
    if (!no_parallel->is_boolean())
      return wrong_type("tool_choice.disable_parallel_tool_use", "a boolean", *no_parallel);
    out.parallel_tool_calls = !no_parallel->get<bool>();
  }
  return check_demanded_call_has_tools(out);
}

MaybeError read_tools(const Json& body, ToolRequest& out) {
  std::set<std::string> names;
  if (auto e = read_tools_array(body, read_tool, names, out)) return e;
  return read_tool_choice(body, names, out);
}

// {"type": "enabled", "budget_tokens": >= 1024} or {"type": "disabled"}.
MaybeError read_thinking(const Json& body, bool& show) {
  const Json* thinking = field(body, "thinking");
  if (!thinking) return std::nullopt;
  if (!thinking->is_object()) return wrong_type("thinking", "an object", *thinking);
  std::optional<std::string> type;
  if (auto e = read_string_field(*thinking, "type", "thinking.type", type)) return e;
  if (type == "disabled") {
    show = false;
    return std::nullopt;
  }
  if (type != "enabled")
    return bad_request("'thinking.type' must be \"enabled\" or \"disabled\"", "thinking.type");
  std::optional<int64_t> budget;
  if (auto e =
          get_int(*thinking, "budget_tokens", 1024, std::numeric_limits<int32_t>::max(), budget))
    return bad_request(fmt::format("'thinking.budget_tokens': {}", e->message),
                       "thinking.budget_tokens");
  if (!budget)
    return bad_request("'thinking' of type \"enabled\" needs 'budget_tokens'",
                       "thinking.budget_tokens");
  return std::nullopt;
}

// output_config: {"format": {"type": "json_schema", "schema": {...}}} constrains the reply as
// the chat endpoint's response_format does; "effort" (low, medium, high) is the template's
// reasoning_effort, which reasoning models' templates read (gpt-oss's).
MaybeError read_output_config(const Json& body, AnthropicRequest& r) {
  const Json* config = field(body, "output_config");
  if (!config) return std::nullopt;
  if (!config->is_object()) return wrong_type("output_config", "an object", *config);
  std::optional<std::string> effort;
  if (auto e = read_string_field(*config, "effort", "output_config.effort", effort)) return e;
  if (effort && *effort != "low" && *effort != "medium" && *effort != "high")
    return bad_request(fmt::format("'output_config.effort' \"{}\" is not offered: this server's "
                                   "models take \"low\", \"medium\" or \"high\"",
                                   *effort),
                       "output_config.effort");
  r.effort = std::move(effort);
  const Json* format = field(*config, "format");
  if (!format) return std::nullopt;
  const Json* type = format->is_object() ? field(*format, "type") : nullptr;
  const Json* schema = format->is_object() ? field(*format, "schema") : nullptr;
  if (!type || *type != "json_schema" || !schema || !schema->is_object())
    return bad_request(
        "'output_config.format' must be {\"type\": \"json_schema\", \"schema\": {...}}",
        "output_config.format");
  r.options.constraint =
      json_schema_constraint(nlohmann::json::parse(schema->dump()), "output_config.format");
  return std::nullopt;
}

// Top-level cache_control ({"type": "ephemeral", "ttl"?}): drift's prefix cache keeps every
// prompt's pages without being asked, so the marker is checked and needs nothing more.
MaybeError read_cache_control(const Json& body) {
  const Json* control = field(body, "cache_control");
  if (!control) return std::nullopt;
  const Json* type = control->is_object() ? field(*control, "type") : nullptr;
  if (!type || *type != "ephemeral")
    return bad_request("'cache_control' must be {\"type\": \"ephemeral\"}", "cache_control");
  return std::nullopt;
}

MaybeError read_stop_sequences(const Json& body, std::vector<std::string>& out) {
  const Json* v = field(body, "stop_sequences");
  if (!v) return std::nullopt;
  if (!v->is_array()) return wrong_type("stop_sequences", "an array of strings", *v);
  std::vector<const Json*> items;
  for (const Json& s : *v) items.push_back(&s);
  return read_stop_strings(items, "stop_sequences", "an array of strings", out);
}

MaybeError read_options(const Json& body, GenerationOptions& o) {
  std::optional<int64_t> i;
  if (auto e = get_int(body, "max_tokens", 1, std::numeric_limits<int32_t>::max(), i)) return e;
  if (!i) return bad_request("'max_tokens' is required", "max_tokens");
  o.max_tokens = int32_t(*i);
  i.reset();
  // Anthropic's ranges: temperature [0, 1], top_p (0, 1], top_k >= 0 (0: no limit).
  if (auto e = get_number(body, "temperature", 0, 1, false, o.sampling.temperature)) return e;
  if (auto e = get_number(body, "top_p", 0, 1, true, o.sampling.top_p)) return e;
  if (auto e = get_int(body, "top_k", 0, std::numeric_limits<int32_t>::max(), i)) return e;
  if (i) o.sampling.top_k = int32_t(*i);
  if (auto e = read_stop_sequences(body, o.stop)) return e;
  o.stop_param = "stop_sequences";
  if (const Json* stream = field(body, "stream")) {
    if (!stream->is_boolean()) return wrong_type("stream", "a boolean", *stream);
    o.stream = stream->get<bool>();
  }
  // Accepted for the client's bookkeeping ({"user_id": ...}); nothing here reads it.
  if (const Json* metadata = field(body, "metadata")) {
    if (!metadata->is_object()) return wrong_type("metadata", "an object", *metadata);
    std::optional<std::string> user;
    if (auto e = read_string_field(*metadata, "user_id", "metadata.user_id", user)) return e;
  }
  return std::nullopt;
}

}  // namespace

std::variant<AnthropicRequest, ApiError> parse_anthropic_request(std::string_view text,
                                                                 AnthropicEndpoint endpoint) {
  auto parsed = parse_request_json<Json>(text);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  const Json& body = std::get<Json>(parsed);
  AnthropicRequest r;
  if (auto e = check_field_names(body, endpoint)) return *e;
  std::optional<std::string> model;
  if (auto e = read_string_field(body, "model", "model", model)) return *e;
  if (!model) return bad_request("'model' is required", "model");
  r.model = std::move(*model);
  if (auto e = read_messages(body, r.messages)) return *e;
  if (auto e = read_tools(body, r.tools)) return *e;
  if (auto e = read_thinking(body, r.show_thinking)) return *e;
  if (auto e = read_output_config(body, r)) return *e;
  if (auto e = read_cache_control(body)) return *e;
  if (endpoint == AnthropicEndpoint::kMessages)
    if (auto e = read_options(body, r.options)) return *e;
  return r;
}

}  // namespace drift::server
