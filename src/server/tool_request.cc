#include "server/tool_request.h"

#include <fmt/format.h>

#include <cctype>
#include <set>

#include "util/json_limits.h"

namespace drift::server {
namespace {

using Json = jinja::Json;
using MaybeError = std::optional<ApiError>;

const Json* field(const Json& object, std::string_view name) {
  auto it = object.find(name);
  if (it == object.end() || it->is_null()) return nullptr;
  return &*it;
}

MaybeError check_tool(const Json& tool, size_t index, std::set<std::string>& names) {
  const std::string param = fmt::format("tools[{}]", index);
  if (!tool.is_object()) return bad_request(fmt::format("{} must be an object", param), param);
  const Json* type = field(tool, "type");
  if (!type || *type != "function")
    return bad_request(fmt::format("{}.type must be \"function\"", param), param + ".type");
  const Json* function = field(tool, "function");
  if (!function || !function->is_object())
    return bad_request(fmt::format("{}.function must be an object", param), param + ".function");
  const Json* name = field(*function, "name");
  if (!name || !name->is_string() || !valid_function_name(name->get<std::string>()))
    return bad_request(fmt::format("{}.function.name must be 1 to {} letters, digits, '_' or '-'",
                                   param, kMaxToolNameBytes),
                       param + ".function.name");
  if (!names.insert(name->get<std::string>()).second)
    return bad_request(
        fmt::format("{}: a second function named '{}'", param, name->get<std::string>()),
        param + ".function.name");
  if (const Json* d = field(*function, "description"); d && !d->is_string())
    return bad_request(fmt::format("{}.function.description must be a string", param),
                       param + ".function.description");
  if (const Json* p = field(*function, "parameters"); p && !p->is_object())
    return bad_request(fmt::format("{}.function.parameters must be a JSON schema object", param),
                       param + ".function.parameters");
  return std::nullopt;
}

MaybeError parse_choice(const Json& body, const std::set<std::string>& names, ToolRequest& out) {
  const Json* choice = field(body, "tool_choice");
  out.choice = out.tools ? ToolChoice::kAuto : ToolChoice::kNone;
  if (!choice) return std::nullopt;
  if (choice->is_string()) {
    const std::string c = choice->get<std::string>();
    if (c == "none")
      out.choice = ToolChoice::kNone;
    else if (c == "auto")
      out.choice = out.tools ? ToolChoice::kAuto : ToolChoice::kNone;
    else if (c == "required")
      out.choice = ToolChoice::kRequired;
    else
      return bad_request(fmt::format("'tool_choice' must be \"none\", \"auto\", \"required\" or "
                                     "{{\"type\": \"function\", \"function\": {{\"name\": ...}}}}, "
                                     "got \"{}\"",
                                     c),
                         "tool_choice");
  } else if (choice->is_object()) {
    const Json* function = field(*choice, "function");
    const Json* name = function && function->is_object() ? field(*function, "name") : nullptr;
    if (!name || !name->is_string())
      return bad_request(
          "'tool_choice' as an object must be {\"type\": \"function\", "
          "\"function\": {\"name\": ...}}",
          "tool_choice");
    out.choice = ToolChoice::kNamed;
    out.named_function = name->get<std::string>();
    if (out.tools && !names.contains(out.named_function))
      return bad_request(fmt::format("'tool_choice' names the function '{}', which is not in "
                                     "'tools'",
                                     out.named_function),
                         "tool_choice");
  } else {
    return bad_request("'tool_choice' must be a string or an object", "tool_choice");
  }
  return check_demanded_call_has_tools(out);
}

// A call's arguments: the JSON text OpenAI sends, parsed into the object templates print (a text
// that is not an object, or not JSON, stays a string, which templates print as given). A text
// beyond util/json_limits.h's bounds is refused: parsed, it would be as deep as it is long.
std::variant<Json, ApiError> arguments_value(const Json& arguments, const std::string& param) {
  if (!arguments.is_string()) return arguments;
  const std::string& text = arguments.get_ref<const std::string&>();
  if (std::optional<std::string> violation = json_limit_violation(text, {}))
    return bad_request(fmt::format("{} holds a JSON text that {}", param, *violation), param);
  Expected<Json> parsed = parse_bounded_json<Json>(text);
  if (parsed.ok() && parsed->is_object()) return std::move(parsed).value();
  return arguments;
}

MaybeError read_calls(const Json& calls, const std::string& param, Json& out) {
  if (!calls.is_array()) return bad_request(fmt::format("{} must be an array", param), param);
  if (calls.size() > kMaxToolCallsPerTurn)
    return bad_request(fmt::format("{} may hold at most {} calls, got {}", param,
                                   kMaxToolCallsPerTurn, calls.size()),
                       param);
  out = Json::array();
  for (size_t k = 0; k < calls.size(); ++k) {
    const Json& call = calls[k];
    const std::string at = fmt::format("{}[{}]", param, k);
    const Json* function = call.is_object() ? field(call, "function") : nullptr;
    const Json* name = function && function->is_object() ? field(*function, "name") : nullptr;
    if (!name || !name->is_string())
      return bad_request(fmt::format("{} must be {{\"id\", \"type\": \"function\", \"function\": "
                                     "{{\"name\", \"arguments\"}}}}",
                                     at),
                         at);
    const Json* arguments = field(*function, "arguments");
    if (arguments && !arguments->is_string() && !arguments->is_object())
      return bad_request(fmt::format("{}.function.arguments must be a JSON string", at),
                         at + ".function.arguments");
    Json copy = call;  // keeps the client's key order, as the template prints it
    if (!arguments) {
      copy["function"]["arguments"] = Json::object();
    } else {
      auto value = arguments_value(*arguments, at + ".function.arguments");
      if (auto* e = std::get_if<ApiError>(&value)) return *e;
      copy["function"]["arguments"] = std::move(std::get<Json>(value));
    }
    out.push_back(std::move(copy));
  }
  return std::nullopt;
}

}  // namespace

bool valid_function_name(std::string_view name) {
  if (name.empty() || name.size() > kMaxToolNameBytes) return false;
  for (unsigned char c : name)
    if (!std::isalnum(c) && c != '_' && c != '-') return false;
  return true;
}

std::variant<Json, ApiError> read_tool_name_and_description(const Json& tool,
                                                            const std::string& param,
                                                            std::set<std::string>& names) {
  const Json* name = field(tool, "name");
  if (!name || !name->is_string() || !valid_function_name(name->get<std::string>()))
    return bad_request(fmt::format("{}.name must be 1 to {} letters, digits, '_' or '-'", param,
                                   kMaxToolNameBytes),
                       param + ".name");
  if (!names.insert(name->get<std::string>()).second)
    return bad_request(fmt::format("{}: a second tool named {}", param, name->dump()),
                       param + ".name");
  Json function{{"name", *name}};
  if (const Json* d = field(tool, "description")) {
    if (!d->is_string()) return wrong_type(param + ".description", "a string", *d);
    function["description"] = *d;
  }
  return function;
}

std::optional<ApiError> check_demanded_call_has_tools(const ToolRequest& request) {
  if (!request.tools &&
      (request.choice == ToolChoice::kRequired || request.choice == ToolChoice::kNamed))
    return bad_request("'tool_choice' asks for a tool call, but the request gives no 'tools'",
                       "tool_choice");
  return std::nullopt;
}

std::variant<ToolRequest, ApiError> parse_tool_request(const Json& body) {
  ToolRequest out;
  std::set<std::string> names;
  if (const Json* tools = field(body, "tools")) {
    if (!tools->is_array()) return bad_request("'tools' must be an array", "tools");
    if (tools->size() > kMaxTools)
      return bad_request(
          fmt::format("'tools' may hold at most {} functions, got {}", kMaxTools, tools->size()),
          "tools");
    for (size_t i = 0; i < tools->size(); ++i)
      if (auto e = check_tool((*tools)[i], i, names)) return *e;
    if (!tools->empty()) out.tools = *tools;
  }
  if (auto e = parse_choice(body, names, out)) return *e;
  if (const Json* parallel = field(body, "parallel_tool_calls")) {
    if (!parallel->is_boolean())
      return bad_request("'parallel_tool_calls' must be a boolean", "parallel_tool_calls");
    out.parallel_tool_calls = parallel->get<bool>();
  }
  if (const Json* kwargs = field(body, "chat_template_kwargs")) {
    if (!kwargs->is_object())
      return bad_request("'chat_template_kwargs' must be an object", "chat_template_kwargs");
    out.template_kwargs = *kwargs;
  }
  return out;
}

std::optional<ApiError> read_message_tool_calls(const Json& body,
                                                std::vector<ChatMessage>& messages) {
  const Json* list = field(body, "messages");
  if (!list || !list->is_array() || list->size() != messages.size())
    return bad_request("'messages' must be an array", "messages");
  for (size_t i = 0; i < messages.size(); ++i) {
    const Json& m = (*list)[i];
    const std::string param = fmt::format("messages[{}]", i);
    if (const Json* calls = field(m, "tool_calls")) {
      if (messages[i].role != "assistant")
        return bad_request(fmt::format("{}: only assistant messages have tool_calls", param),
                           param + ".tool_calls");
      if (auto e = read_calls(*calls, param + ".tool_calls", messages[i].tool_calls)) return e;
    }
    if (const Json* id = field(m, "tool_call_id")) {
      if (!id->is_string())
        return bad_request(fmt::format("{}.tool_call_id must be a string", param),
                           param + ".tool_call_id");
      messages[i].tool_call_id = id->get<std::string>();
    }
  }
  return std::nullopt;
}

}  // namespace drift::server
