#include "py_conversion.h"

#include <nanobind/stl/string.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <type_traits>

namespace nb = nanobind;

namespace drift::python {

namespace {

std::string py_type_name(const nb::handle& value) {
  return nb::cast<std::string>(nb::str(value.type().attr("__name__")));
}

// An int that fits T, else TypeError (not an int; bool is refused too) or ValueError (out of
// range).
template <typename T>
T int_of(const char* name, const nb::handle& value) {
  if (!nb::isinstance<nb::int_>(value) || nb::isinstance<nb::bool_>(value))
    throw nb::type_error(
        (std::string(name) + ": expected an int, got " + py_type_name(value)).c_str());
  using Wide = std::conditional_t<std::is_signed_v<T>, long long, unsigned long long>;
  Wide v = 0;
  if (!nb::try_cast<Wide>(value, v) || v < Wide(std::numeric_limits<T>::min()) ||
      v > Wide(std::numeric_limits<T>::max()))
    throw nb::value_error((std::string(name) + ": " + nb::cast<std::string>(nb::str(value)) +
                           " is out of range [" + std::to_string(std::numeric_limits<T>::min()) +
                           ", " + std::to_string(std::numeric_limits<T>::max()) + "]")
                              .c_str());
  return static_cast<T>(v);
}

double float_of(const char* name, const nb::handle& value) {
  if ((!nb::isinstance<nb::int_>(value) && !nb::isinstance<nb::float_>(value)) ||
      nb::isinstance<nb::bool_>(value))
    throw nb::type_error(
        (std::string(name) + ": expected a number, got " + py_type_name(value)).c_str());
  return nb::cast<double>(value);
}

bool bool_of(const char* name, const nb::handle& value) {
  if (!nb::isinstance<nb::bool_>(value))
    throw nb::type_error(
        (std::string(name) + ": expected a bool, got " + py_type_name(value)).c_str());
  return nb::cast<bool>(value);
}

std::string str_of(const char* name, const nb::handle& value) {
  if (!nb::isinstance<nb::str>(value))
    throw nb::type_error(
        (std::string(name) + ": expected a str, got " + py_type_name(value)).c_str());
  return nb::cast<std::string>(value);
}

std::vector<int32_t> ids_of(const char* name, const nb::handle& value) {
  if (!nb::isinstance<nb::list>(value) && !nb::isinstance<nb::tuple>(value))
    throw nb::type_error(
        (std::string(name) + ": expected a list of ints, got " + py_type_name(value)).c_str());
  std::vector<int32_t> ids;
  for (nb::handle item : value) ids.push_back(int_of<int32_t>(name, item));
  return ids;
}

}  // namespace

EngineOptions engine_options_from(const nb::dict& options) {
  EngineOptions o;
  for (auto [key, value] : options) {
    const std::string name = str_of("engine option name", key);
    const char* n = name.c_str();
    if (name == "threads")
      o.threads = int_of<int32_t>(n, value);
    else if (name == "parallel")
      o.parallel = int_of<int32_t>(n, value);
    else if (name == "ctx_size")
      o.ctx_size = int_of<int32_t>(n, value);
    else if (name == "batch_tokens")
      o.batch_tokens = int_of<int32_t>(n, value);
    else if (name == "kv_mib")
      o.kv_mib = float_of(n, value);
    else if (name == "kv_ram_fraction")
      o.kv_ram_fraction = float_of(n, value);
    else if (name == "page_size")
      o.page_size = int_of<int32_t>(n, value);
    else if (name == "kv_cache_dtype")
      o.kv_cache_dtype = str_of(n, value);
    else if (name == "admission")
      o.admission = str_of(n, value);
    else if (name == "preemption")
      o.preemption = str_of(n, value);
    else if (name == "policy")
      o.policy = str_of(n, value);
    else if (name == "spec")
      o.spec = str_of(n, value);
    else if (name == "spec_pool_mib")
      o.spec_pool_mib = float_of(n, value);
    else if (name == "spec_max_draft")
      o.spec_max_draft = int_of<int32_t>(n, value);
    else if (name == "spec_draft_model")
      o.spec_draft_model = str_of(n, value);
    else if (name == "spec_draft_kv_mib")
      o.spec_draft_kv_mib = float_of(n, value);
    else if (name == "max_queued")
      o.max_queued = int_of<int32_t>(n, value);
    else if (name == "default_max_tokens")
      o.default_max_tokens = int_of<int32_t>(n, value);
    else if (name == "no_chunked_prefill")
      o.no_chunked_prefill = bool_of(n, value);
    else if (name == "no_prefix_cache")
      o.no_prefix_cache = bool_of(n, value);
    else if (name == "no_hybrid_kv")
      o.no_hybrid_kv = bool_of(n, value);
    else if (name == "target_itl_ms")
      o.target_itl_ms = float_of(n, value);
    else if (name == "idle_step_ms")
      o.idle_step_ms = float_of(n, value);
    else if (name == "target_ttft_ms")
      o.target_ttft_ms = float_of(n, value);
    else if (name == "max_ttft_s")
      o.max_ttft_s = float_of(n, value);
    else if (name == "max_sessions")
      o.sessions.max_sessions = int_of<int32_t>(n, value);
    else if (name == "session_max_tokens")
      o.sessions.max_total_tokens = int_of<int64_t>(n, value);
    else if (name == "session_ttl")
      o.sessions.idle_ttl_seconds = float_of(n, value);
    else if (name == "kv_events_endpoint")
      o.kv_events.endpoint = str_of(n, value);
    else if (name == "kv_events_topic")
      o.kv_events.topic = str_of(n, value);
    else if (name == "kv_cache_dir")
      o.kv_cache_dir = str_of(n, value);
    else if (name == "kv_cache_dir_gib")
      o.kv_cache_dir_gib = float_of(n, value);
    else
      throw nb::value_error(
          ("unknown engine option '" + name +
           "' (the options are the CLI's flags with '_' for '-': threads, "
           "parallel, ctx_size, batch_tokens, kv_mib, kv_ram_fraction, "
           "page_size, kv_cache_dtype, spec, spec_pool_mib, spec_max_draft, spec_draft_model, "
           "spec_draft_kv_mib, admission, preemption, policy, max_queued, "
           "default_max_tokens, no_chunked_prefill, no_prefix_cache, no_hybrid_kv, "
           "target_itl_ms, idle_step_ms, target_ttft_ms, max_ttft_s, max_sessions, "
           "session_max_tokens, session_ttl, kv_events_endpoint, "
           "kv_events_topic, kv_cache_dir, kv_cache_dir_gib)")
              .c_str());
  }
  return o;
}

SamplingSettings sampling_from(const nb::dict& fields) {
  SamplingSettings s;
  for (auto [key, value] : fields) {
    const std::string name = str_of("sampling field name", key);
    const char* n = name.c_str();
    if (name == "temperature")
      s.temperature = float(float_of(n, value));
    else if (name == "top_p")
      s.top_p = float(float_of(n, value));
    else if (name == "top_k")
      s.top_k = int_of<int32_t>(n, value);
    else if (name == "min_p")
      s.min_p = float(float_of(n, value));
    else if (name == "repetition_penalty")
      s.repetition_penalty = float(float_of(n, value));
    else if (name == "presence_penalty")
      s.presence_penalty = float(float_of(n, value));
    else if (name == "frequency_penalty")
      s.frequency_penalty = float(float_of(n, value));
    else if (name == "seed")
      s.seed = int_of<uint64_t>(n, value);
    else if (name == "stop_token_ids")
      s.stop_token_ids = ids_of(n, value);
    else if (name == "ignore_eos")
      s.ignore_eos = bool_of(n, value);
    else if (name == "stop")
      continue;  // stop_strings_from
    else if (name == "logit_bias") {
      if (!nb::isinstance<nb::dict>(value))
        throw nb::type_error(
            ("logit_bias: expected a dict of token id to bias, got " + py_type_name(value))
                .c_str());
      for (auto [token, bias] : nb::borrow<nb::dict>(value))
        s.logit_bias.push_back({int_of<int32_t>(n, token), float(float_of(n, bias))});
    } else {
      throw nb::value_error(("unknown sampling field '" + name + "'").c_str());
    }
  }
  return s;
}

std::vector<std::string> stop_strings_from(const nb::dict& fields) {
  std::vector<std::string> stop;
  if (!fields.contains("stop")) return stop;
  nb::object value = fields["stop"];
  if (!nb::isinstance<nb::list>(value) && !nb::isinstance<nb::tuple>(value))
    throw nb::type_error(("stop: expected a list of str, got " + py_type_name(value)).c_str());
  for (nb::handle item : value) stop.push_back(str_of("stop", item));
  return stop;
}

namespace {

// OpenAI's content: a str, or a list of parts of which only {"type": "text"} ones are read.
std::string message_content(const nb::handle& content) {
  if (content.is_none()) return {};
  if (nb::isinstance<nb::str>(content)) return nb::cast<std::string>(content);
  if (!nb::isinstance<nb::list>(content))
    throw nb::type_error(
        ("message content: expected a str or a list of text parts, got " + py_type_name(content))
            .c_str());
  std::string text;
  for (nb::handle part : content) {
    if (!nb::isinstance<nb::dict>(part))
      throw nb::type_error("message content parts must be dicts");
    nb::dict d = nb::borrow<nb::dict>(part);
    if (!d.contains("type") || str_of("content part type", d["type"]) != "text")
      throw nb::value_error("message content: only {\"type\": \"text\"} parts are supported");
    text += str_of("content part text", d["text"]);
  }
  return text;
}

}  // namespace

Prompt prompt_from(const std::string& kind, const nb::handle& prompt) {
  if (kind == "text") return TextPrompt{str_of("prompt", prompt), true, true};
  if (kind == "tokens") return ids_of("prompt_token_ids", prompt);
  if (kind != "chat") throw nb::value_error(("unknown prompt kind '" + kind + "'").c_str());
  if (!nb::isinstance<nb::list>(prompt))
    throw nb::type_error(
        ("messages: expected a list of dicts, got " + py_type_name(prompt)).c_str());
  ChatPrompt chat;
  for (nb::handle item : prompt) {
    if (!nb::isinstance<nb::dict>(item))
      throw nb::type_error(("messages: expected dicts, got " + py_type_name(item)).c_str());
    nb::dict m = nb::borrow<nb::dict>(item);
    if (!m.contains("role")) throw nb::value_error("messages: a message has no 'role'");
    ChatMessage message(str_of("role", m["role"]),
                        m.contains("content") ? message_content(m["content"]) : std::string());
    if (m.contains("name") && !m["name"].is_none()) message.name = str_of("name", m["name"]);
    chat.messages.push_back(std::move(message));
  }
  return chat;
}

}  // namespace drift::python
