// How a chat model writes a tool (function) call, and how drift reads one back out of its reply.
//
// A model learns one call syntax in training, and its chat template shows it (the template
// renders earlier calls the same way). drift recognises the families in use and otherwise falls
// back to a generic JSON reply, as llama.cpp does for templates that know nothing of tools:
//   kHermes   <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>, one block per call,
//             text may come before (Hermes 2/3, Qwen 2.5/3, many fine-tunes);
//   kLlama3   the whole reply is {"name": ..., "parameters": {...}} (Llama 3.1/3.2/3.3);
//   kMistral  [TOOL_CALLS][{"name": ..., "arguments": {...}}, ...] (the marker is a control
//             token, so the decoded reply starts at the '[');
//   kGeneric  the template cannot show tools, so the prompt gets a system message that lists
//             them and asks for {"tool_call": {"name": ..., "arguments": {...}}} or
//             {"response": "..."}; with a constraint the reply always has one of these shapes;
//   kHarmony  gpt-oss: a message to functions.NAME on the commentary channel, whose content is the
//             arguments; read from the reply's tokens by harmony_parser.h (its markers are
//             tokens), never from its text, so the text functions here treat it as content.
// Each syntax's markers and JSON shape are said once, in tool_call_format.h, which the grammar
// that demands calls (tool_call_grammar.h) is written from too. Parsing never fails: a reply that
// is not a well-formed call in the model's syntax is content.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "jinja/json.h"

namespace drift {

enum class ToolCallSyntax { kHermes, kLlama3, kMistral, kGeneric, kHarmony };

std::string_view tool_call_syntax_name(ToolCallSyntax syntax);

// The syntax a chat template teaches, read from its source.
ToolCallSyntax detect_tool_call_syntax(std::string_view template_source);

struct ParsedToolCall {
  std::string name;
  std::string arguments;  // a JSON object's text, as OpenAI's function.arguments carries it
};

struct ParsedReply {
  std::string content;  // the reply's text outside its calls (whitespace-trimmed when calls exist)
  std::vector<ParsedToolCall> tool_calls;
};

// Splits a finished reply into content and tool calls.
ParsedReply parse_tool_calls(ToolCallSyntax syntax, std::string_view reply);

// While a reply streams: how many of its first bytes are content whatever comes next (text
// before a call's marker, less a tail that may be the start of one). The rest is held until the
// reply ends.
size_t streamable_content_length(ToolCallSyntax syntax, std::string_view reply_so_far);

// kGeneric: `messages` (OpenAI-shaped, tool_calls' arguments as objects) as a template without
// tools can render them: a system message that lists `tools` (OpenAI tool objects) and asks for
// the JSON reply shape (only the call shape when `required`) goes first (or ends the first
// message's text when that is the system's), and each assistant turn's tool calls become its
// content, written in that shape.
jinja::Json with_generic_tools(const jinja::Json& messages, const jinja::Json& tools,
                               bool required);

}  // namespace drift
