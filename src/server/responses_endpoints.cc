// OpenAI's Responses API on OpenAIService: POST /v1/responses becomes the chat request the OpenAI
// chat endpoint makes (responses_schema.h), a continued response's stored conversation first, and
// takes that endpoint's path (the model's name, the prompt's bound and tokens, tools and their
// grammar, the engine's submit, Generation) with the Responses codec (responses_response.h)
// writing the reply and storing it. GET and DELETE /v1/responses/{id} read and drop stored
// responses (response_store.h).
#include <fmt/format.h>

#include <memory>

#include "server/openai_response.h"
#include "server/openai_service.h"
#include "server/responses_response.h"
#include "server/responses_schema.h"
#include "util/json_limits.h"

namespace drift::server {
namespace {

constexpr std::string_view kResponsesPrefix = "/v1/responses/";

// OpenAI's code for an unknown previous_response_id; none for an unknown id in the path.
ApiError unknown_response(std::string_view id, std::optional<std::string> param) {
  ApiError e = not_found(fmt::format("no stored response '{}': it does not exist, was deleted or "
                                     "evicted, or was created with store=false",
                                     id),
                         param ? "previous_response_not_found" : "");
  e.param = std::move(param);
  return e;
}

}  // namespace

bool is_response_path(std::string_view path) { return path.starts_with(kResponsesPrefix); }

std::variant<GenerationRequest, ApiError> OpenAIService::parse_responses(
    const std::string& body) const {
  auto parsed = parse_responses_request(body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  ResponsesRequest& r = std::get<ResponsesRequest>(parsed);
  GenerationRequest out;
  out.chat = true;
  out.model = std::move(r.model);
  out.options = std::move(r.options);
  out.id_prefix = "resp_";
  // The conversation: the instructions (a continued response's are not carried over, as
  // OpenAI's are not), the stored chain's turns, then this input's.
  std::vector<ChatMessage> messages;
  if (r.instructions) messages.emplace_back("system", *r.instructions);
  jinja::Json chain = jinja::Json::array();
  if (r.previous_response_id) {
    std::optional<StoredResponse> stored = responses_->get(*r.previous_response_id);
    if (!stored) return unknown_response(*r.previous_response_id, "previous_response_id");
    Expected<jinja::Json> items = parse_bounded_json<jinja::Json>(stored->conversation);
    if (!items.ok()) return internal_error("a stored conversation does not parse");
    chain = std::move(*items);
    if (auto e = read_input_items(chain, "previous_response_id", messages)) return *e;
  }
  for (ChatMessage& m : r.messages) messages.push_back(std::move(m));
  if (auto e = check_tool_outputs(messages)) return *e;
  for (jinja::Json& item : r.input_items) chain.push_back(std::move(item));
  ChatPrompt prompt;
  prompt.messages = std::move(messages);
  if (auto e = use_tools(std::move(r.tools), out, prompt)) return *e;
  if (r.reasoning_effort) prompt.template_kwargs["reasoning_effort"] = *r.reasoning_effort;
  // A harmony model's replies are read by their markers' ids; reasoning becomes reasoning items.
  out.harmony = model_->engine->codec().harmony_tokens().has_value();
  out.prompts.push_back({std::move(prompt), std::string()});
  ResponsesReplyContext context{std::move(r.echo), r.store ? responses_ : nullptr, std::move(chain),
                                r.instructions.value_or("")};
  out.codec = [context = std::move(context)](const ResponseMeta& meta) {
    return std::make_shared<ResponsesReplyCodec>(meta, context);
  };
  return out;
}

void OpenAIService::response_by_id(const HttpRequest& request,
                                   const std::shared_ptr<HttpExchange>& exchange) {
  const std::string_view target = request.target;
  const std::string_view path = target.substr(0, target.find('?'));
  const bool get = request.method == "GET" || request.method == "HEAD";
  if (!get && request.method != "DELETE") {
    ApiError e = bad_request(fmt::format("{} takes GET or DELETE, not {}", path, request.method));
    e.status = 405;
    return reply_error(request, exchange, e);
  }
  if (!authorized(request)) return reply_error(request, exchange, unauthorized());
  const std::optional<std::string> id = percent_decode(path.substr(kResponsesPrefix.size()));
  if (!id) return reply_error(request, exchange, bad_request("malformed %-escape in the id"));
  if (get) {
    std::optional<StoredResponse> stored = responses_->get(*id);
    if (!stored) return reply_error(request, exchange, unknown_response(*id, std::nullopt));
    return reply_json(request, exchange, 200, std::move(stored->body));
  }
  if (!responses_->erase(*id))
    return reply_error(request, exchange, unknown_response(*id, std::nullopt));
  reply_json(request, exchange, 200,
             dump_json(nlohmann::json{{"id", *id}, {"object", "response"}, {"deleted", true}}));
}

}  // namespace drift::server
