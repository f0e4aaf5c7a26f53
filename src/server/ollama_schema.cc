#include "server/ollama_schema.h"

#include <fmt/format.h>

#include <limits>
#include <set>

#include "server/embedding_schema.h"
#include "server/guided_decoding.h"
#include "server/json_fields.h"
#include "server/request_json.h"

namespace drift::server {
namespace {

using Json = jinja::Json;
using MaybeError = std::optional<ApiError>;

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

// The fields each request takes; Ollama ignores others, drift names them (a misspelt field
// silently dropped is a wrong answer).
MaybeError check_field_names(const Json& body, const std::set<std::string_view>& known,
                             const std::set<std::string_view>& unsupported) {
  for (const auto& [name, value] : body.items()) {
    if (known.contains(name)) continue;
    if (unsupported.contains(name) && !value.is_null())
      return bad_request(fmt::format("'{}' is not supported by this server", name), name);
    if (!unsupported.contains(name))
      return bad_request(fmt::format("'{}': unknown field", name), name);
  }
  return std::nullopt;
}

// Options that only tune how Ollama loads or runs a model on its hardware (drift's are the
// server's flags); accepted so that clients which send them work, with nothing to do.
const std::set<std::string_view>& load_time_options() {
  static const std::set<std::string_view> kNames = {
      "numa",     "num_batch",  "num_gpu",        "main_gpu",        "low_vram",
      "f16_kv",   "logits_all", "use_mmap",       "use_mlock",       "num_thread",
      "num_keep", "vocab_only", "embedding_only", "penalize_newline"};
  return kNames;
}

// A sampler drift does not have, accepted at the value that turns it off.
MaybeError check_neutral(const Json& options, std::string_view name, double neutral) {
  const Json* v = field(options, name);
  if (!v) return std::nullopt;
  const std::string param = fmt::format("options.{}", name);
  if (!v->is_number()) return wrong_type(param, "a number", *v);
  if (v->get<double>() != neutral)
    return bad_request(fmt::format("'{}' is not supported by this server (only {}, which turns "
                                   "it off)",
                                   param, neutral),
                       param);
  return std::nullopt;
}

MaybeError read_option_values(const Json& o, GenerationOptions& out,
                              std::optional<int64_t>& num_ctx) {
  SamplingSettings& s = out.sampling;
  std::optional<int64_t> i;
  if (auto e =
          read_number_field(o, "temperature", "options.temperature", 0, 2, false, s.temperature))
    return e;
  if (auto e = read_number_field(o, "top_p", "options.top_p", 0, 1, false, s.top_p)) return e;
  if (auto e = read_number_field(o, "min_p", "options.min_p", 0, 1, false, s.min_p)) return e;
  if (auto e = read_number_field(o, "repeat_penalty", "options.repeat_penalty", 0, 10, true,
                                 s.repetition_penalty))
    return e;
  if (auto e = read_number_field(o, "presence_penalty", "options.presence_penalty", -2, 2, false,
                                 s.presence_penalty))
    return e;
  if (auto e = read_number_field(o, "frequency_penalty", "options.frequency_penalty", -2, 2, false,
                                 s.frequency_penalty))
    return e;
  // top_k 0: no limit, as in Ollama.
  if (auto e = read_int_field(o, "top_k", "options.top_k", 0, kInt32Max, i)) return e;
  if (i) s.top_k = int32_t(*std::exchange(i, std::nullopt));
  // repeat_last_n: -1 the whole context (drift's -1 too), 0 none.
  if (auto e = read_int_field(o, "repeat_last_n", "options.repeat_last_n", -1, kInt32Max, i))
    return e;
  if (i) s.penalty_last_n = int32_t(*std::exchange(i, std::nullopt));
  if (auto e = read_int_field(o, "seed", "options.seed", std::numeric_limits<int64_t>::min(),
                              std::numeric_limits<int64_t>::max(), i))
    return e;
  if (i) s.seed = uint64_t(*std::exchange(i, std::nullopt));
  // num_predict: -1 no limit, -2 until the context is full (both: the engine's bound).
  if (auto e = read_int_field(o, "num_predict", "options.num_predict", -2, kInt32Max, i)) return e;
  if (i && *i == 0)
    return bad_request("'options.num_predict' must be -1, -2 or at least 1, got 0",
                       "options.num_predict");
  if (i && *i > 0) out.max_tokens = int32_t(*i);
  i.reset();
  if (auto e = read_int_field(o, "num_ctx", "options.num_ctx", 1, kInt32Max, num_ctx)) return e;
  if (const Json* stop = field(o, "stop")) {
    if (!stop->is_array()) return wrong_type("options.stop", "an array of strings", *stop);
    std::vector<const Json*> items;
    for (const Json& s : *stop) items.push_back(&s);
    if (auto e = read_stop_strings(items, "options.stop", "an array of strings", out.stop))
      return e;
    out.stop_param = "options.stop";
  }
  return std::nullopt;
}

MaybeError read_options(const Json& body, GenerationOptions& out, std::optional<int64_t>& num_ctx) {
  const Json* o = field(body, "options");
  if (!o) return std::nullopt;
  if (!o->is_object()) return wrong_type("options", "an object", *o);
  static const std::set<std::string_view> kSampling = {"temperature",
                                                       "top_p",
                                                       "min_p",
                                                       "repeat_penalty",
                                                       "presence_penalty",
                                                       "frequency_penalty",
                                                       "top_k",
                                                       "repeat_last_n",
                                                       "seed",
                                                       "num_predict",
                                                       "num_ctx",
                                                       "stop",
                                                       "mirostat",
                                                       "mirostat_tau",
                                                       "mirostat_eta",
                                                       "tfs_z",
                                                       "typical_p"};
  for (const auto& [name, value] : o->items())
    if (!kSampling.contains(name) && !load_time_options().contains(name))
      return bad_request(fmt::format("'options.{}' is not an option this server knows", name),
                         fmt::format("options.{}", name));
  if (auto e = check_neutral(*o, "mirostat", 0)) return e;
  if (auto e = check_neutral(*o, "tfs_z", 1)) return e;
  if (auto e = check_neutral(*o, "typical_p", 1)) return e;
  return read_option_values(*o, out, num_ctx);
}

// "json", "" (free text) or a JSON schema object.
MaybeError read_format(const Json& body, GenerationOptions& out) {
  const Json* format = field(body, "format");
  if (!format) return std::nullopt;
  if (format->is_string()) {
    if (*format == "") return std::nullopt;
    if (*format != "json")
      return bad_request("'format' must be \"json\" or a JSON schema object", "format");
    out.constraint = OutputConstraint{GrammarSpec{GrammarKind::kJsonObject, ""}, "format"};
    return std::nullopt;
  }
  if (!format->is_object())
    return wrong_type("format", "\"json\" or a JSON schema object", *format);
  out.constraint = json_schema_constraint(nlohmann::json::parse(format->dump()), "format");
  return std::nullopt;
}

MaybeError read_think(const Json& body, std::optional<OllamaThink>& out) {
  const Json* think = field(body, "think");
  if (!think) return std::nullopt;
  if (think->is_boolean()) {
    out = OllamaThink{think->get<bool>(), std::nullopt};
    return std::nullopt;
  }
  if (!think->is_string() || (*think != "low" && *think != "medium" && *think != "high"))
    return bad_request("'think' must be true, false, \"low\", \"medium\" or \"high\"", "think");
  out = OllamaThink{true, think->get<std::string>()};
  return std::nullopt;
}

// keep_alive: a duration ("5m", "1h", "-1") or seconds. The model stays loaded while the server
// runs, so it is only checked.
MaybeError read_keep_alive(const Json& body) {
  const Json* v = field(body, "keep_alive");
  if (v && !v->is_string() && !v->is_number())
    return wrong_type("keep_alive", "a duration string or a number of seconds", *v);
  return std::nullopt;
}

// The options every generating request shares.
MaybeError read_generation_fields(const Json& body, OllamaGenerateRequest& r) {
  std::optional<bool> stream;
  if (auto e = read_bool_field(body, "stream", "stream", stream)) return e;
  r.options.stream = stream.value_or(true);  // Ollama streams unless told not to
  if (auto e = read_options(body, r.options, r.num_ctx)) return e;
  if (auto e = read_format(body, r.options)) return e;
  if (auto e = read_think(body, r.think)) return e;
  return read_keep_alive(body);
}

// An assistant turn's tool_calls: [{"function": {"name", "arguments": {...}}, "id"?}] -> OpenAI's
// shape with the arguments as the object templates print; each call gets an id (its own or
// "call_<message>_<n>") that a later tool turn can answer.
MaybeError read_tool_calls(const Json& calls, const std::string& param, size_t message,
                           ChatMessage& turn) {
  if (!calls.is_array()) return wrong_type(param, "an array", calls);
  if (calls.size() > kMaxToolCallsPerTurn)
    return bad_request(
        fmt::format("an assistant turn may make at most {} tool calls", kMaxToolCallsPerTurn),
        param);
  turn.tool_calls = Json::array();
  for (size_t j = 0; j < calls.size(); ++j) {
    const std::string at = fmt::format("{}[{}]", param, j);
    const Json* function = calls[j].is_object() ? field(calls[j], "function") : nullptr;
    if (!function || !function->is_object())
      return bad_request(fmt::format("{} needs a 'function' object", at), at + ".function");
    std::optional<std::string> name, id;
    if (auto e = read_string_field(*function, "name", at + ".function.name", name)) return e;
    if (!name) return bad_request(fmt::format("{}.function needs a 'name'", at), at);
    if (auto e = read_string_field(calls[j], "id", at + ".id", id)) return e;
    const Json* arguments = field(*function, "arguments");
    if (arguments && !arguments->is_object())
      return wrong_type(at + ".function.arguments", "an object", *arguments);
    turn.tool_calls.push_back(
        Json{{"id", id.value_or(fmt::format("call_{}_{}", message, j))},
             {"type", "function"},
             {"function",
              Json{{"name", *name}, {"arguments", arguments ? *arguments : Json::object()}}}});
  }
  return std::nullopt;
}

// The id of the latest call named `name` in the turns before, if any.
std::optional<std::string> latest_call_id(const std::vector<ChatMessage>& turns,
                                          const std::string& name) {
  for (auto m = turns.rbegin(); m != turns.rend(); ++m) {
    if (!m->tool_calls.is_array()) continue;
    for (auto call = m->tool_calls.rbegin(); call != m->tool_calls.rend(); ++call)
      if ((*call)["function"]["name"] == name) return (*call)["id"].get<std::string>();
  }
  return std::nullopt;
}

MaybeError read_message(const Json& m, size_t i, std::vector<ChatMessage>& out) {
  const std::string param = fmt::format("messages[{}]", i);
  if (!m.is_object()) return wrong_type(param, "an object", m);
  std::optional<std::string> role, content, thinking, tool_name;
  if (auto e = read_string_field(m, "role", param + ".role", role)) return e;
  if (!role || (*role != "system" && *role != "user" && *role != "assistant" && *role != "tool"))
    return bad_request(fmt::format("{}.role must be \"system\", \"user\", \"assistant\" or "
                                   "\"tool\"",
                                   param),
                       param + ".role");
  for (const auto& [name, value] : m.items()) {
    if (name == "images" && !value.is_null() && !(value.is_array() && value.empty()))
      return bad_request(
          fmt::format("{}.images: images are not supported: this server's model reads text only",
                      param),
          param + ".images");
    if (name != "role" && name != "content" && name != "thinking" && name != "tool_calls" &&
        name != "tool_name" && name != "images")
      return bad_request(fmt::format("{}.{}: unknown field", param, name), param + "." + name);
  }
  if (auto e = read_string_field(m, "content", param + ".content", content)) return e;
  if (auto e = read_string_field(m, "thinking", param + ".thinking", thinking)) return e;
  if (auto e = read_string_field(m, "tool_name", param + ".tool_name", tool_name)) return e;
  ChatMessage turn{*role, content.value_or("")};
  if (thinking && *role == "assistant") turn.reasoning_content = std::move(thinking);
  if (const Json* calls = field(m, "tool_calls")) {
    if (*role != "assistant")
      return bad_request(fmt::format("{}.tool_calls: only an assistant turn makes calls", param),
                         param + ".tool_calls");
    if (auto e = read_tool_calls(*calls, param + ".tool_calls", i, turn)) return e;
  }
  if (*role == "tool" && tool_name) {
    turn.tool_call_id = latest_call_id(out, *tool_name);
    turn.name = std::move(tool_name);
  }
  out.push_back(std::move(turn));
  return std::nullopt;
}

MaybeError read_chat(const Json& body, OllamaGenerateRequest& r) {
  static const std::set<std::string_view> kKnown = {"model",   "messages", "tools",      "format",
                                                    "options", "stream",   "keep_alive", "think"};
  static const std::set<std::string_view> kUnsupported = {"logprobs", "top_logprobs"};
  if (auto e = check_field_names(body, kKnown, kUnsupported)) return e;
  const Json* list = field(body, "messages");
  if (list && !list->is_array()) return wrong_type("messages", "an array", *list);
  if (!list || list->empty()) {
    r.load_only = true;
    return std::nullopt;
  }
  if (list->size() > kMaxMessages)
    return bad_request(
        fmt::format("'messages' may hold at most {} messages, got {}", kMaxMessages, list->size()),
        "messages");
  for (size_t i = 0; i < list->size(); ++i)
    if (auto e = read_message((*list)[i], i, r.messages)) return e;
  // Ollama's tools are OpenAI's tool objects; the model may call one or answer in text.
  if (const Json* tools = field(body, "tools")) {
    auto parsed = parse_tool_request(Json{{"tools", *tools}});
    if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
    r.tools = std::move(std::get<ToolRequest>(parsed));
  }
  return std::nullopt;
}

MaybeError read_generate(const Json& body, OllamaGenerateRequest& r) {
  static const std::set<std::string_view> kKnown = {
      "model", "prompt", "system", "raw", "format", "options", "stream", "keep_alive", "think"};
  static const std::set<std::string_view> kUnsupported = {"suffix", "template", "context",
                                                          "images", "logprobs", "top_logprobs",
                                                          "width",  "height",   "steps"};
  if (auto e = check_field_names(body, kKnown, kUnsupported)) return e;
  std::optional<std::string> prompt, system;
  std::optional<bool> raw;
  if (auto e = read_string_field(body, "prompt", "prompt", prompt)) return e;
  if (auto e = read_string_field(body, "system", "system", system)) return e;
  if (auto e = read_bool_field(body, "raw", "raw", raw)) return e;
  if (!prompt || prompt->empty()) {
    r.load_only = true;
    return std::nullopt;
  }
  if (raw.value_or(false)) {
    if (system)
      return bad_request("'system' has no place in a raw prompt: write it into 'prompt'", "system");
    r.raw_prompt = std::move(prompt);
    return std::nullopt;
  }
  if (system) r.messages.push_back(ChatMessage{"system", std::move(*system)});
  r.messages.push_back(ChatMessage{"user", std::move(*prompt)});
  return std::nullopt;
}

std::variant<Json, ApiError> parse_object(std::string_view text) {
  auto parsed = parse_request_json<Json>(text);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  return std::move(std::get<Json>(parsed));
}

MaybeError read_model(const Json& body, std::string& out) {
  std::optional<std::string> model;
  if (auto e = read_string_field(body, "model", "model", model)) return e;
  if (!model || model->empty()) return bad_request("'model' is required", "model");
  out = std::move(*model);
  return std::nullopt;
}

}  // namespace

std::string_view ollama_base_name(std::string_view name) {
  constexpr std::string_view kLatest = ":latest";
  if (name.ends_with(kLatest)) name.remove_suffix(kLatest.size());
  return name;
}

std::variant<OllamaGenerateRequest, ApiError> parse_ollama_generate_request(
    std::string_view text, OllamaEndpoint endpoint) {
  auto parsed = parse_object(text);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  const Json& body = std::get<Json>(parsed);
  OllamaGenerateRequest r;
  r.endpoint = endpoint;
  if (auto e = read_model(body, r.model)) return *e;
  if (auto e = endpoint == OllamaEndpoint::kChat ? read_chat(body, r) : read_generate(body, r))
    return *e;
  if (auto e = read_generation_fields(body, r)) return *e;
  return r;
}

std::variant<OllamaEmbedRequest, ApiError> parse_ollama_embed_request(std::string_view text,
                                                                      bool legacy) {
  auto parsed = parse_object(text);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  const Json& body = std::get<Json>(parsed);
  OllamaEmbedRequest r;
  r.legacy = legacy;
  static const std::set<std::string_view> kEmbed = {"model",   "input",      "truncate",
                                                    "options", "keep_alive", "dimensions"};
  static const std::set<std::string_view> kLegacy = {"model", "prompt", "options", "keep_alive"};
  if (auto e = check_field_names(body, legacy ? kLegacy : kEmbed, {})) return *e;
  if (auto e = read_model(body, r.model)) return *e;
  const char* name = legacy ? "prompt" : "input";
  const Json* input = field(body, name);
  if (!input) return bad_request(fmt::format("'{}' is required", name), name);
  std::vector<const Json*> items;
  if (input->is_array() && !legacy)
    for (const Json& s : *input) items.push_back(&s);
  else
    items.push_back(input);
  if (items.empty() || items.size() > kMaxEmbeddingInputs)
    return bad_request(fmt::format("'{}' must hold 1 to {} strings, got {}", name,
                                   kMaxEmbeddingInputs, items.size()),
                       name);
  for (const Json* s : items) {
    if (!s->is_string())
      return wrong_type(name, legacy ? "a string" : "a string or an array of strings", *s);
    if (s->get_ref<const std::string&>().empty())
      return bad_request(fmt::format("'{}' must not hold an empty string", name), name);
    r.inputs.push_back(s->get<std::string>());
  }
  std::optional<bool> truncate;
  if (auto e = read_bool_field(body, "truncate", "truncate", truncate)) return *e;
  r.truncate = truncate.value_or(true);
  if (auto e = read_int_field(body, "dimensions", "dimensions", 1, kInt32Max, r.dimensions))
    return *e;
  // Only num_ctx means anything to an embedding; the others are checked as a chat's are.
  GenerationOptions unused;
  if (auto e = read_options(body, unused, r.num_ctx)) return *e;
  if (auto e = read_keep_alive(body)) return *e;
  return r;
}

std::variant<std::string, ApiError> parse_ollama_show_request(std::string_view text) {
  auto parsed = parse_object(text);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  const Json& body = std::get<Json>(parsed);
  if (auto e = check_field_names(body, {"model", "name", "verbose"}, {})) return *e;
  std::optional<std::string> model, name;
  std::optional<bool> verbose;
  if (auto e = read_string_field(body, "model", "model", model)) return *e;
  if (auto e = read_string_field(body, "name", "name", name)) return *e;
  if (auto e = read_bool_field(body, "verbose", "verbose", verbose)) return *e;
  if (!model) model = std::move(name);
  if (!model || model->empty()) return bad_request("'model' is required", "model");
  return std::move(*model);
}

}  // namespace drift::server
