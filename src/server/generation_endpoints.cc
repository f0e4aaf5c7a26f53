// OpenAIService's generation routes (/v1/completions, /v1/chat/completions and the codecs over
// them: Anthropic's /v1/messages, Ollama's /api/chat and /api/generate): read the body, prepare
// what is costly on a prompt worker (tokens, the grammar's compile), shape the engine requests.
// Starting the generation (start_generation) stays with the service, which counts it.
#include <fmt/format.h>

#include "chat/tool_call_grammar.h"
#include "server/api_error.h"
#include "server/generation.h"
#include "server/guided_decoding.h"
#include "server/off_io_thread.h"
#include "server/openai_response.h"
#include "server/openai_schema.h"
#include "server/openai_service.h"
#include "server/rejection_error.h"
#include "server/request_json.h"
#include "server/tool_request.h"

namespace drift::server {

using nlohmann::json;

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
    if (std::holds_alternative<std::vector<TokenId>>(entry.prompt)) continue;
    if (request.options.session_id) {
      Expected<TokenizedTurn> turn = engine.tokenize_turn(entry.prompt, request.options.session_id);
      if (!turn.ok()) return error_for_prompt(turn.error(), param);
      entry.tokenized = std::move(*turn);
      continue;
    }
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
  spec.meta.created = unix_seconds_now();
  spec.meta.model = config_.served_model_name;
  if (parsed.codec) spec.codec = parsed.codec(spec.meta);
  spec.stream = options.stream;
  spec.include_usage = options.include_usage;
  spec.harmony = parsed.harmony;
  if (options.constraint) spec.grammar_param = options.constraint->param;
  spec.stop_param = options.stop_param;
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
    request.tokenized = std::move(entry.tokenized);
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
    request.tool_call_syntax = parsed.tool_call_syntax;
    request.parallel_tool_calls = parsed.parallel_tool_calls;
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

}  // namespace drift::server
