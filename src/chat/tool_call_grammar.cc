#include "chat/tool_call_grammar.h"

#include <fmt/format.h>

#include "chat/tool_call_format.h"

namespace drift {
namespace {

using Json = jinja::Json;

// A Lark string literal (JSON string syntax, which llguidance's Lark accepts).
std::string literal(std::string_view text) { return Json(std::string(text)).dump(); }

// The parameter schema as OpenAI's strict mode reads it: an object that lists its properties and
// says nothing of others allows no others, so a constrained call holds only the arguments the
// function declares (JSON Schema's default would let a model fill the reply with invented keys).
Json strict(Json schema) {
  if (schema.is_array()) {
    for (Json& item : schema) item = strict(std::move(item));
    return schema;
  }
  if (!schema.is_object()) return schema;
  for (auto& [key, value] : schema.items())
    if (key != "enum" && key != "const" && key != "default" && key != "examples")
      value = strict(std::move(value));
  if (schema.contains("properties") && !schema.contains("additionalProperties"))
    schema["additionalProperties"] = false;
  return schema;
}

// {"name": <the function's name>, <arguments_key>: <its parameter schema>} for each function
// the reply may call; names and arguments in this order, as the templates write them.
Json call_schema(const ToolCallGrammarRequest& r, std::string_view arguments_key) {
  Json alternatives = Json::array();
  for (const Json& tool : *r.tools) {
    const Json& function = tool["function"];
    const std::string name = function["name"].get<std::string>();
    if (r.named_function && name != *r.named_function) continue;
    Json parameters = function.contains("parameters") && function["parameters"].is_object()
                          ? strict(function["parameters"])
                          : Json{{"type", "object"}};
    Json properties = Json::object();
    properties["name"] = Json{{"const", name}};
    properties[std::string(arguments_key)] = std::move(parameters);
    alternatives.push_back(Json{{"type", "object"},
                                {"properties", std::move(properties)},
                                {"required", Json::array({"name", std::string(arguments_key)})},
                                {"additionalProperties", false}});
  }
  if (alternatives.size() == 1) return alternatives[0];
  return Json{{"anyOf", std::move(alternatives)}};
}

std::string json_rule(const Json& schema) { return "%json " + schema.dump(); }

// A call in marked blocks (kBlocks): each call between its markers, with the templates' padding;
// parallel calls separated by that padding too.
std::string blocks_grammar(const ToolCallFormat& f, const ToolCallGrammarRequest& r) {
  const std::string separator = literal(f.padding);
  const std::string calls = r.parallel_tool_calls ? fmt::format("call ({} call){{0,{}}}", separator,
                                                                kMaxConstrainedToolCalls - 1)
                                                  : std::string("call");
  return fmt::format("start: {}\ncall: {} arguments {}\narguments: {}\n", calls,
                     literal(std::string(f.open) + std::string(f.padding)),
                     literal(std::string(f.padding) + std::string(f.close)),
                     json_rule(call_schema(r, f.arguments_key)));
}

// The generic JSON reply (kGeneric): a call, or (when none is required) a response in text.
std::string generic_grammar(const ToolCallFormat& f, const ToolCallGrammarRequest& r) {
  auto object_of = [](std::string_view key, Json value) {
    Json properties = Json::object();
    properties[std::string(key)] = std::move(value);
    return Json{{"type", "object"},
                {"properties", std::move(properties)},
                {"required", Json::array({std::string(key)})},
                {"additionalProperties", false}};
  };
  Json call = object_of(kGenericCallKey, call_schema(r, f.arguments_key));
  if (r.required) return "start: " + json_rule(call) + "\n";
  Json response = object_of(kGenericResponseKey, Json{{"type", "string"}});
  return "start: " + json_rule(Json{{"anyOf", Json::array({call, response})}}) + "\n";
}

}  // namespace

std::optional<std::string> tool_call_grammar(const ToolCallGrammarRequest& r) {
  if (!r.tools || r.tools->empty()) return std::nullopt;
  const ToolCallFormat& f = tool_call_format(r.syntax);
  switch (f.shape) {
    case ToolCallShape::kBlocks:
      // "auto": the model may answer in text. Blocks opened by a control token cannot be written.
      if (!r.required || f.open_is_token) return std::nullopt;
      return blocks_grammar(f, r);
    case ToolCallShape::kObject:
      // Its marker, if any, is optional: the grammar writes the call without it.
      if (!r.required) return std::nullopt;
      return "start: " + json_rule(call_schema(r, f.arguments_key)) + "\n";
    case ToolCallShape::kList:        // the list must follow its marker, a control token (Mistral)
    case ToolCallShape::kFromTokens:  // channels are tokens
      return std::nullopt;
    case ToolCallShape::kGeneric:
      return generic_grammar(f, r);
  }
  return std::nullopt;
}

}  // namespace drift
