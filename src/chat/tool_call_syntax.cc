#include "chat/tool_call_syntax.h"

#include <algorithm>
#include <optional>

#include "util/json_limits.h"

namespace drift {
namespace {

constexpr std::string_view kHermesOpen = "<tool_call>";
constexpr std::string_view kHermesClose = "</tool_call>";
constexpr std::string_view kSpace = " \t\n\r";

std::string_view trim(std::string_view s) {
  const size_t begin = s.find_first_not_of(kSpace);
  if (begin == std::string_view::npos) return {};
  return s.substr(begin, s.find_last_not_of(kSpace) + 1 - begin);
}

// A model's reply is text like any other: a call nested past util/json_limits.h's bounds is not
// a call (read as content), never a value deep enough to overflow a stack when copied.
std::optional<jinja::Json> parse_json(std::string_view text) {
  Expected<jinja::Json> value = parse_bounded_json<jinja::Json>(text);
  if (!value.ok()) return std::nullopt;
  return std::move(value).value();
}

// {"name": string, <arguments_key>: object or a string holding one} -> a call.
std::optional<ParsedToolCall> call_from(const jinja::Json& value,
                                        std::initializer_list<std::string_view> arguments_keys) {
  if (!value.is_object()) return std::nullopt;
  auto name = value.find("name");
  if (name == value.end() || !name->is_string() || name->get_ref<const std::string&>().empty())
    return std::nullopt;
  for (std::string_view key : arguments_keys) {
    auto arguments = value.find(key);
    if (arguments == value.end()) continue;
    if (arguments->is_object()) return ParsedToolCall{name->get<std::string>(), arguments->dump()};
    if (arguments->is_string()) {
      auto inner = parse_json(arguments->get_ref<const std::string&>());
      if (inner && inner->is_object())
        return ParsedToolCall{name->get<std::string>(), inner->dump()};
    }
    return std::nullopt;
  }
  // A function without parameters may be called without an arguments field.
  return ParsedToolCall{name->get<std::string>(), "{}"};
}

ParsedReply content_only(std::string_view reply) { return ParsedReply{std::string(reply), {}}; }

ParsedReply parse_hermes(std::string_view reply) {
  ParsedReply out;
  std::string content;
  size_t pos = 0;
  while (true) {
    const size_t open = reply.find(kHermesOpen, pos);
    content += reply.substr(pos, open == std::string_view::npos ? open : open - pos);
    if (open == std::string_view::npos) break;
    const size_t body = open + kHermesOpen.size();
    const size_t close = reply.find(kHermesClose, body);
    // A reply that ends (EOS, max tokens) before the closing tag: the call is what follows.
    const std::string_view inner =
        close == std::string_view::npos ? reply.substr(body) : reply.substr(body, close - body);
    auto json = parse_json(trim(inner));
    std::optional<ParsedToolCall> call;
    if (json) call = call_from(*json, {"arguments", "parameters"});
    // A reply cut short (max_tokens) in its last block keeps the calls it completed.
    if (!call && close == std::string_view::npos && !out.tool_calls.empty()) break;
    if (!call) return content_only(reply);
    out.tool_calls.push_back(std::move(*call));
    if (close == std::string_view::npos) break;
    pos = close + kHermesClose.size();
  }
  if (out.tool_calls.empty()) return content_only(reply);
  out.content = std::string(trim(content));
  return out;
}

ParsedReply parse_llama3(std::string_view reply) {
  std::string_view text = trim(reply);
  constexpr std::string_view kPythonTag = "<|python_tag|>";
  if (text.starts_with(kPythonTag)) text = trim(text.substr(kPythonTag.size()));
  if (!text.starts_with('{')) return content_only(reply);
  auto json = parse_json(text);
  if (!json) return content_only(reply);
  auto call = call_from(*json, {"parameters", "arguments"});
  if (!call) return content_only(reply);
  return ParsedReply{std::string(), {std::move(*call)}};
}

ParsedReply parse_mistral(std::string_view reply) {
  std::string_view text = trim(reply);
  constexpr std::string_view kMarker = "[TOOL_CALLS]";
  if (text.starts_with(kMarker)) text = trim(text.substr(kMarker.size()));
  if (!text.starts_with('[')) return content_only(reply);
  auto json = parse_json(text);
  if (!json || !json->is_array() || json->empty()) return content_only(reply);
  ParsedReply out;
  for (const jinja::Json& item : *json) {
    auto call = call_from(item, {"arguments", "parameters"});
    if (!call) return content_only(reply);
    out.tool_calls.push_back(std::move(*call));
  }
  return out;
}

ParsedReply parse_generic(std::string_view reply) {
  const std::string_view text = trim(reply);
  if (!text.starts_with('{')) return content_only(reply);
  auto json = parse_json(text);
  if (!json || !json->is_object()) return content_only(reply);
  if (auto it = json->find("response"); it != json->end() && json->size() == 1) {
    if (it->is_string()) return ParsedReply{it->get<std::string>(), {}};
    return content_only(reply);
  }
  ParsedReply out;
  if (auto it = json->find("tool_call"); it != json->end()) {
    auto call = call_from(*it, {"arguments", "parameters"});
    if (!call) return content_only(reply);
    out.tool_calls.push_back(std::move(*call));
  } else if (auto list = json->find("tool_calls"); list != json->end() && list->is_array()) {
    for (const jinja::Json& item : *list) {
      auto call = call_from(item, {"arguments", "parameters"});
      if (!call) return content_only(reply);
      out.tool_calls.push_back(std::move(*call));
    }
  }
  if (out.tool_calls.empty()) return content_only(reply);
  return out;
}

// Length of the longest tail of `text` that is a proper prefix of `marker`.
size_t partial_marker_tail(std::string_view text, std::string_view marker) {
  for (size_t n = std::min(text.size(), marker.size() - 1); n > 0; --n)
    if (text.substr(text.size() - n) == marker.substr(0, n)) return n;
  return 0;
}

}  // namespace

std::string_view tool_call_syntax_name(ToolCallSyntax syntax) {
  switch (syntax) {
    case ToolCallSyntax::kHermes:
      return "hermes";
    case ToolCallSyntax::kLlama3:
      return "llama3";
    case ToolCallSyntax::kMistral:
      return "mistral";
    case ToolCallSyntax::kGeneric:
      return "generic";
    case ToolCallSyntax::kHarmony:
      return "harmony";
  }
  return "generic";
}

ToolCallSyntax detect_tool_call_syntax(std::string_view source) {
  // Templates that render tools name the syntax they render earlier calls in.
  if (source.find("<|channel|>") != std::string_view::npos &&
      source.find("<|start|>") != std::string_view::npos)
    return ToolCallSyntax::kHarmony;
  if (source.find(kHermesOpen) != std::string_view::npos) return ToolCallSyntax::kHermes;
  if (source.find("[TOOL_CALLS]") != std::string_view::npos) return ToolCallSyntax::kMistral;
  if (source.find("<|python_tag|>") != std::string_view::npos ||
      (source.find("\"parameters\": ") != std::string_view::npos &&
       source.find("<|start_header_id|>") != std::string_view::npos))
    return ToolCallSyntax::kLlama3;
  return ToolCallSyntax::kGeneric;
}

ParsedReply parse_tool_calls(ToolCallSyntax syntax, std::string_view reply) {
  switch (syntax) {
    case ToolCallSyntax::kHermes:
      return parse_hermes(reply);
    case ToolCallSyntax::kLlama3:
      return parse_llama3(reply);
    case ToolCallSyntax::kMistral:
      return parse_mistral(reply);
    case ToolCallSyntax::kGeneric:
      return parse_generic(reply);
    case ToolCallSyntax::kHarmony:
      return content_only(reply);
  }
  return content_only(reply);
}

size_t streamable_content_length(ToolCallSyntax syntax, std::string_view reply) {
  if (syntax == ToolCallSyntax::kHermes) {
    const size_t open = reply.find(kHermesOpen);
    if (open != std::string_view::npos) return open;
    return reply.size() - partial_marker_tail(reply, kHermesOpen);
  }
  if (syntax == ToolCallSyntax::kHarmony) return reply.size();
  // The other syntaxes make the whole reply the call: it may be one until its first character
  // says otherwise.
  const std::string_view text = trim(reply);
  if (text.empty()) return 0;
  const bool may_be_call = syntax == ToolCallSyntax::kMistral
                               ? text.starts_with('[') || text.starts_with("[TOOL_CALLS]")
                               : text.starts_with('{') || text.starts_with("<|python_tag|>");
  return may_be_call ? 0 : reply.size();
}

jinja::Json with_generic_tools(const jinja::Json& messages, const jinja::Json& tools,
                               bool required) {
  std::string prompt =
      "You can call these tools (functions), given with JSON schemas of their parameters:\n";
  for (const jinja::Json& tool : tools) {
    auto function = tool.find("function");
    prompt += (function != tool.end() ? *function : tool).dump() + "\n";
  }
  prompt += required
                ? "\nRespond in JSON format with a tool call: {\"tool_call\": {\"name\": <the "
                  "tool's name>, \"arguments\": <its arguments as a JSON object>}}"
                : "\nRespond in JSON format, either with a tool call: {\"tool_call\": {\"name\": "
                  "<the tool's name>, \"arguments\": <its arguments as a JSON object>}}, or with "
                  "a reply to the user: {\"response\": <your reply>}";

  jinja::Json out = jinja::Json::array();
  const bool has_system = !messages.empty() && messages[0].value("role", "") == "system" &&
                          messages[0].contains("content") && messages[0]["content"].is_string();
  if (!has_system) out.push_back(jinja::Json{{"role", "system"}, {"content", prompt}});
  for (const jinja::Json& message : messages) {
    jinja::Json m = message;
    if (has_system && out.empty()) m["content"] = m["content"].get<std::string>() + "\n\n" + prompt;
    auto calls = m.find("tool_calls");
    if (calls != m.end() && calls->is_array() && !calls->empty()) {
      jinja::Json written = jinja::Json::array();
      for (const jinja::Json& call : *calls) {
        const jinja::Json& function = call.contains("function") ? call["function"] : call;
        written.push_back(
            jinja::Json{{"name", function.value("name", "")},
                        {"arguments", function.value("arguments", jinja::Json::object())}});
      }
      m["content"] = (written.size() == 1 ? jinja::Json{{"tool_call", written[0]}}
                                          : jinja::Json{{"tool_calls", written}})
                         .dump();
      m.erase("tool_calls");
    }
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace drift
