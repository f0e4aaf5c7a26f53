// OpenAI request bodies -> validated values. Every field is type-checked and range-checked here,
// with a 400 that names it; fields drift does not implement yet (tools, best_of, ...) are refused
// rather than silently ignored, and other unknown fields are ignored as OpenAI's own server does.
// Nothing here depends on the model: limits that do (context length, vocabulary size) are the
// engine's to check.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "engine/request.h"
#include "server/api_error.h"
#include "server/guided_decoding.h"
#include "util/sampling_params.h"

namespace drift::server {

inline constexpr size_t kMaxPrompts = 32;             // a list of prompts in one completion request
inline constexpr size_t kMaxMessages = 4096;          // messages of one chat request
inline constexpr int32_t kMaxCompletionLogprobs = 5;  // completions' logprobs (as OpenAI)
inline constexpr int32_t kMaxTopLogprobs = 20;        // chat's top_logprobs (as OpenAI)
inline constexpr int32_t kMaxPriority = 1000000;      // |priority|

// Generation settings shared by both endpoints.
struct GenerationOptions {
  std::optional<int32_t> max_tokens;  // max_tokens or max_completion_tokens; >= 1
  // temperature, top_p/k, min_p, penalties, seed, ignore_eos; the fields the body does not give
  // stay unset and take the engine's defaults.
  SamplingSettings sampling;
  int32_t n = 1;                    // in [1, kMaxChoices], the engine's bound (request.h)
  std::vector<std::string> stop;    // the engine judges their number and sizes (request.h)
  std::string stop_param = "stop";  // the body field they came from, named if the engine refuses
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool echo = false;           // completions: the prompt text precedes each choice's text
  // Log-probabilities requested: the number of top alternatives per token (0: only the chosen
  // token's). Absent: none.
  std::optional<int32_t> logprobs;
  // Completions only: continue this conversation session (the prompt is appended to the
  // session's history, whose KV is reused). Absent: no session.
  std::optional<std::string> session_id;
  // Structured output (response_format, guided_*; guided_decoding.h): the grammar the output
  // must follow, and the field it came from. Absent: free text.
  std::optional<OutputConstraint> constraint;
  // vLLM's request priority: lower is handled earlier (default 0). Needs the engine's priority
  // policy (`--policy priority`), which ages it so that no request waits forever.
  int32_t priority = 0;
  // KV-Compress: the fraction (0, 1] of each KV head's entries kept once the sequence is long.
  // Absent: the server's --kv-keep.
  std::optional<double> kv_keep;
};

// A completion prompt: text, or token ids (checked against the vocabulary later).
using PromptInput = std::variant<std::string, std::vector<int32_t>>;

struct CompletionRequest {
  std::optional<std::string> model;
  std::vector<PromptInput> prompts;  // one or more; each gets n choices
  GenerationOptions options;
};

struct ChatRequest {
  std::optional<std::string> model;
  // [{"role", "content"(string)}...]: roles checked, content parts joined into one string; an
  // assistant turn's "reasoning_content" kept.
  std::vector<ChatMessage> messages;
  GenerationOptions options;
  // OpenAI's "low", "medium" or "high": a template variable of that name (gpt-oss's template
  // writes it into the system message; templates that do not read it ignore it).
  std::optional<std::string> reasoning_effort;
};

std::variant<CompletionRequest, ApiError> parse_completion_request(const nlohmann::json& body);
std::variant<ChatRequest, ApiError> parse_chat_request(const nlohmann::json& body);

// /tokenize: {"prompt"|"content": string, "add_special_tokens"?: bool} or {"messages": [...]}.
struct TokenizeRequest {
  std::optional<std::string> prompt;
  std::optional<std::vector<ChatMessage>> messages;  // validated as in a chat request
  bool add_special = true;
};
std::variant<TokenizeRequest, ApiError> parse_tokenize_request(const nlohmann::json& body);

// A session id: 1 to kMaxSessionIdBytes of RFC 3986's unreserved characters (letters, digits,
// '-', '.', '_', '~'), so that every id a turn creates can be named in DELETE /v1/sessions/{id}
// as it is. nullopt if `id` is one; else the 400 (param "session_id") saying which byte is not.
std::optional<ApiError> check_session_id(std::string_view id);

// A URL path segment with its %XX escapes decoded; nullopt if an escape is malformed.
std::optional<std::string> percent_decode(std::string_view segment);

// /detokenize: {"tokens": [int...]}.
std::variant<std::vector<int32_t>, ApiError> parse_detokenize_request(const nlohmann::json& body);

}  // namespace drift::server
