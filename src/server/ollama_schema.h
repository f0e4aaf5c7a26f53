// Ollama API request bodies (POST /api/chat, /api/generate, /api/embed, /api/embeddings,
// /api/show) -> the server's requests. Chat messages become ChatMessages (an assistant turn's
// `tool_calls` with their arguments as objects, `thinking` as its reasoning_content; a tool turn
// answers the latest call of its `tool_name`), `tools` are OpenAI tool objects (Ollama's own
// shape) read by the chat endpoint's reader, `options` are the sampling settings, `format` ("json"
// or a JSON schema) the output constraint. A generate request is a conversation of its `system`
// and `prompt`, or with `raw` the prompt text itself.
//
// The body is read with its key order kept (jinja::Json), because templates print tool schemas
// and call arguments in the client's order. Every problem is a 400 naming the field; so are the
// fields a text-only local server cannot honour (images, a Go `template`, `context`, `suffix`),
// and unknown options (Ollama only logs those; a silently dropped option is a wrong answer).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "engine/request.h"
#include "jinja/json.h"
#include "server/api_error.h"
#include "server/openai_schema.h"
#include "server/tool_request.h"

namespace drift::server {

enum class OllamaEndpoint {
  kChat,      // /api/chat: messages, tools
  kGenerate,  // /api/generate: prompt, system, raw
};

// `think`: true or false, or a reasoning effort ("low", "medium", "high").
struct OllamaThink {
  bool enabled = true;
  std::optional<std::string> effort;
};

struct OllamaGenerateRequest {
  std::string model;
  OllamaEndpoint endpoint = OllamaEndpoint::kChat;
  std::vector<ChatMessage> messages;      // chat, or generate's system and prompt
  std::optional<std::string> raw_prompt;  // generate with raw: the text, no template
  ToolRequest tools;                      // chat's `tools` (tool_choice is always "auto")
  GenerationOptions options;              // num_predict, sampling, stop, format, stream
  std::optional<OllamaThink> think;
  // options.num_ctx: the context the client wants; the server's must hold it.
  std::optional<int64_t> num_ctx;
  // No prompt (generate) or no messages (chat): Ollama's way to load a model, answered at once.
  bool load_only = false;
};

std::variant<OllamaGenerateRequest, ApiError> parse_ollama_generate_request(
    std::string_view body, OllamaEndpoint endpoint);

struct OllamaEmbedRequest {
  std::string model;
  std::vector<std::string> inputs;  // 1 to kMaxEmbeddingInputs
  bool truncate = true;             // cut an input that is longer than the context
  std::optional<int64_t> dimensions;
  bool legacy = false;  // /api/embeddings: {"prompt"} in, {"embedding"} out
  std::optional<int64_t> num_ctx;
};

// /api/embed ({"input": string or strings}) or, with `legacy`, /api/embeddings ({"prompt"}).
std::variant<OllamaEmbedRequest, ApiError> parse_ollama_embed_request(std::string_view body,
                                                                      bool legacy);

// /api/show: {"model"} (or the older "name"), "verbose" accepted.
std::variant<std::string, ApiError> parse_ollama_show_request(std::string_view body);

// An Ollama model name without its ":latest" tag, which every name has when none is written.
std::string_view ollama_base_name(std::string_view name);

}  // namespace drift::server
