// OpenAI's harmony format (gpt-oss): how a reply's tokens split into messages. A reply is a run
// of messages, each a header and a content:
//
//   <|channel|>analysis<|message|>Let me think.<|end|>
//   <|start|>assistant<|channel|>final<|message|>The answer.<|return|>
//
// The header names the channel (analysis: the chain of thought; final: the answer; commentary:
// tool calls and preambles), and for a tool call its recipient and content type:
//
//   <|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>
//   {"city": "Paris"}<|call|>
//
// The prompt ends with "<|start|>assistant" (the template's generation prompt), so the first
// message's header starts at once. <|end|> ends a message and another follows; <|return|> (the
// answer is done) and <|call|> (a tool call waits for its result) end the reply.
//
// Markers are recognised by token id only: text that spells "<|channel|>" in ordinary tokens is
// text. The parser reads what openai-harmony's StreamableParser reads, token by token
// (tests/unit/tokenizer/harmony_parser_test.cc checks it against that parser on the same ids),
// and differs where that parser would fail or show a marker as text:
//   - a marker inside a message's content (<|channel|>, <|message|>, <|constrain|>) is dropped,
//     not decoded to its text; a <|start|> or <|channel|> there ends the message (the model left
//     out its <|end|>) and opens the next header;
//   - between messages a token other than <|start|> is dropped, but a <|channel|> opens an
//     assistant header (the model left out "<|start|>assistant");
//   - a header it cannot read whole (an unknown role, words left over, an empty channel) keeps
//     what it can read instead of failing;
//   - invalid UTF-8 in content becomes U+FFFD instead of holding the rest of the message back.
// As there, the bytes of a character that a message never completes are dropped.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace drift {

// The ids of the harmony markers in a vocabulary.
struct HarmonyTokens {
  int32_t start = 0;      // <|start|>
  int32_t end = 0;        // <|end|>
  int32_t message = 0;    // <|message|>
  int32_t channel = 0;    // <|channel|>
  int32_t constrain = 0;  // <|constrain|>
  int32_t return_ = 0;    // <|return|>
  int32_t call = 0;       // <|call|>

  bool is_marker(int32_t token) const;
};

// The markers of a vocabulary that has all seven as special (control or user-defined) tokens.
std::optional<HarmonyTokens> find_harmony_tokens(const Tokenizer& tokenizer);

struct HarmonyMessage {
  std::string role;          // "assistant"; for a tool's message, the tool's name
  std::string channel;       // "analysis", "commentary", "final"; empty if the header has none
  std::string recipient;     // "functions.get_weather" for a call; empty for none
  std::string content_type;  // "<|constrain|>json" as openai-harmony reports it; empty for none
  std::string content;
};

class HarmonyParser {
 public:
  enum class State { kExpectStart, kHeader, kContent };

  // Starts in the header of an assistant message (the prompt ended with "<|start|>assistant").
  explicit HarmonyParser(HarmonyTokens tokens);

  // One generated token and the text it adds: its bytes, or the engine's text delta for it (then
  // already whole characters). The text of a marker is not read. Returns the content that became
  // final with this token (whole UTF-8 characters; empty while in a header).
  std::string push(int32_t token, std::string_view text);
  // The reply ended: a message being read is kept as far as it got; a header is dropped.
  void finish();

  State state() const { return state_; }
  // The message being read, once its header is complete (state kContent).
  const HarmonyMessage& current() const { return current_; }
  // Completed messages, in order.
  const std::vector<HarmonyMessage>& messages() const { return messages_; }

 private:
  void open_header(std::string role_given);
  // Moves the header's text since the last marker into header_, made valid UTF-8.
  void add_header_text_run();
  void read_header();
  void end_message();

  HarmonyTokens tokens_;
  State state_ = State::kHeader;
  std::string role_given_ = "assistant";  // the header's role when the prompt wrote it
  std::string header_;        // the header so far: valid UTF-8 text, markers as 0xFF and a letter
  std::string header_text_;   // the header's bytes since its last marker
  std::string pending_utf8_;  // content bytes that do not end a character yet
  HarmonyMessage current_;
  std::vector<HarmonyMessage> messages_;
};

}  // namespace drift
