// How each tool-call syntax writes a call, said once. The parser that reads a finished reply and
// the reader of a streaming one (tool_call_syntax.h), the grammar that constrains a reply to calls
// (tool_call_grammar.h) and the generic syntax's instructions to the model are all made from
// these, so that what a constrained model writes is what the parser reads.
#pragma once

#include <string_view>

#include "chat/tool_call_syntax.h"

namespace drift {

// Where a reply's calls sit.
enum class ToolCallShape {
  kBlocks,      // each call between `open` and `close`, text may come before (Hermes)
  kObject,      // the whole reply is one call's object, perhaps after `open` (Llama 3)
  kList,        // the whole reply is a list of calls' objects, perhaps after `open` (Mistral)
  kGeneric,     // the whole reply is {kGenericCallKey: call}, {kGenericCallsKey: [calls]} or
                // {kGenericResponseKey: "text"}
  kFromTokens,  // read from the reply's tokens, never its text (harmony)
};

struct ToolCallFormat {
  ToolCallShape shape = ToolCallShape::kGeneric;
  // What opens each call (kBlocks) or the reply's calls (kObject, kList); empty: nothing. Its
  // presence in a chat template's source also says that the template teaches this syntax.
  std::string_view open;
  std::string_view close;  // what closes each call (kBlocks)
  // `open` is a control token, which a grammar over text cannot make the model write: a reply
  // that must be calls cannot be constrained (kList), or is constrained without it (kObject).
  bool open_is_token = false;
  // What the templates write inside `open` and `close`, around the call's JSON, and between two
  // calls (kBlocks); the parser trims whitespace, the grammar writes exactly this.
  std::string_view padding;
  // The key of a call's arguments as the model writes it; the parser takes either key.
  std::string_view arguments_key = "arguments";
};

inline constexpr std::string_view kGenericCallKey = "tool_call";
inline constexpr std::string_view kGenericCallsKey = "tool_calls";
inline constexpr std::string_view kGenericResponseKey = "response";

inline constexpr ToolCallFormat kHermesFormat{.shape = ToolCallShape::kBlocks,
                                              .open = "<tool_call>",
                                              .close = "</tool_call>",
                                              .padding = "\n"};
inline constexpr ToolCallFormat kLlama3Format{.shape = ToolCallShape::kObject,
                                              .open = "<|python_tag|>",
                                              .open_is_token = true,
                                              .arguments_key = "parameters"};
inline constexpr ToolCallFormat kMistralFormat{
    .shape = ToolCallShape::kList, .open = "[TOOL_CALLS]", .open_is_token = true};
inline constexpr ToolCallFormat kGenericFormat{.shape = ToolCallShape::kGeneric};
inline constexpr ToolCallFormat kHarmonyFormat{.shape = ToolCallShape::kFromTokens};

constexpr const ToolCallFormat& tool_call_format(ToolCallSyntax syntax) {
  switch (syntax) {
    case ToolCallSyntax::kHermes:
      return kHermesFormat;
    case ToolCallSyntax::kLlama3:
      return kLlama3Format;
    case ToolCallSyntax::kMistral:
      return kMistralFormat;
    case ToolCallSyntax::kGeneric:
      return kGenericFormat;
    case ToolCallSyntax::kHarmony:
      return kHarmonyFormat;
  }
  return kGenericFormat;
}

}  // namespace drift
