#include "server/openai_service.h"

#include <fmt/format.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <cctype>
#include <chrono>
#include <cmath>
#include <random>
#include <type_traits>

#include "server/anthropic_response.h"
#include "server/api_error.h"
#include "server/embedding_schema.h"
#include "server/generation.h"
#include "server/guided_decoding.h"
#include "server/off_io_thread.h"
#include "server/ollama_response.h"
#include "server/openai_response.h"
#include "server/openai_schema.h"
#include "server/prometheus_metrics.h"
#include "server/rejection_error.h"
#include "server/request_json.h"
#include "server/tool_call_grammar.h"
#include "server/tool_request.h"
#include "server/web_ui.h"
#include "util/log.h"
#include "util/signal_stack.h"

namespace drift::server {

using nlohmann::json;

// "Bearer <key>": the scheme is case-insensitive (RFC 9110 11.1), the key compared in constant
// time.
bool api_key_matches(std::string_view authorization, std::string_view key) {
  constexpr std::string_view kScheme = "bearer ";
  bool scheme_ok = authorization.size() >= kScheme.size();
  for (size_t i = 0; scheme_ok && i < kScheme.size(); ++i)
    scheme_ok = std::tolower(static_cast<unsigned char>(authorization[i])) == kScheme[i];
  const std::string_view given = scheme_ok ? authorization.substr(kScheme.size()) : "";
  return raw_api_key_matches(given, key) && scheme_ok;
}

bool raw_api_key_matches(std::string_view given, std::string_view key) {
  const size_t n = std::max(given.size(), key.size());
  size_t diff = given.size() ^ key.size();
  for (size_t i = 0; i < n; ++i) {
    const unsigned char a = i < given.size() ? given[i] : 0;
    const unsigned char b = i < key.size() ? key[i] : 0;
    diff |= size_t(a ^ b);
  }
  return diff == 0;
}

bool is_anthropic_path(std::string_view path) {
  return path == "/v1/messages" || path.starts_with("/v1/messages/");
}

bool is_ollama_path(std::string_view path) { return path.starts_with("/api/"); }

namespace {

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

std::string_view path_of(std::string_view target) { return target.substr(0, target.find('?')); }

constexpr std::string_view kSessionsPrefix = "/v1/sessions/";

// True if the target's query has `name=true` (or `name=1`).
bool query_flag(std::string_view target, std::string_view name) {
  const size_t q = target.find('?');
  if (q == std::string_view::npos) return false;
  std::string_view query = target.substr(q + 1);
  while (!query.empty()) {
    const size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    if (pair == fmt::format("{}=true", name) || pair == fmt::format("{}=1", name)) return true;
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return false;
}

// One line per request, with the fields log shippers index (`--log-format json`).
void access_log(const HttpRequest& r, int status, int64_t prompt_tokens, int64_t completion_tokens,
                std::optional<double> ttft) {
  log_event(spdlog::level::info, "access",
            {{"request_id", r.request_id},
             {"id", int64_t(r.id)},
             {"method", r.method},
             {"path", path_of(r.target)},
             {"status", int64_t(status)},
             {"prompt_tokens", prompt_tokens},
             {"completion_tokens", completion_tokens},
             {"ttft_ms", ttft ? *ttft * 1e3 : -1.0},
             {"e2e_ms", seconds_since(r.received) * 1e3}});
}

}  // namespace

std::string OpenAIService::next_response_id(std::string_view prefix) {
  static const uint64_t salt = std::random_device{}() * 0x9E3779B97F4A7C15ull;
  const uint64_t serial = next_completion_id_++;
  return fmt::format("{}{:016x}", prefix, (serial + 1) * 0xBF58476D1CE4E5B9ull ^ salt);
}

// Two prompt workers: one huge prompt does not hold up the next request's, and the engine's
// compute threads keep the cores.
OpenAIService::OpenAIService(boost::asio::io_context& io, ServiceConfig config)
    : io_(io),
      config_(std::move(config)),
      prompt_workers_(std::make_unique<boost::asio::thread_pool>(2)),
      engine_events_(io) {}

OpenAIService::~OpenAIService() {
  // Queued prompt jobs are dropped (their connections are going too); a running one finishes.
  prompt_workers_->stop();
  prompt_workers_->join();
}

void OpenAIService::set_ready(std::shared_ptr<LoadedModel> model) {
  const Engine& engine = *model->engine;
  prompt_bound_ = PromptBound::from_texts(engine.vocab_size(),
                                          [&](int32_t id) { return engine.token_text(id); });
  prompt_bound_.find_dropped_ascii([&](const std::string& text) {
    return engine.codec().encode(TextPrompt{text, /*add_special=*/false}).size();
  });
  model_ = std::move(model);
}

void OpenAIService::set_draining() {
  draining_ = true;
  engine_events_.end_all();  // open-ended streams would hold their connections past the drain
}
void OpenAIService::set_http_counters(std::function<HttpCounters()> counters) {
  http_counters_ = std::move(counters);
}

void OpenAIService::reply_json(const HttpRequest& request,
                               const std::shared_ptr<HttpExchange>& exchange, int status,
                               std::string body) {
  exchange->respond(status, "application/json", std::move(body));
  access_log(request, status, 0, 0, std::nullopt);
}

void OpenAIService::reply_error(const HttpRequest& request,
                                const std::shared_ptr<HttpExchange>& exchange,
                                const ApiError& error) {
  HttpExchange::Headers headers;
  if (error.retry_after_seconds)
    headers.emplace_back("Retry-After", std::to_string(*error.retry_after_seconds));
  const std::string_view path = path_of(request.target);
  exchange->respond(error.status, "application/json",
                    is_anthropic_path(path) ? anthropic_error_json(error)
                    : is_ollama_path(path)  ? ollama_error_json(error)
                                            : error_json(error),
                    headers);
  spdlog::debug("request {} refused: {}", request.id, error.message);
  access_log(request, error.status, 0, 0, std::nullopt);
}

bool OpenAIService::authorized(const HttpRequest& request) const {
  if (!config_.api_key || api_key_matches(request.authorization, *config_.api_key)) return true;
  return is_anthropic_path(path_of(request.target)) && !request.x_api_key.empty() &&
         raw_api_key_matches(request.x_api_key, *config_.api_key);
}

void OpenAIService::handle(HttpRequest request, std::shared_ptr<HttpExchange> exchange) {
  try {
    route(request, exchange);
  } catch (const std::exception& e) {
    // A bug, or memory exhausted: the client gets a 500, the server goes on.
    spdlog::error("request {} {}: internal error: {}", request.id, request.target, e.what());
    reply_error(request, exchange, internal_error(fmt::format("internal error: {}", e.what())));
  }
}

void OpenAIService::route(const HttpRequest& request,
                          const std::shared_ptr<HttpExchange>& exchange) {
  const std::string_view path = path_of(request.target);
  struct Entry {
    std::string_view path;
    std::string_view method;
    Route route;
  };
  static constexpr Entry kRoutes[] = {
      {"/health", "GET", Route::kHealth},
      {"/metrics", "GET", Route::kMetrics},
      {"/v1/models", "GET", Route::kModels},
      {"/tokenize", "POST", Route::kTokenize},
      {"/detokenize", "POST", Route::kDetokenize},
      {"/v1/completions", "POST", Route::kCompletions},
      {"/v1/chat/completions", "POST", Route::kChatCompletions},
      {"/v1/embeddings", "POST", Route::kEmbeddings},
      {"/v1/engine/events", "GET", Route::kEngineEvents},
      {"/reset_prefix_cache", "POST", Route::kResetPrefixCache},
      {"/v1/messages", "POST", Route::kAnthropicMessages},
      {"/v1/messages/count_tokens", "POST", Route::kAnthropicCountTokens},
      {"/api/chat", "POST", Route::kOllamaChat},
      {"/api/generate", "POST", Route::kOllamaGenerate},
      {"/api/embed", "POST", Route::kOllamaEmbed},
      {"/api/embeddings", "POST", Route::kOllamaEmbeddings},
      {"/api/tags", "GET", Route::kOllamaTags},
      {"/api/show", "POST", Route::kOllamaShow},
      {"/api/ps", "GET", Route::kOllamaPs},
      {"/api/version", "GET", Route::kOllamaVersion},
  };
  // The web page's files need no key: the page asks for it and sends it with its API calls.
  if (serve_web_page(request, exchange)) return;
  if (path.starts_with(kSessionsPrefix)) {
    if (request.method != "DELETE") {
      ApiError e = bad_request(fmt::format("{} takes DELETE, not {}", path, request.method));
      e.status = 405;
      return reply_error(request, exchange, e);
    }
    if (!authorized(request)) return reply_error(request, exchange, unauthorized());
    if (!model_) return reply_error(request, exchange, unavailable("the model is still loading"));
    return delete_session(request, exchange);
  }
  const Entry* entry = nullptr;
  for (const Entry& e : kRoutes)
    if (e.path == path) entry = &e;
  if (!entry) return reply_error(request, exchange, not_found(fmt::format("no route {}", path)));
  // HEAD is GET without the body (the HTTP layer drops it), RFC 9110 9.3.2.
  const bool head_of_get = request.method == "HEAD" && entry->method == "GET";
  if (request.method != entry->method && !head_of_get) {
    ApiError e =
        bad_request(fmt::format("{} takes {}, not {}", path, entry->method, request.method));
    e.status = 405;
    return reply_error(request, exchange, e);
  }
  // Rule: /health answers anyone; the rest need the key; what needs the engine needs it ready.
  if (entry->route == Route::kHealth) return health(request, exchange);
  if (!authorized(request)) {
    ApiError e = unauthorized();
    if (is_anthropic_path(path))
      e.message = "invalid or missing API key: send the header 'x-api-key: <key>'";
    return reply_error(request, exchange, e);
  }
  if (entry->route == Route::kMetrics) return metrics(request, exchange);
  if (entry->route == Route::kModels) return models(request, exchange);
  if (!model_)
    return reply_error(
        request, exchange,
        unavailable(draining_ ? "the server is shutting down" : "the model is still loading"));
  if (draining_) return reply_error(request, exchange, unavailable("the server is shutting down"));
  switch (entry->route) {
    case Route::kTokenize:
      return tokenize(request, exchange);
    case Route::kDetokenize:
      return detokenize(request, exchange);
    case Route::kCompletions:
    case Route::kChatCompletions: {
      const bool chat = entry->route == Route::kChatCompletions;
      return completions(request, exchange, [this, chat](const std::string& body) {
        return parse_generation_request(body, chat);
      });
    }
    case Route::kAnthropicMessages:
      return completions(request, exchange, [this](const std::string& body) {
        return parse_anthropic_messages(body, AnthropicEndpoint::kMessages);
      });
    case Route::kAnthropicCountTokens:
      return anthropic_count_tokens(request, exchange);
    case Route::kEmbeddings:
      return embeddings(request, exchange,
                        [this](const std::string& body) { return prepare_embeddings(body); });
    case Route::kOllamaChat:
    case Route::kOllamaGenerate:
    case Route::kOllamaEmbed:
    case Route::kOllamaEmbeddings:
    case Route::kOllamaTags:
    case Route::kOllamaShow:
    case Route::kOllamaPs:
    case Route::kOllamaVersion:
      return ollama(entry->route, request, exchange);
    case Route::kEngineEvents:
      return engine_events(request, exchange);
    case Route::kResetPrefixCache:
      return reset_prefix_cache(request, exchange);
    case Route::kHealth:
    case Route::kMetrics:
    case Route::kModels:
      break;  // answered above
  }
}

bool OpenAIService::serve_web_page(const HttpRequest& request,
                                   const std::shared_ptr<HttpExchange>& exchange) {
  if (!config_.web_ui || (request.method != "GET" && request.method != "HEAD")) return false;
  const EmbeddedFile* file = find_web_file(path_of(request.target));
  if (!file) return false;
  const int status = serve_web_file(*file, request.if_none_match, *exchange);
  access_log(request, status, 0, 0, std::nullopt);
  return true;
}

void OpenAIService::engine_events(const HttpRequest& request,
                                  const std::shared_ptr<HttpExchange>& exchange) {
  // HEAD: the stream's head, without an endless body.
  if (request.method == "HEAD") {
    exchange->respond(200, "text/event-stream", std::string());
    return access_log(request, 200, 0, 0, std::nullopt);
  }
  if (!engine_events_.subscribe(*model_->engine, exchange)) {
    ApiError e = overloaded(fmt::format("at most {} engine event streams may be open at once",
                                        EngineEvents::kMaxSubscribers));
    return reply_error(request, exchange, e);
  }
  access_log(request, 200, 0, 0, std::nullopt);
}

void OpenAIService::delete_session(const HttpRequest& request,
                                   const std::shared_ptr<HttpExchange>& exchange) {
  // Ids are URL-safe (check_session_id), but a client may still percent-encode them.
  const std::optional<std::string> decoded =
      percent_decode(path_of(request.target).substr(kSessionsPrefix.size()));
  if (!decoded)
    return reply_error(request, exchange,
                       bad_request("malformed %-escape in the session id", "session_id"));
  if (auto e = check_session_id(*decoded)) return reply_error(request, exchange, *e);
  const std::string& id = *decoded;
  const bool kill = query_flag(request.target, "kill");
  Status status = kill ? model_->engine->kill_session(id) : model_->engine->end_session(id);
  if (!status.ok())
    return reply_error(request, exchange, not_found(status.message(), "session_not_found"));
  reply_json(
      request, exchange, 200,
      json{{"id", id}, {"object", "session.deleted"}, {"deleted", true}, {"killed", kill}}.dump());
}

void OpenAIService::reset_prefix_cache(const HttpRequest& request,
                                       const std::shared_ptr<HttpExchange>& exchange) {
  // Done at the engine's next step boundary; with KV events on, routers hear AllBlocksCleared
  // (or each removed page while requests still hold some), as from vLLM's endpoint.
  model_->engine->reset_prefix_cache();
  reply_json(request, exchange, 200, json{{"status", "ok"}}.dump());
}

void OpenAIService::health(const HttpRequest& request,
                           const std::shared_ptr<HttpExchange>& exchange) {
  const char* status = draining_                    ? "draining"
                       : !model_                    ? "loading"
                       : !model_->engine->healthy() ? "unhealthy"
                                                    : "ok";
  const bool ok = std::string_view(status) == "ok";
  reply_json(request, exchange, ok ? 200 : 503, json{{"status", status}}.dump());
}

void OpenAIService::metrics(const HttpRequest& request,
                            const std::shared_ptr<HttpExchange>& exchange) {
  EngineMetrics engine_metrics;
  if (model_) {
    engine_metrics = model_->engine->metrics();
  } else {
    engine_metrics.healthy = false;
  }
  ServerStats stats;
  if (http_counters_) {
    HttpCounters c = http_counters_();
    stats.open_connections = c.open_connections;
    stats.http_requests_total = c.requests_total;
    stats.http_requests_4xx = c.responses_4xx;
    stats.http_requests_5xx = c.responses_5xx;
  }
  stats.client_disconnects = client_disconnects_;
  stats.stop_string_matches = stop_string_matches_;
  exchange->respond(200, "text/plain; version=0.0.4; charset=utf-8",
                    render_prometheus(engine_metrics, stats, config_.served_model_name));
  access_log(request, 200, 0, 0, std::nullopt);
}

namespace {

// /v1/models' "sampling_defaults": what a request that leaves a field out gets, and where each
// value came from ("configured" by the server's flags, "model", "llama.cpp", "openai").
json sampling_defaults_json(const SamplingDefaults& d) {
  const SamplingParams& p = d.params;
  const SamplingDefaults::Sources& s = d.sources;
  auto entry = [](auto value, SamplingSource source) {
    if constexpr (std::is_same_v<decltype(value), float>) {
      // 0.8f as a double is 0.800000011920929; clients compare against 0.8.
      return json{{"value", std::round(double(value) * 1e6) / 1e6},
                  {"source", sampling_source_name(source)}};
    } else {
      return json{{"value", value}, {"source", sampling_source_name(source)}};
    }
  };
  return json{{"base", sampling_defaults_base_name(d.base)},
              {"temperature", entry(p.temperature, s.temperature)},
              {"top_k", entry(p.top_k.value_or(0), s.top_k)},
              {"top_p", entry(p.top_p, s.top_p)},
              {"min_p", entry(p.min_p, s.min_p)},
              {"repetition_penalty", entry(p.repetition_penalty, s.repetition_penalty)},
              {"penalty_last_n", entry(p.penalty_last_n, s.penalty_last_n)},
              {"presence_penalty", entry(p.presence_penalty, s.presence_penalty)},
              {"frequency_penalty", entry(p.frequency_penalty, s.frequency_penalty)},
              {"order", entry(sampler_order_string(p.order), s.order)}};
}

}  // namespace

void OpenAIService::models(const HttpRequest& request,
                           const std::shared_ptr<HttpExchange>& exchange) {
  json model{{"id", config_.served_model_name},
             {"object", "model"},
             {"created", unix_now()},
             {"owned_by", "drift"}};
  if (model_) {
    model["max_model_len"] = model_->engine->setup().max_model_len;
    model["sampling_defaults"] = sampling_defaults_json(model_->engine->setup().sampling);
  }
  reply_json(request, exchange, 200,
             dump_json(json{{"object", "list"}, {"data", json::array({model})}}));
}

void OpenAIService::tokenize(const HttpRequest& request,
                             const std::shared_ptr<HttpExchange>& exchange) {
  // Off the I/O thread: a large prompt takes a while to tokenize (see prompt_workers_), and so
  // does writing its ids as JSON (a 7 MB prompt gives over a million), so the worker returns the
  // reply's body and the I/O thread only sends it.
  using Result = std::variant<ApiError, std::string>;
  auto work = [this, model = model_](const std::string& body) -> Result {
    auto json_body = parse_request_json(body);
    if (auto* e = std::get_if<ApiError>(&json_body)) return *e;
    auto parsed = parse_tokenize_request(std::get<json>(json_body));
    if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
    TokenizeRequest& t = std::get<TokenizeRequest>(parsed);
    const std::string_view prompt_param = t.prompt ? "prompt" : "messages";
    Prompt prompt;
    if (t.prompt) {
      prompt = TextPrompt{std::move(*t.prompt), t.add_special, /*parse_special=*/true};
    } else {
      // A conversation as a chat request would render it, tools and template kwargs included.
      ChatPrompt chat{std::move(*t.messages)};
      GenerationRequest unused;
      if (auto e = read_tool_fields(body, std::get<json>(json_body), unused, chat)) return *e;
      prompt = std::move(chat);
    }
    auto tokens = model->engine->tokenize(std::move(prompt));
    if (!tokens.ok()) return error_for_prompt(tokens.error(), prompt_param);
    return dump_json(json{{"tokens", *tokens},
                          {"count", tokens->size()},
                          {"max_model_len", model->engine->setup().max_model_len}});
  };
  off_io_thread(
      request, exchange, std::move(work),
      [this](const HttpRequest& request, const std::shared_ptr<HttpExchange>& exchange,
             std::string reply) { reply_json(request, exchange, 200, std::move(reply)); });
}

void OpenAIService::detokenize(const HttpRequest& request,
                               const std::shared_ptr<HttpExchange>& exchange) {
  // Off the I/O thread too: a body of a million ids takes a while to parse and decode.
  using Result = std::variant<ApiError, std::string>;
  auto work = [model = model_](const std::string& body) -> Result {
    auto json_body = parse_request_json(body);
    if (auto* e = std::get_if<ApiError>(&json_body)) return *e;
    auto parsed = parse_detokenize_request(std::get<json>(json_body));
    if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
    const auto& tokens = std::get<std::vector<int32_t>>(parsed);
    auto text = model->engine->detokenize(tokens, /*render_special=*/true);
    if (!text.ok()) return bad_request(text.error().message, "tokens");
    return dump_json(json{{"prompt", *text}, {"content", *text}});
  };
  off_io_thread(
      request, exchange, std::move(work),
      [this](const HttpRequest& request, const std::shared_ptr<HttpExchange>& exchange,
             std::string reply) { reply_json(request, exchange, 200, std::move(reply)); });
}

void OpenAIService::completions(const HttpRequest& request,
                                const std::shared_ptr<HttpExchange>& exchange,
                                GenerationParser parse) {
  // Rule: parse the body, check the model's name, bound and tokenize the prompts (on a prompt
  // worker: parsing, template rendering and tokenization of a large body take seconds that
  // /health and the running streams must not wait for), then shape the engine requests and
  // start (on the I/O thread). Whatever depends on the model (BOS, vocabulary, context) the
  // engine decides when they are submitted.
  using Result = std::variant<ApiError, GenerationRequest>;
  auto work = [this, parse = std::move(parse)](const std::string& body) -> Result {
    auto parsed = parse(body);
    if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
    GenerationRequest& generation = std::get<GenerationRequest>(parsed);
    if (auto e = check_model_name(generation.model)) return *e;
    if (generation.immediate_reply) return std::move(generation);
    if (auto e = prepare_prompts(generation)) return *e;
    if (auto e = compile_output_constraint(generation)) return *e;
    return std::move(generation);
  };
  off_io_thread(request, exchange, std::move(work),
                [this](const HttpRequest& request, const std::shared_ptr<HttpExchange>& exchange,
                       GenerationRequest generation) {
                  if (generation.immediate_reply)
                    return reply_json(request, exchange, 200, *generation.immediate_reply);
                  auto spec = generation_spec(std::move(generation));
                  if (auto* e = std::get_if<ApiError>(&spec))
                    return reply_error(request, exchange, *e);
                  start_generation(request, exchange, std::move(std::get<GenerationSpec>(spec)));
                });
}

std::variant<GenerationRequest, ApiError> OpenAIService::parse_generation_request(
    const std::string& body, bool chat) const {
  auto json_body = parse_request_json(body);
  if (auto* e = std::get_if<ApiError>(&json_body)) return *e;
  const json& j = std::get<json>(json_body);
  GenerationRequest out;
  out.chat = chat;
  out.id_prefix = chat ? "chatcmpl-" : "cmpl-";
  if (chat) {
    auto parsed = parse_chat_request(j);
    if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
    ChatRequest& c = std::get<ChatRequest>(parsed);
    out.model = std::move(c.model);
    out.options = std::move(c.options);
    ChatPrompt prompt{std::move(c.messages)};
    if (auto e = read_tool_fields(body, j, out, prompt)) return *e;
    if (c.reasoning_effort) {
      auto given = prompt.template_kwargs.find("reasoning_effort");
      if (given != prompt.template_kwargs.end() && *given != *c.reasoning_effort)
        return bad_request(
            "'reasoning_effort' and 'chat_template_kwargs.reasoning_effort' differ: give one",
            "reasoning_effort");
      prompt.template_kwargs["reasoning_effort"] = *c.reasoning_effort;
    }
    // A harmony model's replies are read by their markers' ids (chat/harmony_reply.h).
    out.harmony = model_->engine->codec().harmony_tokens().has_value();
    out.prompts.push_back({std::move(prompt), std::string()});
    return out;
  }
  auto parsed = parse_completion_request(j);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  CompletionRequest& c = std::get<CompletionRequest>(parsed);
  out.model = std::move(c.model);
  out.options = std::move(c.options);
  for (PromptInput& p : c.prompts) {
    GenerationRequest::PromptEntry entry;
    if (auto* text = std::get_if<std::string>(&p)) {
      if (out.options.echo) entry.echo = *text;
      // BOS as the model asks (none for a turn that continues a session): the engine decides.
      entry.prompt = TextPrompt{std::move(*text), /*add_special=*/true, /*parse_special=*/true};
    } else {
      auto& ids = std::get<std::vector<int32_t>>(p);
      if (out.options.echo) {
        auto decoded = model_->engine->detokenize(ids);
        if (!decoded.ok()) return bad_request(decoded.error().message, "prompt");
        entry.echo = std::move(*decoded);
      }
      entry.prompt = std::move(ids);
    }
    out.prompts.push_back(std::move(entry));
  }
  return out;
}

std::optional<ApiError> OpenAIService::read_tool_fields(const std::string& body, const json& parsed,
                                                        GenerationRequest& out,
                                                        ChatPrompt& prompt) const {
  bool any_tool_calls = false;
  for (const json& m : parsed["messages"])
    any_tool_calls = any_tool_calls || m.contains("tool_calls") || m.contains("tool_call_id");
  if (!any_tool_calls && !parsed.contains("tools") && !parsed.contains("tool_choice") &&
      !parsed.contains("parallel_tool_calls") && !parsed.contains("chat_template_kwargs"))
    return std::nullopt;
  // Parsed once more with the client's key order, which templates print tool schemas in.
  Expected<jinja::Json> reparsed = parse_bounded_json<jinja::Json>(body);
  if (!reparsed.ok() || !reparsed->is_object()) return bad_request("the body is not a JSON object");
  const jinja::Json& ordered = *reparsed;
  auto tools = parse_tool_request(ordered);
  if (auto* e = std::get_if<ApiError>(&tools)) return *e;
  ToolRequest& t = std::get<ToolRequest>(tools);
  if (auto e = read_message_tool_calls(ordered, prompt.messages)) return e;
  prompt.template_kwargs = std::move(t.template_kwargs);
  return use_tools(std::move(t), out, prompt);
}

std::optional<ApiError> OpenAIService::use_tools(ToolRequest t, GenerationRequest& out,
                                                 ChatPrompt& prompt) const {
  if (!t.active()) return std::nullopt;
  prompt.tools = std::move(t.tools);
  prompt.tool_call_required = t.choice == ToolChoice::kRequired || t.choice == ToolChoice::kNamed;
  out.tool_call_syntax = model_->engine->codec().tool_call_syntax();
  out.parallel_tool_calls = t.parallel_tool_calls;
  ToolCallGrammarRequest grammar_request;
  grammar_request.syntax = *out.tool_call_syntax;
  grammar_request.tools = &*prompt.tools;
  grammar_request.required = prompt.tool_call_required;
  if (t.choice == ToolChoice::kNamed) grammar_request.named_function = t.named_function;
  grammar_request.parallel_tool_calls = t.parallel_tool_calls;
  std::optional<std::string> grammar = tool_call_grammar(grammar_request);
  if (!grammar) return std::nullopt;
  if (out.options.constraint) {
    // A reply free to answer in text follows the client's format; a demanded call cannot.
    if (!prompt.tool_call_required) return std::nullopt;
    return bad_request(fmt::format("'tool_choice' demands a tool call, which '{}' would forbid: "
                                   "give one of them",
                                   out.options.constraint->param),
                       "tool_choice");
  }
  // A schema the grammar library cannot follow is refused as the tools' fault (400, "tools").
  out.options.constraint = lark_constraint(std::move(*grammar), "tools");
  return std::nullopt;
}

std::optional<ApiError> OpenAIService::check_model_name(
    const std::optional<std::string>& model) const {
  if (!model || *model == config_.served_model_name) return std::nullopt;
  return not_found(fmt::format("the model '{}' does not exist; this server serves '{}'", *model,
                               config_.served_model_name),
                   "model_not_found");
}

std::optional<ApiError> OpenAIService::prepare_prompts(GenerationRequest& request) const {
  const Engine& engine = *model_->engine;
  const int64_t context = engine.setup().max_model_len;
  const size_t max_bytes = prompt_bound_.max_bytes(context);
  const char* param = request.chat ? "messages" : "prompt";
  for (GenerationRequest::PromptEntry& entry : request.prompts) {
    // A rendered conversation is at least as long as its messages' text.
    size_t bytes = 0;
    if (const auto* text = std::get_if<TextPrompt>(&entry.prompt))
      bytes = prompt_bound_.counted_bytes(text->text);
    if (const auto* chat = std::get_if<ChatPrompt>(&entry.prompt))
      for (const ChatMessage& m : chat->messages) bytes += prompt_bound_.counted_bytes(m.content);
    if (bytes > max_bytes)
      return bad_request(
          fmt::format("this model's context length is {} tokens, but the {} {} bytes, at least {} "
                      "tokens (no token of this model covers more than {} bytes)",
                      context, request.chat ? "messages have" : "prompt has", bytes,
                      prompt_bound_.min_tokens(bytes), prompt_bound_.max_bytes_per_token()),
          param);
    if (request.options.session_id || std::holds_alternative<std::vector<TokenId>>(entry.prompt))
      continue;
    Expected<std::vector<TokenId>> ids = engine.tokenize(entry.prompt);
    if (!ids.ok()) return error_for_prompt(ids.error(), param);
    entry.prompt = std::move(*ids);
  }
  return std::nullopt;
}

std::optional<ApiError> OpenAIService::compile_output_constraint(GenerationRequest& request) const {
  std::optional<OutputConstraint>& constraint = request.options.constraint;
  if (!constraint) return std::nullopt;
  Expected<std::unique_ptr<TokenConstraint>> compiled =
      model_->engine->codec().compile_grammar(constraint->grammar);
  if (!compiled.ok()) return bad_request(compiled.error().message, constraint->param);
  constraint->compiled = std::move(*compiled);
  return std::nullopt;
}

std::variant<ApiError, GenerationSpec> OpenAIService::generation_spec(GenerationRequest parsed) {
  GenerationOptions& options = parsed.options;
  GenerationSpec spec;
  spec.meta.chat = parsed.chat;
  spec.meta.id = next_response_id(parsed.id_prefix);
  spec.meta.created = unix_now();
  spec.meta.model = config_.served_model_name;
  if (parsed.codec) spec.codec = parsed.codec(spec.meta);
  spec.stream = options.stream;
  spec.include_usage = options.include_usage;
  spec.tool_call_syntax = parsed.tool_call_syntax;
  spec.harmony = parsed.harmony;
  spec.parallel_tool_calls = parsed.parallel_tool_calls;
  if (options.constraint) spec.grammar_param = options.constraint->param;
  if (options.logprobs) {
    options.sampling.logprobs = *options.logprobs;
    spec.token_text = [model = model_](int32_t id) {
      auto text = model->engine->token_text(id);
      return text.ok() ? std::move(*text) : std::string();
    };
  }
  for (GenerationRequest::PromptEntry& entry : parsed.prompts) {
    Request request;
    request.prompt = std::move(entry.prompt);
    request.max_tokens = options.max_tokens;
    request.sampling = options.sampling;
    if (options.constraint) {
      request.grammar = options.constraint->grammar;
      request.compiled_grammar = options.constraint->compiled;
    }
    request.session_id = options.session_id;
    // The engine admits larger priorities first; vLLM's field is the other way round.
    request.priority = -options.priority;
    request.kv_keep = options.kv_keep;
    request.stop = options.stop;
    if (parsed.harmony) request.reply_format = ReplyFormat::kHarmony;
    Expected<std::vector<Request>> choices = fan_out_choices(request, options.n);
    if (!choices.ok()) return bad_request(choices.error().message, "n");
    for (size_t i = 0; i < choices->size(); ++i) {
      GenerationSpec::Choice choice;
      choice.request = std::move((*choices)[i]);
      choice.echo = entry.echo;
      choice.counts_prompt_tokens = i == 0;
      spec.choices.push_back(std::move(choice));
    }
  }
  return spec;
}

void OpenAIService::start_generation(const HttpRequest& request,
                                     const std::shared_ptr<HttpExchange>& exchange,
                                     GenerationSpec spec) {
  ++active_generations_;
  auto done = [this, request](const GenerationOutcome& o) {
    --active_generations_;
    if (o.client_gone) ++client_disconnects_;
    if (o.cut && draining_) {
      ++cut_by_shutdown_.requests;
      if (o.completion_tokens == 0) ++cut_by_shutdown_.before_first_token;
      cut_by_shutdown_.tokens += uint64_t(o.completion_tokens);
    }
    stop_string_matches_ += uint64_t(o.stop_string_matches);
    access_log(request, o.status, o.prompt_tokens, o.completion_tokens, o.ttft_seconds);
  };
  auto generation = std::make_shared<Generation>(io_, *model_->engine, exchange, std::move(spec),
                                                 std::move(done));
  generation->start();
}

void OpenAIService::embeddings(const HttpRequest& request,
                               const std::shared_ptr<HttpExchange>& exchange,
                               EmbeddingPreparer prepare) {
  // Rule: what a prompt worker can decide (the body, the model, the sizes, the token ids) is
  // decided there; the I/O thread only starts the run.
  auto work = [prepare = std::move(prepare)](const std::string& body) { return prepare(body); };
  off_io_thread(request, exchange, std::move(work),
                [this](const HttpRequest& request, const std::shared_ptr<HttpExchange>& exchange,
                       EmbeddingSpec spec) {
                  ++active_generations_;
                  auto done = [this, request](const EmbeddingOutcome& o) {
                    --active_generations_;
                    if (o.client_gone) ++client_disconnects_;
                    access_log(request, o.status, o.prompt_tokens, 0, std::nullopt);
                  };
                  std::make_shared<EmbeddingRun>(io_, *model_->engine, exchange, std::move(spec),
                                                 std::move(done))
                      ->start();
                });
}

std::variant<ApiError, EmbeddingSpec> OpenAIService::prepare_embeddings(
    const std::string& body) const {
  auto json_body = parse_request_json(body);
  if (auto* e = std::get_if<ApiError>(&json_body)) return *e;
  auto parsed = parse_embedding_request(std::get<json>(json_body));
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  EmbeddingRequest& r = std::get<EmbeddingRequest>(parsed);
  if (auto e = check_model_name(r.model)) return *e;
  const Engine& engine = *model_->engine;
  const EngineSetup& setup = engine.setup();
  if (auto e = check_embedding_dimensions(r.dimensions)) return *e;
  EmbeddingSpec spec;
  spec.model = config_.served_model_name;
  spec.pooling = config_.pooling;
  spec.encoding = r.encoding;
  spec.max_in_flight = size_t(
      std::clamp(setup.scheduler.max_num_seqs, 1, std::max(1, setup.max_queued_requests / 2)));
  // An input may fill the whole context (nothing is generated after it).
  const int64_t context = setup.max_model_len;
  const size_t max_bytes = prompt_bound_.max_bytes(context + 1);
  for (size_t i = 0; i < r.inputs.size(); ++i) {
    auto* text = std::get_if<std::string>(&r.inputs[i]);
    if (!text) {
      spec.inputs.emplace_back(std::move(std::get<std::vector<int32_t>>(r.inputs[i])));
      continue;
    }
    const size_t bytes = prompt_bound_.counted_bytes(*text);
    if (bytes > max_bytes)
      return bad_request(
          fmt::format("this model's context length is {} tokens, but input {} has {} bytes, at "
                      "least {} tokens (no token of this model covers more than {} bytes)",
                      context, i, bytes, prompt_bound_.min_tokens(bytes),
                      prompt_bound_.max_bytes_per_token()),
          "input");
    Expected<std::vector<TokenId>> ids =
        engine.tokenize(TextPrompt{std::move(*text), /*add_special=*/true, /*parse_special=*/true});
    if (!ids.ok()) return bad_request(ids.error().message, "input");
    spec.inputs.emplace_back(std::move(*ids));
  }
  return spec;
}

std::optional<ApiError> OpenAIService::check_embedding_dimensions(
    const std::optional<int64_t>& dimensions) const {
  // The model has no Matryoshka training: a shortened vector would not be an embedding.
  const int64_t size = model_->engine->setup().embedding_size;
  if (!dimensions || *dimensions == size) return std::nullopt;
  return bad_request(fmt::format("'dimensions' must be this model's embedding size, {}, or be "
                                 "left out: the model cannot make shorter embeddings (got {})",
                                 size, *dimensions),
                     "dimensions");
}

}  // namespace drift::server
