// The ReplyCodec of /v1/completions and /v1/chat/completions: OpenAI's chunks ("data: {...}"
// frames ending with "data: [DONE]") and bodies (openai_response.h), OpenAI's error shape.
#pragma once

#include "server/openai_response.h"
#include "server/reply_codec.h"

namespace drift::server {

class OpenAIReplyCodec final : public ReplyCodec {
 public:
  // include_usage: stream_options.include_usage (every chunk carries "usage", a last one the
  // totals).
  OpenAIReplyCodec(ResponseMeta meta, bool include_usage)
      : meta_(std::move(meta)), include_usage_(include_usage) {}

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
  std::string error_body(const ApiError& error) const override { return error_json(error); }

 private:
  ResponseMeta meta_;
  bool include_usage_;
};

}  // namespace drift::server
