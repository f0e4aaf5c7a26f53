// One chat reply of a harmony model (gpt-oss), read token by token into the parts of an OpenAI
// chat message, as vLLM returns them:
//   - the analysis channel (the chain of thought) is `reasoning_content`;
//   - what is meant for the user is `content`: the final channel, and a commentary message
//     without a recipient (a preamble the model writes before calling tools);
//   - a message to "functions.NAME" is a tool call of NAME with the message as its arguments;
//   - a message to any other recipient (the built-in browser or python tools, which this server
//     does not run) is left out.
// Several messages of one kind are joined with a newline. Messages are told apart by the markers'
// ids (harmony_parser.h), so no marker ever reaches the text. A reply with no marker at all (a
// model that ignored the format) is content, given when the reply ends.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "chat/harmony_parser.h"
#include "chat/tool_call_syntax.h"

namespace drift {

class HarmonyReply {
 public:
  explicit HarmonyReply(HarmonyTokens tokens) : parser_(tokens), tokens_(tokens) {}

  // Text that became final, by kind.
  struct Delta {
    std::string reasoning;
    std::string content;
  };
  // One generated token and the engine's text delta for it.
  Delta push(int32_t token, std::string_view text);
  // The reply ended. A call cut short (max_tokens) is not a call; cut text is kept.
  Delta finish();

  // The calls the reply made, in order (complete ones only).
  const std::vector<ParsedToolCall>& tool_calls() const { return calls_; }

 private:
  enum class Kind { kReasoning, kContent, kCall, kIgnored };
  static Kind kind_of(const HarmonyMessage& message);
  // `text` of the message being read (index `message`) into `delta`, after a newline when an
  // earlier message of its kind has text.
  void add(Kind kind, size_t message, std::string_view text, Delta& delta);
  // The messages the parser completed since the last call: their calls.
  void take_completed_calls();

  HarmonyParser parser_;
  HarmonyTokens tokens_;
  bool saw_marker_ = false;
  std::string unformatted_;   // the text before the first marker, for a reply without any
  size_t messages_read_ = 0;  // completed messages already looked at for calls
  // The last message that gave each kind text (SIZE_MAX: none yet).
  size_t last_reasoning_message_ = SIZE_MAX;
  size_t last_content_message_ = SIZE_MAX;
  std::vector<ParsedToolCall> calls_;
};

}  // namespace drift
