#include "server/ollama_response.h"

#include <fmt/chrono.h>
#include <fmt/format.h>

#include "jinja/json.h"
#include "util/json_limits.h"

namespace drift::server {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

int64_t nanoseconds(Clock::duration d) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
}

// Compact, invalid UTF-8 as U+FFFD (openai_response.h's dump_json, which the fuzz tree's parsing
// library does not link).
std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string line(const json& j) { return dump(j) + "\n"; }

// A call's arguments as Ollama's clients take them: an object in the model's key order; text
// that is not one (a harmony model may write anything) is kept under "value" rather than lost.
jinja::Json call_arguments(const ToolCall& call) {
  Expected<jinja::Json> arguments = parse_bounded_json<jinja::Json>(call.arguments);
  if (arguments.ok() && arguments->is_object()) return std::move(arguments).value();
  return jinja::Json{{"value", call.arguments}};
}

json ollama_tool_calls(std::span<const ToolCall> calls) {
  json out = json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    // Parsed back into nlohmann's JSON (the body's type); the dump keeps the model's key order.
    json arguments = json::parse(
        call_arguments(calls[i]).dump(-1, ' ', false, jinja::Json::error_handler_t::replace));
    out.push_back({{"id", calls[i].id},
                   {"function",
                    {{"index", i}, {"name", calls[i].name}, {"arguments", std::move(arguments)}}}});
  }
  return out;
}

// "135M", "1.5B": how Ollama writes a parameter count.
std::string parameter_size(uint64_t count) {
  if (count >= 1'000'000'000) return fmt::format("{:.1f}B", count / 1e9);
  if (count >= 1'000'000) return fmt::format("{:.0f}M", count / 1e6);
  return fmt::format("{}", count);
}

json details_json(const ModelCard& card) {
  json families = json::array();
  if (!card.architecture.empty()) families.push_back(card.architecture);
  return {{"parent_model", ""},
          {"format", "gguf"},
          {"family", card.architecture},
          {"families", std::move(families)},
          {"parameter_size", parameter_size(card.parameter_count)},
          {"quantization_level", card.quantization}};
}

std::string modified_at(const ModelCard& card) {
  return ollama_timestamp(
      std::chrono::system_clock::time_point(std::chrono::seconds(card.modified_unix)));
}

}  // namespace

std::string ollama_error_json(const ApiError& error) {
  std::string message = error.message;
  if (error.param && message.find(*error.param) == std::string::npos)
    message = *error.param + ": " + message;
  return dump(json{{"error", message}});
}

std::string ollama_timestamp(std::chrono::system_clock::time_point t) {
  const auto since_epoch = t.time_since_epoch();
  const auto seconds = std::chrono::floor<std::chrono::seconds>(since_epoch);
  const int64_t nanos = nanoseconds(since_epoch - seconds);
  return fmt::format("{:%Y-%m-%dT%H:%M:%S}.{:09d}Z", std::chrono::sys_seconds(seconds), nanos);
}

OllamaReplyCodec::OllamaReplyCodec(OllamaEndpoint endpoint, std::string model, bool show_thinking,
                                   Clock::time_point received)
    : endpoint_(endpoint),
      model_(std::move(model)),
      show_thinking_(show_thinking),
      received_(received),
      submitted_(Clock::now()) {}

void OllamaReplyCodec::first_token() {
  if (!first_token_) first_token_ = Clock::now();
}

json OllamaReplyCodec::fragment(std::string_view content, std::string_view thinking) const {
  json out{{"model", model_}, {"created_at", ollama_timestamp(std::chrono::system_clock::now())}};
  if (endpoint_ == OllamaEndpoint::kChat) {
    json message{{"role", "assistant"}, {"content", content}};
    if (!thinking.empty()) message["thinking"] = thinking;
    out["message"] = std::move(message);
  } else {
    out["response"] = content;
    if (!thinking.empty()) out["thinking"] = thinking;
  }
  out["done"] = false;
  return out;
}

json OllamaReplyCodec::last(json out, int64_t prompt_tokens, int64_t completion_tokens) {
  const Clock::time_point now = Clock::now();
  const Clock::time_point first = first_token_.value_or(now);
  out["done"] = true;
  out["done_reason"] = done_reason_;
  out["total_duration"] = nanoseconds(now - received_);
  out["load_duration"] = nanoseconds(submitted_ - received_);
  out["prompt_eval_count"] = prompt_tokens;
  out["prompt_eval_duration"] = nanoseconds(first - submitted_);
  out["eval_count"] = completion_tokens;
  out["eval_duration"] = nanoseconds(now - first);
  return out;
}

