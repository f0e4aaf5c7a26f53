// The OpenAI-compatible API over one engine, and Anthropic's Messages API and Ollama's API over the
// same request path (anthropic_endpoints.cc, ollama_endpoints.cc: only their shapes differ):
// routing, the API key, the served model's name, and the non-generating endpoints (/health,
// /metrics, /v1/models, /tokenize, /detokenize), the engine view's event stream and the web page's
// files (web_ui.h). Generating requests become Generations (generation.h). The engine alone shapes
// and checks a prompt (tokenization, chat template, BOS, vocabulary, context): the service hands it
// text, conversations or ids and maps its refusals (rejection_error.h). Runs on the I/O thread
// only.
//
// Errors come in the route's API's shape (Anthropic's under /v1/messages, Ollama's under /api/,
// OpenAI's elsewhere).
// Status codes: 400 invalid request, 401 bad or missing key (all routes but /health and the web
// page's files), 404 unknown route or model, 405 wrong method, 413/431 (HTTP layer), 429 +
// Retry-After when the engine is overloaded, 503 + Retry-After while loading or draining, 500
// only for internal faults.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "engine/engine.h"
#include "server/anthropic_schema.h"
#include "server/api_error.h"
#include "server/embedding_run.h"
#include "server/engine_events.h"
#include "server/generation.h"
#include "server/http_server.h"
#include "server/model_card.h"
#include "server/ollama_schema.h"
#include "server/openai_schema.h"
#include "server/reply_codec.h"
#include "server/response_store.h"
#include "server/tool_request.h"
#include "tokenizer/prompt_bound.h"

namespace boost::asio {
class io_context;
class thread_pool;
}  // namespace boost::asio

namespace drift::server {

struct ServiceConfig {
  std::string served_model_name;
  std::optional<std::string> api_key;
  // How /v1/embeddings pools a prompt's final hidden states (--pooling).
  PoolingMode pooling = PoolingMode::kMean;
  // The web page (web_ui.h) at "/" and "/engine"; --no-webui turns it off (404).
  bool web_ui = true;
  // The Responses API's stored responses (response_store.h): --responses-max-count, ...
  ResponseStoreLimits responses;
};

// What the service serves once the model is loaded: the engine, which also tokenizes (with the
// model's chat template, --chat-template, or the ChatML fallback).
struct LoadedModel {
  std::unique_ptr<Engine> engine;
  ModelCard card;  // what Ollama's listings say of it
};

// The endpoints, each with its path and method (openai_service.cc's route table).
enum class Route : uint8_t {
  kHealth,
  kMetrics,
  kModels,
  kTokenize,
  kDetokenize,
  kCompletions,
  kChatCompletions,
  kEmbeddings,
  kEngineEvents,
  kResetPrefixCache,
  kAnthropicMessages,
  kAnthropicCountTokens,
  kOllamaChat,
  kOllamaGenerate,
  kOllamaEmbed,
  kOllamaEmbeddings,
  kOllamaTags,
  kOllamaShow,
  kOllamaPs,
  kOllamaVersion,
  kResponses,
};

// A generating request once its body is parsed: the model it names, its options, and each distinct
// prompt as the engine will get it, with the text echoed before its choices.
struct GenerationRequest {
  bool chat = false;
  std::optional<std::string> model;
  GenerationOptions options;
  struct PromptEntry {
    Prompt prompt;
    std::string echo;
    // A session turn's prompt, tokenized on the prompt worker (Request::tokenized); `prompt`
    // stays, for the engine to encode again if the session changed before submit.
    std::optional<TokenizedTurn> tokenized;
  };
  std::vector<PromptEntry> prompts;
  // Chat with tools offered (tool_choice not "none"): the model's call syntax, to read replies.
  std::optional<ToolCallSyntax> tool_call_syntax;
  bool parallel_tool_calls = true;
  // Chat with a harmony model (gpt-oss): the engine reads its replies by their markers.
  bool harmony = false;
  // The response id's start ("chatcmpl-", "cmpl-", "msg_").
  std::string id_prefix;
  // The API shape of the response, given its id and model; OpenAI's when unset.
  std::function<std::shared_ptr<ReplyCodec>(const ResponseMeta&)> codec;
  // Set when the request is answered with this body and generates nothing (Ollama's request
  // with no prompt, which loads the model).
  std::optional<std::string> immediate_reply;
};

class OpenAIService {
 public:
  OpenAIService(boost::asio::io_context& io, ServiceConfig config);
  ~OpenAIService();

  void handle(HttpRequest request, std::shared_ptr<HttpExchange> exchange);

