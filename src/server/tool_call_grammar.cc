#include "server/tool_call_grammar.h"

#include <fmt/format.h>

namespace drift::server {
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

}  // namespace

std::optional<std::string> tool_call_grammar(const ToolCallGrammarRequest& r) {
  if (!r.tools || r.tools->empty()) return std::nullopt;
  switch (r.syntax) {
    case ToolCallSyntax::kHermes: {
      if (!r.required) return std::nullopt;
      std::string g =
          "start: " +
          std::string(r.parallel_tool_calls
                          ? fmt::format("call (\"\\n\" call){{0,{}}}", kMaxConstrainedToolCalls - 1)
                          : "call") +
          "\ncall: " + literal("<tool_call>\n") + " arguments " + literal("\n</tool_call>") +
          "\narguments: " + json_rule(call_schema(r, "arguments")) + "\n";
      return g;
    }
    case ToolCallSyntax::kLlama3:
      if (!r.required) return std::nullopt;
      return "start: " + json_rule(call_schema(r, "parameters")) + "\n";
    case ToolCallSyntax::kMistral:
    case ToolCallSyntax::kHarmony:
      return std::nullopt;
    case ToolCallSyntax::kGeneric: {
      Json call = Json{{"type", "object"},
                       {"properties", Json{{"tool_call", call_schema(r, "arguments")}}},
                       {"required", Json::array({"tool_call"})},
                       {"additionalProperties", false}};
      if (r.required) return "start: " + json_rule(call) + "\n";
      Json response = Json{{"type", "object"},
                           {"properties", Json{{"response", Json{{"type", "string"}}}}},
                           {"required", Json::array({"response"})},
                           {"additionalProperties", false}};
      return "start: " + json_rule(Json{{"anyOf", Json::array({call, response})}}) + "\n";
    }
  }
  return std::nullopt;
}

}  // namespace drift::server
