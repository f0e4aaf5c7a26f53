#include "server/guided_decoding.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <limits>

#include "server/request_json.h"

namespace drift::server {

namespace {

using nlohmann::json;
using MaybeError = std::optional<ApiError>;

// JSON text of a value for the engine; invalid UTF-8 cannot reach here (request_json checks the
// body), but replacing keeps dump() from throwing whatever happens.
std::string dump_json(const json& v) {
  return v.dump(-1, ' ', false, json::error_handler_t::replace);
}

MaybeError expect_string(const json& v, std::string_view param, std::string& out) {
  if (!v.is_string()) return bad_request(fmt::format("'{}' must be a string", param), param);
  out = v.get<std::string>();
  if (out.size() > kMaxGrammarSourceBytes)
    return bad_request(fmt::format("'{}' has {} bytes; at most {} are accepted", param, out.size(),
                                   kMaxGrammarSourceBytes),
                       param);
  return std::nullopt;
}

// A JSON schema given as an object (or a boolean schema), or as its JSON text.
MaybeError schema_source(const json& v, std::string_view param, std::string& out) {
  const json* schema = &v;
  json parsed;
  if (v.is_string()) {
    auto field = parse_json_field<json>(v.get_ref<const std::string&>(), param,
                                        {.max_bytes = kMaxGrammarSourceBytes});
    if (auto* e = std::get_if<ApiError>(&field)) return *e;
    parsed = std::move(std::get<json>(field));
    schema = &parsed;
  }
  if (!schema->is_object() && !schema->is_boolean())
    return bad_request(fmt::format("'{}' must be a JSON schema (an object)", param), param);
  out = dump_json(*schema);
  if (out.size() > kMaxGrammarSourceBytes)
    return bad_request(fmt::format("'{}' has {} bytes as JSON; at most {} are accepted", param,
                                   out.size(), kMaxGrammarSourceBytes),
                       param);
  return std::nullopt;
}

MaybeError parse_response_format(const json& v, std::optional<OutputConstraint>& out) {
  if (!v.is_object()) return bad_request("'response_format' must be an object", "response_format");
  auto type = v.find("type");
  if (type == v.end() || !type->is_string())
    return bad_request(
        "'response_format.type' must be \"text\", \"json_object\" or "
        "\"json_schema\"",
        "response_format.type");
  const std::string& kind = type->get_ref<const std::string&>();
  if (kind == "text") return std::nullopt;
  if (kind == "json_object") {
    out = OutputConstraint{GrammarSpec{GrammarKind::kJsonObject, ""}, "response_format"};
    return std::nullopt;
  }
  if (kind != "json_schema")
    return bad_request(fmt::format("'response_format.type' must be \"text\", \"json_object\" or "
                                   "\"json_schema\", got \"{}\"",
                                   kind),
                       "response_format.type");
  auto spec = v.find("json_schema");
  if (spec == v.end() || !spec->is_object())
    return bad_request("'response_format.json_schema' must be an object with a 'schema'",
                       "response_format.json_schema");
  if (auto name = spec->find("name"); name != spec->end() && !name->is_string())
    return bad_request("'response_format.json_schema.name' must be a string",
                       "response_format.json_schema.name");
  // Every schema is enforced exactly, so "strict" changes nothing; only its type is checked.
  if (auto strict = spec->find("strict");
      strict != spec->end() && !strict->is_boolean() && !strict->is_null())
    return bad_request("'response_format.json_schema.strict' must be a boolean",
                       "response_format.json_schema.strict");
  auto schema = spec->find("schema");
  // OpenAI's schema is optional: without one, any JSON object.
  if (schema == spec->end() || schema->is_null()) {
    out = OutputConstraint{GrammarSpec{GrammarKind::kJsonObject, ""}, "response_format"};
    return std::nullopt;
  }
  std::string source;
  if (auto e = schema_source(*schema, "response_format.json_schema.schema", source)) return e;
  out = OutputConstraint{GrammarSpec{GrammarKind::kJsonSchema, std::move(source)},
                         "response_format.json_schema.schema"};
  return std::nullopt;
}

MaybeError parse_guided_choice(const json& v, std::optional<OutputConstraint>& out) {
  constexpr std::string_view kParam = "guided_choice";
  if (!v.is_array() || v.empty() || v.size() > kMaxGuidedChoices)
    return bad_request(
        fmt::format("'guided_choice' must be a list of 1 to {} strings", kMaxGuidedChoices),
        kParam);
  std::vector<std::string> choices;
  for (const json& c : v) {
    if (!c.is_string() || c.get_ref<const std::string&>().empty())
      return bad_request("each 'guided_choice' entry must be a non-empty string", kParam);
    choices.push_back(c.get<std::string>());
  }
  std::string grammar = choice_grammar(choices);
  if (grammar.size() > kMaxGrammarSourceBytes)
    return bad_request(
        fmt::format("'guided_choice' is too large: {} bytes as a grammar, at most {}",
                    grammar.size(), kMaxGrammarSourceBytes),
        kParam);
  out = OutputConstraint{GrammarSpec{GrammarKind::kLark, std::move(grammar)}, std::string(kParam)};
  return std::nullopt;
}

}  // namespace

MaybeError parse_output_constraint(const json& body, std::optional<OutputConstraint>& out) {
  // Rule: one way of constraining per request; which one is named in the refusal.
  static constexpr std::string_view kFields[] = {"response_format", "guided_json", "guided_regex",
                                                 "guided_choice", "guided_grammar"};
  out.reset();
  std::string_view given;
  for (std::string_view name : kFields) {
    auto it = body.find(std::string(name));
    if (it == body.end() || it->is_null()) continue;
    std::optional<OutputConstraint> one;
    std::string source;
    if (name == "response_format") {
      if (auto e = parse_response_format(*it, one)) return e;
    } else if (name == "guided_json") {
      if (auto e = schema_source(*it, name, source)) return e;
      one =
          OutputConstraint{GrammarSpec{GrammarKind::kJsonSchema, std::move(source)}, "guided_json"};
    } else if (name == "guided_regex") {
      if (auto e = expect_string(*it, name, source)) return e;
      one = OutputConstraint{GrammarSpec{GrammarKind::kRegex, std::move(source)}, "guided_regex"};
    } else if (name == "guided_choice") {
      if (auto e = parse_guided_choice(*it, one)) return e;
    } else {
      if (auto e = expect_string(*it, name, source)) return e;
      one = OutputConstraint{GrammarSpec{GrammarKind::kLark, std::move(source)}, "guided_grammar"};
    }
    if (!one) continue;  // response_format "text"
    if (out)
      return bad_request(
          fmt::format("'{}' and '{}' both constrain the output; give one", given, name), name);
    out = std::move(one);
    given = name;
  }
  return std::nullopt;
}

MaybeError parse_logit_bias(const json& body, std::vector<LogitBias>& out) {
  constexpr std::string_view kParam = "logit_bias";
  auto it = body.find(std::string(kParam));
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_object())
    return bad_request("'logit_bias' must be an object mapping token ids to biases", kParam);
  if (it->size() > kMaxLogitBias)
    return bad_request(
        fmt::format("'logit_bias' may hold at most {} tokens, got {}", kMaxLogitBias, it->size()),
        kParam);
  out.clear();
  for (const auto& [key, value] : it->items()) {
    int32_t token = -1;
    const char* end = key.data() + key.size();
    auto [ptr, ec] = std::from_chars(key.data(), end, token);
    if (key.empty() || ec != std::errc() || ptr != end || token < 0)
      return bad_request(fmt::format("'logit_bias' keys must be token ids (integers >= 0), got "
                                     "\"{}\"",
                                     key),
                         kParam);
    if (!value.is_number())
      return bad_request(fmt::format("'logit_bias' value of token {} must be a number", token),
                         kParam);
    const double bias = value.get<double>();
    if (!std::isfinite(bias) || bias < -100.0 || bias > 100.0)
      return bad_request(fmt::format("'logit_bias' value of token {} must be in [-100, 100], got "
                                     "{}",
                                     token, bias),
                         kParam);
    out.push_back(LogitBias{token, float(bias)});
  }
  return std::nullopt;
}

OutputConstraint json_schema_constraint(const json& schema, std::string param) {
  return OutputConstraint{GrammarSpec{GrammarKind::kJsonSchema, dump_json(schema)},
                          std::move(param)};
}

OutputConstraint lark_constraint(std::string grammar, std::string param) {
  return OutputConstraint{GrammarSpec{GrammarKind::kLark, std::move(grammar)}, std::move(param)};
}

std::string lark_literal(std::string_view text) { return dump_json(json(std::string(text))); }

std::string choice_grammar(std::span<const std::string> choices) {
  std::string grammar = "start: ";
  for (size_t i = 0; i < choices.size(); ++i) {
    if (i > 0) grammar += " | ";
    grammar += lark_literal(choices[i]);
  }
  grammar += "\n";
  return grammar;
}

}  // namespace drift::server
