// Ollama's shapes for what a generation produced (reply_codec.h) and for its model listings.
//
// A reply streams as NDJSON (application/x-ndjson): one JSON object per line, each a fragment
// ({"model", "created_at", "message": {"role": "assistant", "content", "thinking"?,
// "tool_calls"?}, "done": false} for /api/chat; "response" and "thinking" for /api/generate),
// then a last line with "done": true, "done_reason" and the counts and durations. Not streaming,
// the body is that last line with the whole text. A failure is {"error": "..."}: the body of a
// 4xx/5xx, or a stream's last line.
//
// Durations are in nanoseconds, measured from the request's arrival: load_duration until the
// engine has the request (reading the body, rendering and tokenizing the prompt: the model itself
// is loaded once, at start), prompt_eval_duration until the first token, eval_duration from
// there to the end; they add up to total_duration.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "server/model_card.h"
#include "server/ollama_schema.h"
#include "server/reply_codec.h"

namespace drift::server {

std::string ollama_error_json(const ApiError& error);

// RFC 3339 in UTC with nanoseconds, as Ollama writes created_at.
std::string ollama_timestamp(std::chrono::system_clock::time_point t);

class OllamaReplyCodec final : public ReplyCodec {
 public:
  // `model`: the name the client asked for, which Ollama's replies echo. show_thinking: the
  // reasoning goes out ("think" not false).
  OllamaReplyCodec(OllamaEndpoint endpoint, std::string model, bool show_thinking,
                   std::chrono::steady_clock::time_point received);

  std::string_view stream_content_type() const override { return "application/x-ndjson"; }
  void first_token() override;
  std::string_view tool_call_id_prefix() const override { return "call_"; }
  std::string stream_start(std::span<const std::string> echoes, int64_t prompt_tokens) override;
  std::string reasoning_delta(int32_t index, std::string_view text,
                              nlohmann::json logprobs) override;
  std::string content_delta(int32_t index, std::string_view text, nlohmann::json logprobs) override;
  std::string tool_calls(int32_t index, std::span<const ToolCall> calls) override;
  std::string choice_end(int32_t index, const ChoiceEnd& end, nlohmann::json logprobs) override;
  std::string stream_end(int64_t prompt_tokens, int64_t completion_tokens) override;
  std::string stream_error(const ApiError& error) override;
  std::string response(const std::vector<ChoiceResult>& choices, int64_t prompt_tokens,
                       int64_t completion_tokens) override;
  std::string error_body(const ApiError& error) const override { return ollama_error_json(error); }

 private:
  // A line's common fields and its text: message.content/thinking or response/thinking.
  nlohmann::json fragment(std::string_view content, std::string_view thinking) const;
  // `fragment` with done, done_reason, counts and durations.
  nlohmann::json last(nlohmann::json line, int64_t prompt_tokens, int64_t completion_tokens);

  OllamaEndpoint endpoint_;
  std::string model_;
  bool show_thinking_;
  std::chrono::steady_clock::time_point received_;
  std::chrono::steady_clock::time_point submitted_;  // the codec is made as the engine gets it
  std::optional<std::chrono::steady_clock::time_point> first_token_;
  std::string done_reason_ = "stop";
};

// The answer to a load-only request (no prompt, no messages): done at once, "done_reason": "load".
std::string ollama_load_reply(OllamaEndpoint endpoint, std::string_view model);

// Listings of the one model the server serves, named `name` (with its tag, "smollm2:latest").
// `context_length`: the server's max_model_len; `capabilities`: "completion", "tools", ...
nlohmann::json ollama_tags_json(std::string_view name, const ModelCard& card);
nlohmann::json ollama_ps_json(std::string_view name, const ModelCard& card, int64_t context_length);
nlohmann::json ollama_show_json(const ModelCard& card, int64_t context_length,
                                const std::vector<std::string>& capabilities);

}  // namespace drift::server
