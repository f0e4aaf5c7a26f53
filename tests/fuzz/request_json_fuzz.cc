// libFuzzer target for what a client's request body goes through before the model sees it: the
// JSON checks (UTF-8, depth, syntax) and every endpoint's schema, OpenAI's (Responses too),
// Anthropic's and Ollama's. Any body must be accepted or refused with a 4xx naming what is wrong;
// nothing may crash, hang or throw, and an error message must serialize as valid JSON (it may quote
// the client's bytes).
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "server/anthropic_response.h"
#include "server/anthropic_schema.h"
#include "server/api_error.h"
#include "server/embedding_schema.h"
#include "server/ollama_response.h"
#include "server/ollama_schema.h"
#include "server/openai_schema.h"
#include "server/request_json.h"
#include "server/responses_schema.h"

namespace {

void check_error(const drift::server::ApiError& e) {
  if (e.status < 400 || e.status > 499 || e.message.empty()) abort();
  // Throws (and so aborts the fuzzer) if the message made the body invalid.
  (void)nlohmann::json::parse(drift::server::error_json(e));
  (void)nlohmann::json::parse(drift::server::anthropic_error_json(e));
  (void)nlohmann::json::parse(drift::server::ollama_error_json(e));
}

template <typename T>
void check(const std::variant<T, drift::server::ApiError>& result) {
  if (auto* e = std::get_if<drift::server::ApiError>(&result)) check_error(*e);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  // Anthropic's parser takes the body itself (it keeps the client's key order).
  check(drift::server::parse_anthropic_request(body, drift::server::AnthropicEndpoint::kMessages));
  check(
      drift::server::parse_anthropic_request(body, drift::server::AnthropicEndpoint::kCountTokens));
  // So do Ollama's.
  using drift::server::OllamaEndpoint;
  check(drift::server::parse_ollama_generate_request(body, OllamaEndpoint::kChat));
  check(drift::server::parse_ollama_generate_request(body, OllamaEndpoint::kGenerate));
  check(drift::server::parse_ollama_embed_request(body, /*legacy=*/false));
  check(drift::server::parse_ollama_embed_request(body, /*legacy=*/true));
  check(drift::server::parse_ollama_show_request(body));
  // And the Responses API's; a conversation it reads is also checked as a continuation would be.
  auto responses = drift::server::parse_responses_request(body);
  check(responses);
  if (auto* r = std::get_if<drift::server::ResponsesRequest>(&responses))
    if (auto e = drift::server::check_tool_outputs(r->messages)) check_error(*e);
  auto parsed = drift::server::parse_request_json(body);
  if (auto* e = std::get_if<drift::server::ApiError>(&parsed)) {
    check_error(*e);
    return 0;
  }
  const nlohmann::json& json = std::get<nlohmann::json>(parsed);
  check(drift::server::parse_completion_request(json));
  check(drift::server::parse_chat_request(json));
  check(drift::server::parse_tokenize_request(json));
  check(drift::server::parse_detokenize_request(json));
  check(drift::server::parse_embedding_request(json));
  if (auto* s = json.find("session_id") != json.end() && json["session_id"].is_string()
                    ? &json["session_id"].get_ref<const std::string&>()
                    : nullptr) {
    if (auto e = drift::server::check_session_id(*s)) check_error(*e);
  }
  return 0;
}
