// One reply in a text tool-call syntax (tool_call_syntax.h: Hermes, Llama 3, Mistral, generic),
// read as it streams into content and tool calls, the way harmony_reply.h reads a harmony reply.
//
// Content goes out as soon as no call can start in it: for Hermes the text before the first
// <tool_call> (less a tail that may be the start of one, and less trailing whitespace, which the
// parse trims when a call follows); for the syntaxes whose whole reply is the call, nothing until
// its first character shows it is not one. The rest waits for the end of the reply, where the
// whole reply is parsed. So the content deltas concatenate to what parse_tool_calls gives for the
// whole reply (one exception, below), streamed or not.
//
// The exception: a Hermes reply that starts with whitespace, then text, then a call: the
// whitespace went out with the text, while the parse would trim it. The rest of the content is
// then the parse of what was held back (as the server read streamed replies until issue 30).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "chat/tool_call_syntax.h"

namespace drift {

class ToolCallReply {
 public:
  explicit ToolCallReply(ToolCallSyntax syntax) : syntax_(syntax) {}

  // The reply's next text (content that became final upstream); returns what of it, and of the
  // text held before it, is content whatever comes next.
  std::string push(std::string_view text);
  // The reply ended: the content held back (around and between the calls, or the "response" of a
  // generic reply); tool_calls() then holds the calls.
  std::string finish();

  // The reply's complete calls, in order; empty until finish().
  const std::vector<ParsedToolCall>& tool_calls() const { return calls_; }

 private:
  // Bytes of reply_ that are content whatever comes next.
  size_t streamable() const;

  ToolCallSyntax syntax_;
  std::string reply_;  // the reply's text so far
  size_t sent_ = 0;    // bytes of reply_ already given out as content
  std::vector<ParsedToolCall> calls_;
};

}  // namespace drift
