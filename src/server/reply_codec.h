// How a generation's output is written in one API's shape. Generation (generation.h) decides
// what happened — text, reasoning, tool calls, a choice's end, an error — and a ReplyCodec only
// turns each of those into bytes: OpenAI's chunks and bodies (openai_response.h), Anthropic's
// Messages events and body (anthropic_response.h). While streaming, each call returns the SSE
// frames to send (possibly none); otherwise the whole body. Ollama's (ollama_response.h) writes
// NDJSON lines rather than SSE frames. A codec lives as long as its
// generation and may keep state (Anthropic's open content block), so each gets its own.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "server/api_error.h"
#include "server/openai_response.h"

namespace drift::server {

// How a choice ended.
struct ChoiceEnd {
  std::string reason;  // "stop", "length" or "tool_calls": the server's own words (OpenAI's)
  std::optional<std::string> stop_string;  // the stop string that ended it, if one did
  int64_t completion_tokens = 0;
  // Of the prompt's tokens, those the prefix cache held (the engine's count, TokenUsage).
  int64_t cached_prompt_tokens = 0;
};

class ReplyCodec {
 public:
  virtual ~ReplyCodec() = default;

  // The Content-Type of a stream.
  virtual std::string_view stream_content_type() const { return "text/event-stream"; }
  // The first token arrived (streaming or not): a codec that reports timings notes it.
  virtual void first_token() {}

  // The start of a tool call's id ("call_", "toolu_"); random characters follow.
  virtual std::string_view tool_call_id_prefix() const = 0;

  // Streaming. `echoes[i]`: text to put before choice i's output (completions' echo).
  virtual std::string stream_start(std::span<const std::string> echoes, int64_t prompt_tokens) = 0;
  // `logprobs`: the pending tokens' log-probabilities as logprobs_json gives them, or null.
  virtual std::string reasoning_delta(int32_t index, std::string_view text,
                                      nlohmann::json logprobs) = 0;
  virtual std::string content_delta(int32_t index, std::string_view text,
                                    nlohmann::json logprobs) = 0;
  // A choice's calls, each whole, once its reply has ended.
  virtual std::string tool_calls(int32_t index, std::span<const ToolCall> calls) = 0;
  virtual std::string choice_end(int32_t index, const ChoiceEnd& end, nlohmann::json logprobs) = 0;
  // After every choice has ended.
  virtual std::string stream_end(int64_t prompt_tokens, int64_t completion_tokens) = 0;
  // A failure after the stream started: the frames that report it and end the stream.
  virtual std::string stream_error(const ApiError& error) = 0;

  // Not streaming: the whole body, choices in index order.
  virtual std::string response(const std::vector<ChoiceResult>& choices, int64_t prompt_tokens,
                               int64_t completion_tokens) = 0;
  // A failure before anything was sent: the error body (its status is error.status).
  virtual std::string error_body(const ApiError& error) const = 0;
};

}  // namespace drift::server
