#include "chat/tool_call_syntax.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "chat/tool_call_format.h"
#include "util/json_limits.h"

namespace drift {
namespace {

constexpr std::string_view kSpace = " \t\n\r";

std::string_view trim(std::string_view s) {
  const size_t begin = s.find_first_not_of(kSpace);
  if (begin == std::string_view::npos) return {};
  return s.substr(begin, s.find_last_not_of(kSpace) + 1 - begin);
}

// The reply after its optional opening marker (kObject, kList), trimmed.
std::string_view after_open(const ToolCallFormat& format, std::string_view reply) {
  std::string_view text = trim(reply);
  if (!format.open.empty() && text.starts_with(format.open))
    text = trim(text.substr(format.open.size()));
  return text;
}

// A model's reply is text like any other: a call nested past util/json_limits.h's bounds is not
// a call (read as content), never a value deep enough to overflow a stack when copied.
std::optional<jinja::Json> parse_json(std::string_view text) {
  Expected<jinja::Json> value = parse_bounded_json<jinja::Json>(text);
  if (!value.ok()) return std::nullopt;
  return std::move(value).value();
}

// {"name": string, <arguments key>: object or a string holding one} -> a call. The format's own
// arguments key is read first; a model may write the other one.
std::optional<ParsedToolCall> call_from(const jinja::Json& value, const ToolCallFormat& format) {
  if (!value.is_object()) return std::nullopt;
  auto name = value.find("name");
  if (name == value.end() || !name->is_string() || name->get_ref<const std::string&>().empty())
    return std::nullopt;
  const std::string_view other = format.arguments_key == "arguments" ? "parameters" : "arguments";
  for (std::string_view key : {format.arguments_key, other}) {
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

ParsedReply parse_blocks(const ToolCallFormat& format, std::string_view reply) {
  ParsedReply out;
  std::string content;
  size_t pos = 0;
  while (true) {
    const size_t open = reply.find(format.open, pos);
    content += reply.substr(pos, open == std::string_view::npos ? open : open - pos);
    if (open == std::string_view::npos) break;
    const size_t body = open + format.open.size();
    const size_t close = reply.find(format.close, body);
    // A reply that ends (EOS, max tokens) before the closing tag: the call is what follows.
    const std::string_view inner =
        close == std::string_view::npos ? reply.substr(body) : reply.substr(body, close - body);
    auto json = parse_json(trim(inner));
    std::optional<ParsedToolCall> call;
    if (json) call = call_from(*json, format);
    // A reply cut short (max_tokens) in its last block keeps the calls it completed.
    if (!call && close == std::string_view::npos && !out.tool_calls.empty()) break;
    if (!call) return content_only(reply);
    out.tool_calls.push_back(std::move(*call));
    if (close == std::string_view::npos) break;
    pos = close + format.close.size();
  }
  if (out.tool_calls.empty()) return content_only(reply);
  out.content = std::string(trim(content));
  return out;
}

ParsedReply parse_object(const ToolCallFormat& format, std::string_view reply) {
  const std::string_view text = after_open(format, reply);
  if (!text.starts_with('{')) return content_only(reply);
  auto json = parse_json(text);
  if (!json) return content_only(reply);
  auto call = call_from(*json, format);
  if (!call) return content_only(reply);
  return ParsedReply{std::string(), {std::move(*call)}};
}

ParsedReply parse_list(const ToolCallFormat& format, std::string_view reply) {
  const std::string_view text = after_open(format, reply);
  if (!text.starts_with('[')) return content_only(reply);
  auto json = parse_json(text);
  if (!json || !json->is_array() || json->empty()) return content_only(reply);
  ParsedReply out;
  for (const jinja::Json& item : *json) {
    auto call = call_from(item, format);
    if (!call) return content_only(reply);
    out.tool_calls.push_back(std::move(*call));
  }
  return out;
}

ParsedReply parse_generic(const ToolCallFormat& format, std::string_view reply) {
  const std::string_view text = trim(reply);
  if (!text.starts_with('{')) return content_only(reply);
  auto json = parse_json(text);
  if (!json || !json->is_object()) return content_only(reply);
  if (auto it = json->find(kGenericResponseKey); it != json->end() && json->size() == 1) {
    if (it->is_string()) return ParsedReply{it->get<std::string>(), {}};
    return content_only(reply);
  }
  ParsedReply out;
  if (auto it = json->find(kGenericCallKey); it != json->end()) {
    auto call = call_from(*it, format);
    if (!call) return content_only(reply);
    out.tool_calls.push_back(std::move(*call));
  } else if (auto list = json->find(kGenericCallsKey); list != json->end() && list->is_array()) {
    for (const jinja::Json& item : *list) {
      auto call = call_from(item, format);
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
  auto has = [&](std::string_view text) { return source.find(text) != std::string_view::npos; };
  if (has("<|channel|>") && has("<|start|>")) return ToolCallSyntax::kHarmony;
  if (has(kHermesFormat.open)) return ToolCallSyntax::kHermes;
  if (has(kMistralFormat.open)) return ToolCallSyntax::kMistral;
  const std::string llama_arguments = fmt::format("\"{}\": ", kLlama3Format.arguments_key);
  if (has(kLlama3Format.open) || (has(llama_arguments) && has("<|start_header_id|>")))
    return ToolCallSyntax::kLlama3;
  return ToolCallSyntax::kGeneric;
}

ParsedReply parse_tool_calls(ToolCallSyntax syntax, std::string_view reply) {
  const ToolCallFormat& format = tool_call_format(syntax);
  switch (format.shape) {
    case ToolCallShape::kBlocks:
      return parse_blocks(format, reply);
    case ToolCallShape::kObject:
      return parse_object(format, reply);
    case ToolCallShape::kList:
      return parse_list(format, reply);
    case ToolCallShape::kGeneric:
      return parse_generic(format, reply);
    case ToolCallShape::kFromTokens:
      return content_only(reply);
  }
  return content_only(reply);
}

size_t streamable_content_length(ToolCallSyntax syntax, std::string_view reply) {
  const ToolCallFormat& format = tool_call_format(syntax);
  if (format.shape == ToolCallShape::kBlocks) {
    const size_t open = reply.find(format.open);
    if (open != std::string_view::npos) return open;
    return reply.size() - partial_marker_tail(reply, format.open);
  }
  if (format.shape == ToolCallShape::kFromTokens) return reply.size();
  // The other shapes make the whole reply the calls: it may be one until its first character
  // says otherwise.
  const std::string_view text = trim(reply);
  if (text.empty()) return 0;
  const char first = format.shape == ToolCallShape::kList ? '[' : '{';
  const bool may_be_call =
      text.starts_with(first) || (!format.open.empty() && text.starts_with(format.open));
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
  const std::string call = fmt::format(
      "{{\"{}\": {{\"name\": <the tool's name>, \"{}\": <its arguments as a JSON object>}}}}",
      kGenericCallKey, kGenericFormat.arguments_key);
  prompt += required ? fmt::format("\nRespond in JSON format with a tool call: {}", call)
                     : fmt::format(
                           "\nRespond in JSON format, either with a tool call: {}, or with a "
                           "reply to the user: {{\"{}\": <your reply>}}",
                           call, kGenericResponseKey);

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
        jinja::Json written_call = jinja::Json::object();
        written_call["name"] = function.value("name", "");
        written_call[std::string(kGenericFormat.arguments_key)] =
            function.value("arguments", jinja::Json::object());
        written.push_back(std::move(written_call));
      }
      jinja::Json content = jinja::Json::object();
      if (written.size() == 1) {
        content[std::string(kGenericCallKey)] = std::move(written[0]);
      } else {
        content[std::string(kGenericCallsKey)] = std::move(written);
      }
      m["content"] = content.dump();
      m.erase("tool_calls");
    }
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace drift
