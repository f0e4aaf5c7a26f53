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
#include "server/off_io_thread.h"
#include "server/ollama_response.h"
#include "server/openai_response.h"
#include "server/openai_schema.h"
#include "server/prometheus_metrics.h"
#include "server/rejection_error.h"
#include "server/request_json.h"
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

struct RouteEntry {
  std::string_view path;
  std::string_view method;
  Route route;
};
constexpr RouteEntry kRoutes[] = {
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
    {"/v1/responses", "POST", Route::kResponses},
};

const RouteEntry* find_route(std::string_view path) {
  for (const RouteEntry& e : kRoutes)
    if (e.path == path) return &e;
  return nullptr;
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
      engine_events_(io),
      responses_(std::make_shared<ResponseStore>(config_.responses)) {}

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
  if (is_response_path(path)) return response_by_id(request, exchange);
  const RouteEntry* entry = find_route(path);
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
  dispatch(entry->route, request, exchange);
}

void OpenAIService::dispatch(Route route, const HttpRequest& request,
                             const std::shared_ptr<HttpExchange>& exchange) {
  switch (route) {
    case Route::kTokenize:
      return tokenize(request, exchange);
    case Route::kDetokenize:
      return detokenize(request, exchange);
    case Route::kCompletions:
    case Route::kChatCompletions: {
      const bool chat = route == Route::kChatCompletions;
      return completions(request, exchange, [this, chat](const std::string& body) {
        return parse_generation_request(body, chat);
      });
    }
    case Route::kAnthropicMessages:
      return completions(request, exchange, [this](const std::string& body) {
        return parse_anthropic_messages(body, AnthropicEndpoint::kMessages);
      });
    case Route::kResponses:
      return completions(request, exchange,
                         [this](const std::string& body) { return parse_responses(body); });
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
      return ollama(route, request, exchange);
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
  const ResponseStoreStats stored = responses_->stats();
  stats.stored_responses = int64_t(stored.count);
  stats.stored_response_bytes = int64_t(stored.bytes);
  stats.stored_response_evictions = stored.evictions;
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
             {"created", unix_seconds_now()},
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
