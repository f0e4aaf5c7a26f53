// The constraint that makes a reply a well-formed tool call when the request demands one
// (tool_choice "required" or a named function), in the model's own call syntax: each call's
// arguments follow its function's parameter schema, so they always parse and validate. For a
// template without tools (the generic syntax) "auto" is constrained too, to the JSON reply shape
// the system message asks for ({"tool_call": ...} or {"response": ...}), as llama.cpp does: a
// model that never saw tools in training otherwise rarely writes a parseable call.
//
// The grammar is written from the syntax's ToolCallFormat (tool_call_format.h), the description
// the parser reads replies by, so that the two cannot disagree on markers or the JSON's shape. It
// is in llguidance's Lark syntax, whose %json rules take JSON schemas.
#pragma once

#include <optional>
#include <string>

#include "chat/tool_call_syntax.h"
#include "jinja/json.h"

namespace drift {

// Calls a constrained reply may hold (parallel_tool_calls): a small model, once in the call
// syntax, may otherwise repeat calls until max_tokens.
inline constexpr int kMaxConstrainedToolCalls = 8;

struct ToolCallGrammarRequest {
  ToolCallSyntax syntax = ToolCallSyntax::kGeneric;
  const jinja::Json* tools = nullptr;  // validated OpenAI tool objects (server/tool_request.h)
  bool required = false;               // "required" or a named function
  std::optional<std::string> named_function;
  bool parallel_tool_calls = true;
};

// The Lark grammar, or nullopt when the reply stays free: "auto" with a syntax that lets a model
// answer in text, or a syntax whose markers are control tokens (Mistral's [TOOL_CALLS], harmony's
// channels).
std::optional<std::string> tool_call_grammar(const ToolCallGrammarRequest& request);

}  // namespace drift
