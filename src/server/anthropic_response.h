// Anthropic's Messages shapes for what a generation produced (reply_codec.h): the message body
// ({"id": "msg_...", "type": "message", "content": [thinking?, text?, tool_use...],
// "stop_reason", "stop_sequence", "usage"}), the streamed events (message_start, ping, then per
// content block content_block_start / _delta / _stop, then message_delta and message_stop, each
// SSE frame with an `event:` line naming its type), and the error body ({"type": "error",
// "error": {"type", "message"}}).
//
// The engine's reply parts map to blocks: reasoning (a harmony model's analysis channel) to a
// `thinking` block (thinking_delta), content to a `text` block (text_delta), each tool call to a
// `tool_use` block whose input streams as one input_json_delta (calls are read whole at the
// reply's end). A block opens at its first delta and closes when another kind starts.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "server/reply_codec.h"

namespace drift::server {

// Anthropic's error type for an HTTP status (400 invalid_request_error, 401
// authentication_error, 404 not_found_error, 429 rate_limit_error, 503 overloaded_error, ...).
std::string_view anthropic_error_type(int status);
std::string anthropic_error_json(const ApiError& error);

// "end_turn", "max_tokens", "stop_sequence" or "tool_use".
std::string_view anthropic_stop_reason(std::string_view reason, bool stopped_by_string);

class AnthropicReplyCodec final : public ReplyCodec {
 public:
  // show_thinking: reasoning becomes thinking blocks (else it is left out).
  AnthropicReplyCodec(std::string id, std::string model, bool show_thinking)
      : id_(std::move(id)), model_(std::move(model)), show_thinking_(show_thinking) {}

  std::string_view tool_call_id_prefix() const override { return "toolu_"; }
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
  std::string error_body(const ApiError& error) const override {
    return anthropic_error_json(error);
  }

 private:
  enum class Block { kNone, kThinking, kText };
  // Closes the open block unless it is of `kind`, then opens one of `kind` if none is open.
  std::string open_block(Block kind);
  std::string close_block();

  std::string id_;
  std::string model_;
  bool show_thinking_;
  Block open_ = Block::kNone;
  int32_t next_block_ = 0;  // the index the next content block gets
};

}  // namespace drift::server
