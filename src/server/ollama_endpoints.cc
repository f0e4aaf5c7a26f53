// Ollama's API on OpenAIService: /api/chat and /api/generate become the chat (or, raw, the
// completion) request the OpenAI endpoints make, and take their path (the prompt's bound and
// tokens, tools and their grammar, the engine's submit, Generation) with Ollama's codec
// (ollama_response.h) writing NDJSON; /api/embed and /api/embeddings are embedding runs with
// Ollama's body; /api/tags, /api/show, /api/ps and /api/version list the one model served.
#include <fmt/format.h>

#include <algorithm>
#include <memory>

#include "server/off_io_thread.h"
#include "server/ollama_response.h"
#include "server/openai_service.h"
#include "server/request_json.h"

namespace drift::server {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// An Ollama release with the fields these shapes have (`think`, /api/embed, tools in chat);
// clients compare it with the version that brought a feature before they use it.
constexpr std::string_view kOllamaApiVersion = "0.12.0";

int64_t nanoseconds_since(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t).count();
}

}  // namespace

std::string OpenAIService::ollama_model_name() const {
  const std::string& name = config_.served_model_name;
  return name.find(':') == std::string::npos ? name + ":latest" : name;
}

std::optional<ApiError> OpenAIService::check_ollama_model(std::string_view name) const {
  if (ollama_base_name(name) == ollama_base_name(ollama_model_name())) return std::nullopt;
  return not_found(
      fmt::format("model '{}' not found; this server serves '{}'", name, ollama_model_name()),
      "model_not_found");
}

std::optional<ApiError> OpenAIService::check_num_ctx(const std::optional<int64_t>& num_ctx) const {
  const int64_t context = model_->engine->setup().max_model_len;
  if (!num_ctx || *num_ctx <= context) return std::nullopt;
  return bad_request(fmt::format("'options.num_ctx' {} is larger than this server's context of {} "
                                 "tokens (drift serve --ctx-size sets it)",
                                 *num_ctx, context),
                     "options.num_ctx");
}

std::variant<GenerationRequest, ApiError> OpenAIService::parse_ollama_generation(
    const std::string& body, OllamaEndpoint endpoint, Clock::time_point received) const {
  auto parsed = parse_ollama_generate_request(body, endpoint);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  OllamaGenerateRequest& r = std::get<OllamaGenerateRequest>(parsed);
  if (auto e = check_ollama_model(r.model)) return *e;
  if (auto e = check_num_ctx(r.num_ctx)) return *e;
  GenerationRequest out;
  if (r.load_only) {
    out.immediate_reply = ollama_load_reply(endpoint, r.model);
    return out;
  }
  const bool harmony = model_->engine->codec().harmony_tokens().has_value();
  // As Ollama answers `think` for a model that does not reason.
  if (r.think && r.think->enabled && !harmony)
    return bad_request(fmt::format("\"{}\" does not support thinking", r.model), "think");
  out.options = std::move(r.options);
  out.id_prefix = "ollama-";
  out.codec = [endpoint, model = r.model, show = !r.think || r.think->enabled,
               received](const ResponseMeta&) {
    return std::make_shared<OllamaReplyCodec>(endpoint, model, show, received);
  };
  if (r.raw_prompt) {
    // The prompt as written, with the model's BOS as a completion gets it.
    out.prompts.push_back({TextPrompt{std::move(*r.raw_prompt), true, true}, std::string()});
    return out;
  }
  out.chat = true;
  ChatPrompt prompt;
  prompt.messages = std::move(r.messages);
  if (auto e = use_tools(std::move(r.tools), out, prompt)) return *e;
  if (r.think && r.think->effort) prompt.template_kwargs["reasoning_effort"] = *r.think->effort;
  out.harmony = harmony;
  out.prompts.push_back({std::move(prompt), std::string()});
  return out;
}

