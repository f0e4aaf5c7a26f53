// Structured output fields of a request body -> the engine's grammar (Request::grammar), and
// logit_bias -> SamplingSettings. Both endpoints take them:
//   response_format: {"type": "text"} (no constraint), {"type": "json_object"},
//                    {"type": "json_schema", "json_schema": {"name", "schema", "strict"}}
//   vLLM's guided_json (a schema object or its JSON text), guided_regex, guided_choice (strings),
//   guided_grammar (llguidance's Lark syntax)
// At most one of them per request. Whether a schema or grammar compiles is the engine's to decide
// (a 400 naming the field, from its kInvalidGrammar refusal); here only shapes and sizes.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "server/api_error.h"
#include "util/sampling_params.h"
#include "util/token_constraint.h"

namespace drift::server {

inline constexpr size_t kMaxGuidedChoices = 256;  // guided_choice entries

// A grammar for the engine and the body field it came from (for the 400 that refuses it).
struct OutputConstraint {
  GrammarSpec grammar;
  std::string param;
  // `grammar` compiled on a prompt worker (Request::compiled_grammar says why); null until then.
  std::shared_ptr<const TokenConstraint> compiled;
};

// The constraint the body asks for, if any: nullopt in `out` when none (or "text").
std::optional<ApiError> parse_output_constraint(const nlohmann::json& body,
                                                std::optional<OutputConstraint>& out);

// logit_bias: {"<token id>": bias in [-100, 100], ...}, at most kMaxLogitBias entries. The ids'
// range against the vocabulary is the engine's to check.
std::optional<ApiError> parse_logit_bias(const nlohmann::json& body, std::vector<LogitBias>& out);

// For code that builds a grammar itself (tool calls): constrain the output to a JSON schema or
// to a Lark grammar, reported under `param` if the engine refuses it. `lark_literal` quotes text
// as a Lark string literal (JSON string syntax, which llguidance's Lark accepts), e.g. to build
//   start: "<tool_call>" call "</tool_call>"
//   call: %json { ...the function's parameter schema... }
OutputConstraint json_schema_constraint(const nlohmann::json& schema, std::string param);
OutputConstraint lark_constraint(std::string grammar, std::string param);
std::string lark_literal(std::string_view text);

// guided_choice as a Lark grammar whose language is exactly `choices`.
std::string choice_grammar(std::span<const std::string> choices);

}  // namespace drift::server