  // Loading -> ready -> draining; /health answers 503 except when ready.
  void set_ready(std::shared_ptr<LoadedModel> model);
  void set_draining();
  // The HTTP layer's counters, for /metrics.
  void set_http_counters(std::function<HttpCounters()> counters);
  int64_t active_generations() const { return active_generations_; }
  // Requests the server cancelled while draining (queued ones refused, started ones cut at the
  // drain timeout), and the tokens they had generated.
  struct CutSummary {
    uint64_t requests = 0;
    uint64_t before_first_token = 0;
    uint64_t tokens = 0;
  };
  CutSummary cut_by_shutdown() const { return cut_by_shutdown_; }

 private:
  void route(const HttpRequest& request, const std::shared_ptr<HttpExchange>& exchange);
  // The handler of a route found, checked (method, key, readiness) and not answered by route().
  void dispatch(Route route, const HttpRequest& request,
                const std::shared_ptr<HttpExchange>& exchange);
  void health(const HttpRequest& request, const std::shared_ptr<HttpExchange>& exchange);
  void metrics(const HttpRequest& request, const std::shared_ptr<HttpExchange>& exchange);
  void models(const HttpRequest& request, const std::shared_ptr<HttpExchange>& exchange);
  void tokenize(const HttpRequest& request, const std::shared_ptr<HttpExchange>& exchange);
  // DELETE /v1/sessions/{id}[?kill=true]: ends a conversation session (and with kill, cancels
  // its running turn).
  void delete_session(const HttpRequest& request, const std::shared_ptr<HttpExchange>& exchange);
  // POST /reset_prefix_cache (vLLM's): evicts every cached page no request holds.
  void reset_prefix_cache(const HttpRequest& request,
                          const std::shared_ptr<HttpExchange>& exchange);
  void detokenize(const HttpRequest& request, const std::shared_ptr<HttpExchange>& exchange);
  // GET /v1/engine/events: the live view's stream of engine snapshots (engine_events.h).
  void engine_events(const HttpRequest& request, const std::shared_ptr<HttpExchange>& exchange);
  // GET "/", "/engine", "/web/...": the web page's files, when the page is on.
  bool serve_web_page(const HttpRequest& request, const std::shared_ptr<HttpExchange>& exchange);
  // A generating request of any API, `parse` reading its body (on a prompt worker).
  using GenerationParser =
      std::function<std::variant<GenerationRequest, ApiError>(const std::string& body)>;
  void completions(const HttpRequest& request, const std::shared_ptr<HttpExchange>& exchange,
                   GenerationParser parse);
  // Anthropic's Messages API (anthropic_endpoints.cc): a body read into the chat request the
  // OpenAI chat endpoint makes (anthropic_schema.h), and /v1/messages/count_tokens, the same
  // request's prompt tokens.
  std::variant<GenerationRequest, ApiError> parse_anthropic_messages(
      const std::string& body, AnthropicEndpoint endpoint) const;
  void anthropic_count_tokens(const HttpRequest& request,
                              const std::shared_ptr<HttpExchange>& exchange);
  // OpenAI's Responses API (responses_endpoints.cc): POST /v1/responses read into the chat request
  // (a stored previous response's conversation first) with the Responses codec, which stores it;
  // GET and DELETE /v1/responses/{id}.
  std::variant<GenerationRequest, ApiError> parse_responses(const std::string& body) const;
  void response_by_id(const HttpRequest& request, const std::shared_ptr<HttpExchange>& exchange);
  // Ollama's API (ollama_endpoints.cc): /api/chat and /api/generate as chat requests with
  // Ollama's codec (ollama_response.h), /api/embed and /api/embeddings as embedding runs, and the
  // listings of the one model (/api/tags, /api/show, /api/ps, /api/version).
  void ollama(Route route, const HttpRequest& request,
              const std::shared_ptr<HttpExchange>& exchange);
  std::variant<GenerationRequest, ApiError> parse_ollama_generation(
      const std::string& body, OllamaEndpoint endpoint,
      std::chrono::steady_clock::time_point received) const;
  std::variant<ApiError, EmbeddingSpec> prepare_ollama_embed(
      const std::string& body, bool legacy, std::chrono::steady_clock::time_point received) const;
  // The served model's Ollama name, with its tag ("smollm2:latest"); a 404 for another name.
  std::string ollama_model_name() const;
  std::optional<ApiError> check_ollama_model(std::string_view name) const;
  // Refuses options.num_ctx larger than the server's context.
  std::optional<ApiError> check_num_ctx(const std::optional<int64_t>& num_ctx) const;
  void ollama_show(const HttpRequest& request, const std::shared_ptr<HttpExchange>& exchange);
  // POST /v1/embeddings and /api/embed: `prepare` parses the body, checks the model and sizes and
  // tokenizes the inputs (on a prompt worker), then they run through the engine (embedding_run.h).
  using EmbeddingPreparer =
      std::function<std::variant<ApiError, EmbeddingSpec>(const std::string& body)>;
  void embeddings(const HttpRequest& request, const std::shared_ptr<HttpExchange>& exchange,
                  EmbeddingPreparer prepare);
  std::variant<ApiError, EmbeddingSpec> prepare_embeddings(const std::string& body) const;
  // Refuses a requested embedding size other than the model's (both APIs' "dimensions").
  std::optional<ApiError> check_embedding_dimensions(
      const std::optional<int64_t>& dimensions) const;
  // The steps of completions, in order; the first three run on a prompt worker (they read only
  // the immutable configuration and the thread-safe engine), the last two on the I/O thread.
  std::variant<GenerationRequest, ApiError> parse_generation_request(const std::string& body,
                                                                     bool chat) const;
  std::optional<ApiError> check_model_name(const std::optional<std::string>& model) const;
  // A chat request's tools, tool_choice, earlier tool calls and chat_template_kwargs, read from
  // `body` with its key order kept, into `prompt` and `out`.
  std::optional<ApiError> read_tool_fields(const std::string& body, const nlohmann::json& parsed,
                                           GenerationRequest& out, ChatPrompt& prompt) const;
  // Offers a request's tools (parsed from either API's shape) to the model: the prompt shows
  // them, the model's call syntax reads the replies, and a grammar holds a demanded call.
  std::optional<ApiError> use_tools(ToolRequest tools, GenerationRequest& out,
                                    ChatPrompt& prompt) const;
  // Refuses a text that cannot fit the context from its size alone, then tokenizes the prompts
  // (a session turn's as the session stands: the engine checks that at submit), so that the I/O
  // thread never tokenizes a large prompt.
  std::optional<ApiError> prepare_prompts(GenerationRequest& request) const;
  // Compiles the request's grammar (its checks may take GrammarLimits' budget), so that the
  // engine's submit on the I/O thread only clones it; a grammar the engine refuses is a 400
  // naming its field.
  std::optional<ApiError> compile_output_constraint(GenerationRequest& request) const;
  // The engine requests of a parsed request (the engine's fan_out_choices makes its n choices).
  std::variant<ApiError, GenerationSpec> generation_spec(GenerationRequest parsed);
  void start_generation(const HttpRequest& request, const std::shared_ptr<HttpExchange>& exchange,
                        GenerationSpec spec);

