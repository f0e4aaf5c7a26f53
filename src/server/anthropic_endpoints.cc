// Anthropic's Messages API on OpenAIService: the body becomes the chat request the OpenAI chat
// endpoint makes, and from there it takes that endpoint's path (the model's name, the prompt's
// bound and tokens, tools and their grammar, the engine's submit, Generation) with Anthropic's
// codec (anthropic_response.h) writing the reply.
#include <memory>

#include "server/anthropic_response.h"
#include "server/off_io_thread.h"
#include "server/openai_response.h"
#include "server/openai_service.h"

namespace drift::server {

std::variant<GenerationRequest, ApiError> OpenAIService::parse_anthropic_messages(
    const std::string& body, AnthropicEndpoint endpoint) const {
  auto parsed = parse_anthropic_request(body, endpoint);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  AnthropicRequest& r = std::get<AnthropicRequest>(parsed);
  GenerationRequest out;
  out.chat = true;
  out.model = std::move(r.model);
  out.options = std::move(r.options);
  out.id_prefix = "msg_";
  out.codec = [show_thinking = r.show_thinking](const ResponseMeta& meta) {
    return std::make_shared<AnthropicReplyCodec>(meta.id, meta.model, show_thinking);
  };
  ChatPrompt prompt;
  prompt.messages = std::move(r.messages);
  if (auto e = use_tools(std::move(r.tools), out, prompt)) return *e;
  if (r.effort) prompt.template_kwargs["reasoning_effort"] = *r.effort;
  // A harmony model's replies are read by their markers' ids; reasoning becomes thinking blocks.
  out.harmony = model_->engine->codec().harmony_tokens().has_value();
  out.prompts.push_back({std::move(prompt), std::string()});
  return out;
}

void OpenAIService::anthropic_count_tokens(const HttpRequest& request,
                                           const std::shared_ptr<HttpExchange>& exchange) {
  // Rule: the prompt a /v1/messages request with the same fields would submit, tokenized as
  // completions() tokenizes it (same bound, same errors), counted.
  using Result = std::variant<ApiError, std::string>;
  auto work = [this](const std::string& body) -> Result {
    auto parsed = parse_anthropic_messages(body, AnthropicEndpoint::kCountTokens);
    if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
    GenerationRequest& generation = std::get<GenerationRequest>(parsed);
    if (auto e = check_model_name(generation.model)) return *e;
    if (auto e = prepare_prompts(generation)) return *e;
    const auto& ids = std::get<std::vector<TokenId>>(generation.prompts.front().prompt);
    return dump_json(nlohmann::json{{"input_tokens", ids.size()}});
  };
  off_io_thread(
      request, exchange, std::move(work),
      [this](const HttpRequest& request, const std::shared_ptr<HttpExchange>& exchange,
             std::string reply) { reply_json(request, exchange, 200, std::move(reply)); });
}

}  // namespace drift::server