std::string OllamaReplyCodec::stream_start(std::span<const std::string> /*echoes*/,
                                           int64_t /*prompt_tokens*/) {
  return {};  // Ollama's stream has no header line: its first line is the first fragment
}

std::string OllamaReplyCodec::reasoning_delta(int32_t /*index*/, std::string_view text,
                                              nlohmann::json /*logprobs*/) {
  if (!show_thinking_) return {};
  return line(fragment("", text));
}

std::string OllamaReplyCodec::content_delta(int32_t /*index*/, std::string_view text,
                                            nlohmann::json /*logprobs*/) {
  return line(fragment(text, ""));
}

std::string OllamaReplyCodec::tool_calls(int32_t /*index*/, std::span<const ToolCall> calls) {
  json out = fragment("", "");
  if (endpoint_ == OllamaEndpoint::kChat) out["message"]["tool_calls"] = ollama_tool_calls(calls);
  return line(out);
}

// Ollama says "stop" for a reply that called tools, "length" at num_predict.
std::string OllamaReplyCodec::choice_end(int32_t /*index*/, const ChoiceEnd& end,
                                         nlohmann::json /*logprobs*/) {
  done_reason_ = end.reason == "length" ? "length" : "stop";
  return {};
}

std::string OllamaReplyCodec::stream_end(int64_t prompt_tokens, int64_t completion_tokens) {
  return line(last(fragment("", ""), prompt_tokens, completion_tokens));
}

std::string OllamaReplyCodec::stream_error(const ApiError& error) {
  return ollama_error_json(error) + "\n";
}

std::string OllamaReplyCodec::response(const std::vector<ChoiceResult>& choices,
                                       int64_t prompt_tokens, int64_t completion_tokens) {
  const ChoiceResult& c = choices.at(0);  // Ollama has no n
  done_reason_ = c.finish_reason == "length" ? "length" : "stop";
  const std::string thinking = show_thinking_ ? c.reasoning_content.value_or("") : "";
  json out = fragment(c.text, thinking);
  if (endpoint_ == OllamaEndpoint::kChat && !c.tool_calls.empty())
    out["message"]["tool_calls"] = ollama_tool_calls(c.tool_calls);
  return dump(last(std::move(out), prompt_tokens, completion_tokens));
}

std::string ollama_load_reply(OllamaEndpoint endpoint, std::string_view model) {
  json out{{"model", model}, {"created_at", ollama_timestamp(std::chrono::system_clock::now())}};
  if (endpoint == OllamaEndpoint::kChat)
    out["message"] = {{"role", "assistant"}, {"content", ""}};
  else
    out["response"] = "";
  out["done"] = true;
  out["done_reason"] = "load";
  return dump(out);
}

json ollama_tags_json(std::string_view name, const ModelCard& card) {
  json model{{"name", name},
             {"model", name},
             {"modified_at", modified_at(card)},
             {"size", card.file_bytes},
             {"details", details_json(card)}};
  return {{"models", json::array({std::move(model)})}};
}

json ollama_ps_json(std::string_view name, const ModelCard& card, int64_t context_length) {
  // The whole model is in RAM (no GPU); it stays loaded while the server runs, so no expiry.
  json model{{"name", name},
             {"model", name},
             {"size", card.file_bytes},
             {"size_vram", 0},
             {"details", details_json(card)},
             {"context_length", context_length}};
  return {{"models", json::array({std::move(model)})}};
}

json ollama_show_json(const ModelCard& card, int64_t context_length,
                      const std::vector<std::string>& capabilities) {
  json info = card.model_info;
  if (!card.architecture.empty()) info["general.architecture"] = card.architecture;
  info["general.parameter_count"] = card.parameter_count;
  return {{"modelfile", ""},
          {"parameters", fmt::format("num_ctx {}", context_length)},
          {"template", card.chat_template},
          {"details", details_json(card)},
          {"model_info", std::move(info)},
          {"capabilities", capabilities},
          {"modified_at", modified_at(card)}};
}

}  // namespace drift::server