std::variant<ApiError, EmbeddingSpec> OpenAIService::prepare_ollama_embed(
    const std::string& body, bool legacy, Clock::time_point received) const {
  auto parsed = parse_ollama_embed_request(body, legacy);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  OllamaEmbedRequest& r = std::get<OllamaEmbedRequest>(parsed);
  if (auto e = check_ollama_model(r.model)) return *e;
  if (auto e = check_num_ctx(r.num_ctx)) return *e;
  const Engine& engine = *model_->engine;
  const EngineSetup& setup = engine.setup();
  if (auto e = check_embedding_dimensions(r.dimensions)) return *e;
  EmbeddingSpec spec;
  spec.model = r.model;
  spec.pooling = config_.pooling;
  spec.max_in_flight = size_t(
      std::clamp(setup.scheduler.max_num_seqs, 1, std::max(1, setup.max_queued_requests / 2)));
  // An input may fill the whole context (nothing is generated after it); a longer one is cut
  // there when `truncate` (Ollama's default), else refused.
  const int64_t context = setup.max_model_len;
  const char* param = legacy ? "prompt" : "input";
  for (size_t i = 0; i < r.inputs.size(); ++i) {
    if (!r.truncate &&
        prompt_bound_.counted_bytes(r.inputs[i]) > prompt_bound_.max_bytes(context + 1))
      return bad_request(fmt::format("input {} is longer than this model's context of {} tokens "
                                     "(\"truncate\": true cuts it there)",
                                     i, context),
                         param);
    Expected<std::vector<TokenId>> ids =
        engine.tokenize(TextPrompt{std::move(r.inputs[i]), true, true});
    if (!ids.ok()) return bad_request(ids.error().message, param);
    if (int64_t(ids->size()) > context) {
      if (!r.truncate)
        return bad_request(fmt::format("input {} has {} tokens, more than this model's context of "
                                       "{} (\"truncate\": true cuts it there)",
                                       i, ids->size(), context),
                           param);
      ids->resize(size_t(context));
    }
    spec.inputs.emplace_back(std::move(*ids));
  }
  spec.reply = [model = r.model, legacy, received, prepared = Clock::now()](
                   const std::vector<std::vector<float>>& embeddings, int64_t prompt_tokens) {
    if (legacy) return dump_json(json{{"embedding", embeddings.at(0)}});
    return dump_json(
        json{{"model", model},
             {"embeddings", embeddings},
             {"total_duration", nanoseconds_since(received)},
             {"load_duration",
              std::chrono::duration_cast<std::chrono::nanoseconds>(prepared - received).count()},
             {"prompt_eval_count", prompt_tokens}});
  };
  spec.error_body = ollama_error_json;
  return spec;
}

void OpenAIService::ollama_show(const HttpRequest& request,
                                const std::shared_ptr<HttpExchange>& exchange) {
  using Result = std::variant<ApiError, std::string>;
  auto work = [this](const std::string& body) -> Result {
    auto parsed = parse_ollama_show_request(body);
    if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
    if (auto e = check_ollama_model(std::get<std::string>(parsed))) return *e;
    const Engine& engine = *model_->engine;
    // drift offers tools to every model (a generic call syntax when the template has none) and
    // pools any model's hidden states into an embedding.
    std::vector<std::string> capabilities = {"completion", "tools"};
    if (engine.codec().harmony_tokens()) capabilities.push_back("thinking");
    if (engine.setup().embedding_size > 0) capabilities.push_back("embedding");
    return dump_json(ollama_show_json(model_->card, engine.setup().max_model_len, capabilities));
  };
  off_io_thread(
      request, exchange, std::move(work),
      [this](const HttpRequest& request, const std::shared_ptr<HttpExchange>& exchange,
             std::string reply) { reply_json(request, exchange, 200, std::move(reply)); });
}

void OpenAIService::ollama(Route route, const HttpRequest& request,
                           const std::shared_ptr<HttpExchange>& exchange) {
  const Clock::time_point received = request.received;
  switch (route) {
    case Route::kOllamaChat:
    case Route::kOllamaGenerate: {
      const OllamaEndpoint endpoint =
          route == Route::kOllamaChat ? OllamaEndpoint::kChat : OllamaEndpoint::kGenerate;
      return completions(request, exchange, [this, endpoint, received](const std::string& body) {
        return parse_ollama_generation(body, endpoint, received);
      });
    }
    case Route::kOllamaEmbed:
    case Route::kOllamaEmbeddings: {
      const bool legacy = route == Route::kOllamaEmbeddings;
      return embeddings(request, exchange, [this, legacy, received](const std::string& body) {
        return prepare_ollama_embed(body, legacy, received);
      });
    }
    case Route::kOllamaShow:
      return ollama_show(request, exchange);
    case Route::kOllamaTags:
      return reply_json(request, exchange, 200,
                        dump_json(ollama_tags_json(ollama_model_name(), model_->card)));
    case Route::kOllamaPs:
      return reply_json(request, exchange, 200,
                        dump_json(ollama_ps_json(ollama_model_name(), model_->card,
                                                 model_->engine->setup().max_model_len)));
    case Route::kOllamaVersion:
      return reply_json(request, exchange, 200, dump_json(json{{"version", kOllamaApiVersion}}));
    default:
      break;
  }
  reply_error(request, exchange, not_found(fmt::format("no route {}", request.target)));
}

}  // namespace drift::server
