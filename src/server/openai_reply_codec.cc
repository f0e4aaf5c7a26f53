#include "server/openai_reply_codec.h"

#include "server/sse.h"

namespace drift::server {

std::string OpenAIReplyCodec::stream_start(std::span<const std::string> echoes,
                                           int64_t /*prompt_tokens*/) {
  // Chat streams open each choice with the assistant role; completions with the echo, if any.
  std::string out;
  for (size_t i = 0; i < echoes.size(); ++i) {
    if (meta_.chat)
      out += sse_event(
          dump_json(chunk_json(meta_, int32_t(i), "", true, std::nullopt, include_usage_)));
    else if (!echoes[i].empty())
      out += sse_event(
          dump_json(chunk_json(meta_, int32_t(i), echoes[i], false, std::nullopt, include_usage_)));
  }
  return out;
}

std::string OpenAIReplyCodec::reasoning_delta(int32_t index, std::string_view text,
                                              nlohmann::json logprobs) {
  return sse_event(
      dump_json(reasoning_chunk_json(meta_, index, text, include_usage_, std::move(logprobs))));
}

std::string OpenAIReplyCodec::content_delta(int32_t index, std::string_view text,
                                            nlohmann::json logprobs) {
  return sse_event(dump_json(
      chunk_json(meta_, index, text, false, std::nullopt, include_usage_, std::move(logprobs))));
}

std::string OpenAIReplyCodec::tool_calls(int32_t index, std::span<const ToolCall> calls) {
  return sse_event(dump_json(tool_calls_chunk_json(meta_, index, calls, include_usage_)));
}

std::string OpenAIReplyCodec::choice_end(int32_t index, const ChoiceEnd& end,
                                         nlohmann::json logprobs) {
  return sse_event(dump_json(
      chunk_json(meta_, index, "", false, end.reason, include_usage_, std::move(logprobs))));
}

std::string OpenAIReplyCodec::stream_end(int64_t prompt_tokens, int64_t completion_tokens) {
  std::string out;
  if (include_usage_)
    out += sse_event(dump_json(usage_chunk_json(meta_, prompt_tokens, completion_tokens)));
  return out + sse_done();
}

// An error event, then [DONE], as OpenAI ends a failed stream.
std::string OpenAIReplyCodec::stream_error(const ApiError& error) {
  return sse_event(error_json(error)) + sse_done();
}

std::string OpenAIReplyCodec::response(const std::vector<ChoiceResult>& choices,
                                       int64_t prompt_tokens, int64_t completion_tokens) {
  return dump_json(response_json(meta_, choices, prompt_tokens, completion_tokens));
}

}  // namespace drift::server