  // Runs `work(request.body)` on a prompt worker, then on the I/O thread answers its ApiError,
  // or passes its value to `then(request, exchange, value)`.
  template <typename Work, typename Then>
  void off_io_thread(const HttpRequest& request, const std::shared_ptr<HttpExchange>& exchange,
                     Work work, Then then);

  void reply_json(const HttpRequest& request, const std::shared_ptr<HttpExchange>& exchange,
                  int status, std::string body);
  void reply_error(const HttpRequest& request, const std::shared_ptr<HttpExchange>& exchange,
                   const ApiError& error);
  bool authorized(const HttpRequest& request) const;
  // A response id nobody can guess from another's: `prefix` and 16 hex digits.
  std::string next_response_id(std::string_view prefix);

  boost::asio::io_context& io_;
  const ServiceConfig config_;
  std::shared_ptr<LoadedModel> model_;
  PromptBound prompt_bound_{0};  // from the engine's vocabulary
  std::unique_ptr<boost::asio::thread_pool> prompt_workers_;
  bool draining_ = false;
  std::function<HttpCounters()> http_counters_;
  EngineEvents engine_events_;
  int64_t active_generations_ = 0;
  uint64_t client_disconnects_ = 0;
  CutSummary cut_by_shutdown_;
  uint64_t stop_string_matches_ = 0;
  uint64_t next_completion_id_ = 1;
  std::shared_ptr<ResponseStore> responses_;
};

// Compares the Authorization header with "Bearer <key>" in time independent of where they
// differ (only of their lengths).
bool api_key_matches(std::string_view authorization, std::string_view key);
// Compares a key sent as it is (Anthropic's x-api-key header) with the key, the same way.
bool raw_api_key_matches(std::string_view given, std::string_view key);

// Anthropic's routes (/v1/messages and below), which answer in Anthropic's shapes.
bool is_anthropic_path(std::string_view path);
// A stored response's route (/v1/responses/{id}).
bool is_response_path(std::string_view path);
// Ollama's routes (/api/...), which answer errors as {"error": "..."}.
bool is_ollama_path(std::string_view path);

}  // namespace drift::server
