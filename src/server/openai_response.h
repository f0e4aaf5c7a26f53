// Response bodies and stream chunks in OpenAI's shapes, for /v1/completions ("text_completion")
// and /v1/chat/completions ("chat.completion", "chat.completion.chunk").
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "util/sampling_params.h"

namespace drift::server {

// Now, in Unix seconds: the "created" field of OpenAI's objects.
int64_t unix_seconds_now();

struct ResponseMeta {
  bool chat = false;
  std::string id;       // "cmpl-..." / "chatcmpl-..."
  int64_t created = 0;  // Unix seconds
  std::string model;
};

// A tool call the model made, as the response carries it.
struct ToolCall {
  std::string id;  // "call_..." (unique per response), which the client's tool message answers
  std::string name;
  std::string arguments;  // a JSON object's text
};
// [{"id", "type": "function", "function": {"name", "arguments"}}], with "index" on each for
// a stream's delta.
nlohmann::json tool_calls_json(std::span<const ToolCall> calls, bool with_index);

struct ChoiceResult {
  int32_t index = 0;
  std::string text;
  std::string finish_reason;  // "stop", "length" or "tool_calls"
  nlohmann::json logprobs;    // null, or logprobs_json(...)
  // Chat with tools: the calls parsed out of the reply (then `text` is the content around them,
  // and an empty content is null, as OpenAI sends it).
  std::vector<ToolCall> tool_calls;
  // Chat with a reasoning reply (harmony): message.reasoning_content, null when empty.
  std::optional<std::string> reasoning_content;
  // The stop string that ended the choice, if one did (Anthropic's stop_sequence).
  std::optional<std::string> stop_string;
  // Of the prompt's tokens, those the prefix cache held (the Responses API's cached_tokens).
  int64_t cached_prompt_tokens = 0;
};

// One generated token's log-probabilities, with the token's text.
struct TokenLogprobEntry {
  int32_t token = 0;
  TokenLogprobs logprobs;
};
using TokenTextFn = std::function<std::string(int32_t)>;

// The "logprobs" of a choice: completions' {"tokens", "token_logprobs", "top_logprobs",
// "text_offset"} (offsets from `text_offset`), or chat's {"content": [{"token", "logprob",
// "bytes", "top_logprobs"}]}.
nlohmann::json logprobs_json(bool chat, std::span<const TokenLogprobEntry> entries,
                             const TokenTextFn& token_text, int64_t text_offset);

nlohmann::json usage_json(int64_t prompt_tokens, int64_t completion_tokens);

// The whole response of a non-streaming request (choices in index order).
nlohmann::json response_json(const ResponseMeta& meta, const std::vector<ChoiceResult>& choices,
                             int64_t prompt_tokens, int64_t completion_tokens);

// One streamed chunk for one choice: `text` (content delta), and for chat the first chunk carries
// the role; `finish_reason` on the choice's last chunk. With include_usage every chunk carries
// "usage": null, as OpenAI sends it, and a last chunk with no choices carries the totals.
nlohmann::json chunk_json(const ResponseMeta& meta, int32_t index, std::string_view text,
                          bool with_role, const std::optional<std::string>& finish_reason,
                          bool include_usage, nlohmann::json logprobs = nullptr);
// A chat stream's chunk whose delta carries reasoning text ({"reasoning_content": text}).
nlohmann::json reasoning_chunk_json(const ResponseMeta& meta, int32_t index, std::string_view text,
                                    bool include_usage, nlohmann::json logprobs = nullptr);
// A chat stream's chunk that carries whole tool calls in its delta.
nlohmann::json tool_calls_chunk_json(const ResponseMeta& meta, int32_t index,
                                     std::span<const ToolCall> calls, bool include_usage);
nlohmann::json usage_chunk_json(const ResponseMeta& meta, int64_t prompt_tokens,
                                int64_t completion_tokens);

// Compact JSON; any invalid UTF-8 would become U+FFFD rather than break the output.
std::string dump_json(const nlohmann::json& j);

}  // namespace drift::server
