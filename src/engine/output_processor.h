// The engine's output side for one request (vLLM's OutputProcessor, per request): generated
// tokens in, TokenEvents out. It detokenizes, reads a harmony reply's channels into reasoning and
// content, cuts the content at the first stop string — which ends the request with finish
// reason "stop", so that the engine, its metrics and a session all see a stop, not a cancel —
// and reads the tool calls of a reply that may make them (harmony's from its markers, the text
// syntaxes' from the content the stop strings left: chat/tool_call_reply.h), so that every front
// end gets {content, reasoning, tool_calls} and only serializes them.
//
// An event goes out only once its text is final: while the end of the content could still be
// the start of a stop string, the events of the tokens that wrote it wait here (their token id,
// logprobs and text together). So the events a caller sees never include text that a stop
// string later takes back, and no logprobs of it either.
//
// When a stop string matches (at content byte M), the request's generated tokens split in two:
//   kept     every token before the one that wrote byte M, and that one too if it wrote text
//            before M (its text is cut at M). Their events carry text and logprobs as usual,
//            and they are what a session's history keeps of the turn.
//   dropped  the tokens that wrote only the stop string (and anything after it). Their events
//            carry the token id alone: no text, no logprobs. Usage still counts them.
// include_stop_str_in_output (vLLM) is not offered.
//
// Tool calls in a text syntax: content leaves the stop-string stage into the ToolCallReply, which
// passes on what cannot be part of a call; an event whose text it holds back goes out with its
// token and logprobs and less (or no) text, and the held text goes on the finish event, before
// the calls.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "chat/harmony_reply.h"
#include "chat/tool_call_reply.h"
#include "engine/request.h"
#include "engine/stop_string_matcher.h"
#include "engine/text_codec.h"

namespace drift {

// Why `stop` cannot be a request's stop strings (their number, an empty or too long one, one
// that is not valid UTF-8); Ok when it can.
Status validate_stop_strings(const std::vector<std::string>& stop);

class OutputProcessor {
 public:
  // How the reply is read, from its Request: `harmony` set when it is read by its markers
  // (reply_format kHarmony; stop strings then apply to its content only), `tool_call_syntax` set
  // when its calls are reported (Request::tool_call_syntax).
  struct ReplyReading {
    std::optional<HarmonyTokens> harmony;
    std::optional<ToolCallSyntax> tool_call_syntax;
    bool parallel_tool_calls = true;
  };
  OutputProcessor(std::unique_ptr<TokenTextStream> text, std::vector<std::string> stop,
                  ReplyReading reading);

  // Adds one generated token (`stop_token`: EOS or a stop_token_ids entry, which shows no text)
  // and appends the events that became final to `ready`. Returns true when a stop string
  // completed: the request must end now (finish reason kStop); later tokens are not read. An
  // error when the codec cannot decode the token.
  Expected<bool> push(TokenId token, const std::optional<TokenLogprobs>& logprobs, bool stop_token,
                      std::vector<TokenEvent>& ready);
  // The request ends (any reason): whatever is held back goes to `ready`, whose last event then
  // carries the finish (`ready` holds this request's events of the step only; an empty event is
  // added when it has none). The reply's calls go on that event, after the text a text syntax
  // held back.
  void finish(std::vector<TokenEvent>& ready);

  // How many of the generated tokens a session's history keeps: all of them, unless a stop
  // string ended the reply (see above).
  size_t kept_tokens() const { return stopped_ ? kept_tokens_ : pushed_tokens_; }
  // The stop string that ended the reply; nullopt if none did.
  const std::optional<std::string>& matched_stop() const { return matched_stop_; }

 private:
  // A token whose event waits: it wrote content bytes [start, start + text.size()).
  struct Pending {
    TokenEvent event;
    size_t start = 0;
  };
  // Content that became final: through the stop-string matcher (when there are stop strings),
  // then out with the events it releases.
  void add_content(std::string content, std::vector<TokenEvent>& ready);
  // Every waiting event whose text ends at or before `released` (all when nullopt).
  void release(std::optional<size_t> released, std::vector<TokenEvent>& ready);
  // A stop string matched at content byte `at`: out with everything, cut there.
  void cut_at(size_t at, std::vector<TokenEvent>& ready);
  // An event whose text is final goes out (its text through the tool-call reader, if any).
  void emit(TokenEvent event, std::vector<TokenEvent>& ready);
  // The reply ended: its calls (and a text syntax's held-back content) onto `ready`'s last event.
  void finish_tool_calls(std::vector<TokenEvent>& ready);

  std::unique_ptr<TokenTextStream> text_;
  std::optional<StopStringMatcher> stop_;
  std::optional<HarmonyReply> harmony_;
  bool harmony_calls_ = false;               // a harmony reply's calls are reported
  std::optional<ToolCallReply> tool_calls_;  // a text syntax's calls are read
  bool parallel_tool_calls_ = true;
  std::deque<Pending> pending_;
  size_t content_bytes_ = 0;   // content written so far (before any cut)
  size_t released_bytes_ = 0;  // content the matcher has let go
  size_t pushed_tokens_ = 0;
  size_t kept_tokens_ = 0;  // once stopped
  bool stopped_ = false;
  std::optional<std::string> matched_stop_;
};

}  // namespace drift
