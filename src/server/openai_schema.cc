#include "server/openai_schema.h"

#include <fmt/format.h>

#include <cctype>
#include <cmath>
#include <limits>

#include "engine/session_store.h"
#include "server/json_fields.h"

namespace drift::server {
namespace {

using nlohmann::json;
using MaybeError = std::optional<ApiError>;

MaybeError get_int(const json& body, std::string_view name, int64_t lo, int64_t hi,
                   std::optional<int64_t>& out) {
  const json* v = field(body, name);
  if (!v) return std::nullopt;
  if (v->is_number_unsigned()) {
    // nlohmann stores every non-negative integer as unsigned.
    const uint64_t u = v->get<uint64_t>();
    if (u > uint64_t(hi) || (lo > 0 && u < uint64_t(lo)))
      return bad_request(fmt::format("'{}' must be in [{}, {}], got {}", name, lo, hi, u), name);
    out = int64_t(u);
    return std::nullopt;
  }
  if (!v->is_number_integer()) return wrong_type(name, "an integer", *v);
  const int64_t x = v->get<int64_t>();
  if (x < lo || x > hi)
    return bad_request(fmt::format("'{}' must be in [{}, {}], got {}", name, lo, hi, x), name);
  out = x;
  return std::nullopt;
}

// A number in [lo, hi] (or (lo, hi] when lo_open).
MaybeError get_number(const json& body, std::string_view name, double lo, double hi, bool lo_open,
                      std::optional<double>& out) {
  const json* v = field(body, name);
  if (!v) return std::nullopt;
  if (!v->is_number()) return wrong_type(name, "a number", *v);
  const double x = v->get<double>();
  const bool ok = std::isfinite(x) && (lo_open ? x > lo : x >= lo) && x <= hi;
  if (!ok)
    return bad_request(
        fmt::format("'{}' must be in {}{}, {}], got {}", name, lo_open ? "(" : "[", lo, hi, x),
        name);
  out = x;
  return std::nullopt;
}

MaybeError get_bool(const json& body, std::string_view name, std::optional<bool>& out) {
  return read_bool_field(body, name, name, out);
}

MaybeError get_string(const json& body, std::string_view name, std::optional<std::string>& out) {
  return read_string_field(body, name, name, out);
}

// Fields of the OpenAI API that drift does not implement: refused, so that a client never
// believes they took effect.
MaybeError refuse_unsupported(const json& body, bool chat) {
  // The deprecated forms of tools and tool_choice.
  for (std::string_view name : {"functions", "function_call"})
    if (field(body, name))
      return bad_request(fmt::format("'{}' is deprecated in OpenAI's API and not supported: use "
                                     "'tools' and 'tool_choice'",
                                     name),
                         name);
  if (!chat) {
    for (std::string_view name : {"tools", "tool_choice", "parallel_tool_calls"})
      if (field(body, name))
        return bad_request(fmt::format("'{}' is a chat field: use /v1/chat/completions", name),
                           name);
    if (field(body, "suffix"))
      return bad_request("'suffix' is not supported by this server yet", "suffix");
  }
  return std::nullopt;
}

MaybeError parse_stop(const json& body, std::vector<std::string>& out) {
  const json* v = field(body, "stop");
  if (!v) return std::nullopt;
  std::vector<const json*> items;
  if (v->is_string()) {
    items.push_back(v);
  } else if (v->is_array()) {
    for (const json& s : *v) items.push_back(&s);
  } else {
    return wrong_type("stop", "a string or an array of strings", *v);
  }
  return read_stop_strings(items, "stop", "a string or an array of strings", out);
}

// Everything both endpoints share. Logprobs differ per endpoint and are parsed by the callers.
MaybeError parse_common(const json& body, GenerationOptions& o) {
  std::optional<int64_t> i;
  std::optional<double> d;
  std::optional<bool> b;
  constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

  // max_completion_tokens is the newer name; when both are given it wins, as in OpenAI's API.
  if (auto e = get_int(body, "max_tokens", 1, kInt32Max, i)) return e;
  if (i) o.max_tokens = int32_t(*i);
  i.reset();
  if (auto e = get_int(body, "max_completion_tokens", 1, kInt32Max, i)) return e;
  if (i) o.max_tokens = int32_t(*i);
  i.reset();
  if (auto e = get_int(body, "n", 1, kMaxChoices, i)) return e;
  if (i) o.n = int32_t(*i);
  i.reset();

  if (auto e = get_number(body, "temperature", 0, 2, false, d)) return e;
  if (d) o.sampling.temperature = float(*d);
  d.reset();
  if (auto e = get_number(body, "top_p", 0, 1, true, d)) return e;
  if (d) o.sampling.top_p = float(*d);
  d.reset();
  // top_k: -1 and 0 mean "no limit", as in vLLM and llama.cpp: an explicit 0 that overrides a
  // default top-k (absent would take it).
  if (auto e = get_int(body, "top_k", -1, kInt32Max, i)) return e;
  if (i) o.sampling.top_k = *i >= 1 ? int32_t(*i) : 0;
  i.reset();
  if (auto e = get_number(body, "min_p", 0, 1, false, d)) return e;
  if (d) o.sampling.min_p = float(*d);
  d.reset();
  if (auto e = get_number(body, "presence_penalty", -2, 2, false, d)) return e;
  if (d) o.sampling.presence_penalty = float(*d);
  d.reset();
  if (auto e = get_number(body, "frequency_penalty", -2, 2, false, d)) return e;
  if (d) o.sampling.frequency_penalty = float(*d);
  d.reset();
  if (auto e = get_number(body, "repetition_penalty", 0, 10, true, d)) return e;
  if (d) o.sampling.repetition_penalty = float(*d);
  d.reset();
  // Seeds are any 64-bit integer (negative ones are taken modulo 2^64).
  if (auto e = get_int(body, "seed", std::numeric_limits<int64_t>::min(),
                       std::numeric_limits<int64_t>::max(), i))
    return e;
  if (i) o.sampling.seed = uint64_t(*i);
  i.reset();
  if (auto e = get_bool(body, "ignore_eos", b)) return e;
  if (b) o.sampling.ignore_eos = *b;
  b.reset();
  if (auto e = get_int(body, "priority", -kMaxPriority, kMaxPriority, i)) return e;
  if (i) o.priority = int32_t(*i);
  i.reset();
  if (auto e = get_number(body, "kv_keep", 0, 1, true, d)) return e;
  o.kv_keep = d;
  d.reset();

  // best_of: the best of several samples is not implemented; a value that asks for nothing more
  // than n (as clients send by default) is accepted.
  if (auto e = get_int(body, "best_of", 1, kMaxChoices, i)) return e;
  if (i && *i != o.n)
    return bad_request(fmt::format("'best_of' other than n ({}) is not supported, got {}", o.n, *i),
                       "best_of");
  i.reset();

  if (auto e = parse_stop(body, o.stop)) return e;
  if (auto e = parse_logit_bias(body, o.sampling.logit_bias)) return e;
  if (auto e = parse_output_constraint(body, o.constraint)) return e;
  if (auto e = get_bool(body, "stream", b)) return e;
  o.stream = b.value_or(false);
  b.reset();
  if (const json* so = field(body, "stream_options")) {
    if (!so->is_object()) return wrong_type("stream_options", "an object", *so);
    if (!o.stream)
      return bad_request("'stream_options' is only allowed when 'stream' is true",
                         "stream_options");
    if (auto e = get_bool(*so, "include_usage", b)) {
      e->param = "stream_options.include_usage";
      return e;
    }
    o.include_usage = b.value_or(false);
  }
  return std::nullopt;
}

MaybeError parse_model(const json& body, std::optional<std::string>& model) {
  return get_string(body, "model", model);
}

MaybeError parse_token_list(const json& v, std::string_view name, std::vector<int32_t>& out) {
  for (const json& t : v) {
    if (!t.is_number_integer() && !t.is_number_unsigned())
      return wrong_type(name, "a string, an array of strings or an array of token ids", t);
    if (t.is_number_unsigned() ? t.get<uint64_t>() > uint64_t(INT32_MAX)
                               : (t.get<int64_t>() < 0 || t.get<int64_t>() > INT32_MAX))
      return bad_request(
          fmt::format("'{}' holds token id {}, which is not a valid id", name, t.dump()), name);
    out.push_back(int32_t(t.get<int64_t>()));
  }
  return std::nullopt;
}

// prompt: a string, a list of strings, a list of token ids, or a list of such lists.
MaybeError parse_prompt(const json& body, std::vector<PromptInput>& prompts) {
  const json* v = field(body, "prompt");
  if (!v) return bad_request("'prompt' is required", "prompt");
  if (v->is_string()) {
    prompts.emplace_back(v->get<std::string>());
    return std::nullopt;
  }
  if (!v->is_array()) return wrong_type("prompt", "a string or an array", *v);
  if (v->empty()) return bad_request("'prompt' must not be an empty array", "prompt");
  const json& first = v->front();
  if (first.is_number()) {
    std::vector<int32_t> ids;
    if (auto e = parse_token_list(*v, "prompt", ids)) return e;
    prompts.emplace_back(std::move(ids));
    return std::nullopt;
  }
  if (v->size() > kMaxPrompts)
    return bad_request(
        fmt::format("'prompt' may hold at most {} prompts, got {}", kMaxPrompts, v->size()),
        "prompt");
  for (const json& p : *v) {
    if (p.is_string()) {
      prompts.emplace_back(p.get<std::string>());
    } else if (p.is_array()) {
      std::vector<int32_t> ids;
      if (auto e = parse_token_list(p, "prompt", ids)) return e;
      prompts.emplace_back(std::move(ids));
    } else {
      return wrong_type("prompt", "a string, an array of strings or an array of token ids", p);
    }
  }
  return std::nullopt;
}

// Message content: a string, or a list of {"type": "text", "text": ...} parts joined in order.
MaybeError flatten_content(const json& content, size_t index, std::string& out) {
  const std::string param = fmt::format("messages[{}].content", index);
  if (content.is_string()) {
    out = content.get<std::string>();
    return std::nullopt;
  }
  if (!content.is_array())
    return wrong_type(param, "a string or an array of content parts", content);
  for (const json& part : content) {
    if (!part.is_object()) return wrong_type(param, "an array of content parts", part);
    const json* type = field(part, "type");
    if (!type || !type->is_string() || type->get<std::string>() != "text")
      return bad_request(fmt::format("{}: only parts of type 'text' are supported", param), param);
    const json* text = field(part, "text");
    if (!text || !text->is_string())
      return bad_request(fmt::format("{}: a text part needs a string 'text'", param), param);
    out += text->get<std::string>();
  }
  return std::nullopt;
}

MaybeError parse_messages(const json& body, std::vector<ChatMessage>& messages) {
  const json* v = field(body, "messages");
  if (!v) return bad_request("'messages' is required", "messages");
  if (!v->is_array()) return wrong_type("messages", "an array", *v);
  if (v->empty()) return bad_request("'messages' must not be empty", "messages");
  if (v->size() > kMaxMessages)
    return bad_request(
        fmt::format("'messages' may hold at most {} messages, got {}", kMaxMessages, v->size()),
        "messages");
  messages.clear();
  for (size_t i = 0; i < v->size(); ++i) {
    const json& m = (*v)[i];
    const std::string param = fmt::format("messages[{}]", i);
    if (!m.is_object()) return wrong_type(param, "an object", m);
    const json* role = field(m, "role");
    if (!role || !role->is_string())
      return bad_request(fmt::format("{} needs a string 'role'", param), param + ".role");
    const std::string r = role->get<std::string>();
    if (r != "system" && r != "developer" && r != "user" && r != "assistant" && r != "tool")
      return bad_request(fmt::format("{}.role '{}' is not one of system, developer, user, "
                                     "assistant, tool",
                                     param, r),
                         param + ".role");
    // An assistant turn that only called tools has no content (null), as OpenAI sends it.
    const json* content = field(m, "content");
    if (!content && !(r == "assistant" && field(m, "tool_calls")))
      return bad_request(fmt::format("{} needs 'content'", param), param + ".content");
    std::string text;
    if (content)
      if (auto e = flatten_content(*content, i, text)) return e;
    ChatMessage msg;
    // Templates written for OpenAI know "developer" as "system".
    msg.role = r == "developer" ? "system" : r;
    msg.content = std::move(text);
    if (const json* name = field(m, "name"); name && name->is_string())
      msg.name = name->get<std::string>();
    if (const json* reasoning = field(m, "reasoning_content"); reasoning && r == "assistant") {
      if (!reasoning->is_string())
        return wrong_type(param + ".reasoning_content", "a string", *reasoning);
      msg.reasoning_content = reasoning->get<std::string>();
    }
    messages.push_back(std::move(msg));
  }
  return std::nullopt;
}

}  // namespace

std::variant<CompletionRequest, ApiError> parse_completion_request(const json& body) {
  CompletionRequest r;
  if (auto e = refuse_unsupported(body, false)) return *e;
  if (auto e = parse_model(body, r.model)) return *e;
  if (auto e = parse_prompt(body, r.prompts)) return *e;
  if (auto e = parse_common(body, r.options)) return *e;
  std::optional<bool> echo;
  if (auto e = get_bool(body, "echo", echo)) return *e;
  r.options.echo = echo.value_or(false);
  std::optional<int64_t> logprobs;
  if (auto e = get_int(body, "logprobs", 0, kMaxCompletionLogprobs, logprobs)) return *e;
  if (logprobs) r.options.logprobs = int32_t(*logprobs);
  if (r.prompts.size() * size_t(r.options.n) > kMaxPrompts)
    return bad_request(fmt::format("{} prompts x n={} make more than {} choices", r.prompts.size(),
                                   r.options.n, kMaxPrompts),
                       "n");
  if (auto e = get_string(body, "session_id", r.options.session_id)) return *e;
  if (const auto& id = r.options.session_id) {
    if (auto e = check_session_id(*id)) return *e;
    // A session runs one turn at a time, and a turn is one prompt with one continuation.
    if (r.prompts.size() != 1 || r.options.n != 1)
      return bad_request("a request with 'session_id' takes one prompt and n = 1", "session_id");
  }
  return r;
}

std::optional<ApiError> check_session_id(std::string_view id) {
  if (id.empty() || id.size() > kMaxSessionIdBytes)
    return bad_request(
        fmt::format("'session_id' must have 1 to {} bytes, got {}", kMaxSessionIdBytes, id.size()),
        "session_id");
  for (size_t i = 0; i < id.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(id[i]);
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') continue;
    return bad_request(
        fmt::format("'session_id' may contain only letters, digits, '-', '.', '_' and '~' (so that "
                    "DELETE /v1/sessions/{{id}} can name it), but byte {} is {}",
                    i, std::isprint(c) ? fmt::format("'{}'", char(c)) : fmt::format("0x{:02X}", c)),
        "session_id");
  }
  return std::nullopt;
}

std::optional<std::string> percent_decode(std::string_view segment) {
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  out.reserve(segment.size());
  for (size_t i = 0; i < segment.size(); ++i) {
    if (segment[i] != '%') {
      out += segment[i];
      continue;
    }
    if (i + 2 >= segment.size()) return std::nullopt;  // "%" or "%X" at the end
    const int high = hex(segment[i + 1]), low = hex(segment[i + 2]);
    if (high < 0 || low < 0) return std::nullopt;
    out += char(high * 16 + low);
    i += 2;
  }
  return out;
}

std::variant<ChatRequest, ApiError> parse_chat_request(const json& body) {
  ChatRequest r;
  if (auto e = refuse_unsupported(body, true)) return *e;
  if (auto e = parse_model(body, r.model)) return *e;
  if (auto e = parse_messages(body, r.messages)) return *e;
  if (auto e = parse_common(body, r.options)) return *e;
  std::optional<bool> logprobs;
  if (auto e = get_bool(body, "logprobs", logprobs)) return *e;
  std::optional<int64_t> top;
  if (auto e = get_int(body, "top_logprobs", 0, kMaxTopLogprobs, top)) return *e;
  if (top && !logprobs.value_or(false))
    return bad_request("'top_logprobs' requires 'logprobs' to be true", "top_logprobs");
  if (logprobs.value_or(false)) r.options.logprobs = int32_t(top.value_or(0));
  if (auto e = get_string(body, "reasoning_effort", r.reasoning_effort)) return *e;
  if (r.reasoning_effort && *r.reasoning_effort != "low" && *r.reasoning_effort != "medium" &&
      *r.reasoning_effort != "high")
    return bad_request(fmt::format("'reasoning_effort' must be \"low\", \"medium\" or \"high\", "
                                   "got \"{}\"",
                                   *r.reasoning_effort),
                       "reasoning_effort");
  // A chat request carries the whole conversation, and the prefix cache already reuses its KV;
  // a session continues raw token history, which a chat template's rendering of a partial
  // conversation cannot (templates add system preambles, BOS, ...).
  if (field(body, "session_id"))
    return bad_request(
        "'session_id' is supported on /v1/completions; a chat request sends the whole "
        "conversation and its cached prefix is reused without a session",
        "session_id");
  return r;
}

std::variant<TokenizeRequest, ApiError> parse_tokenize_request(const json& body) {
  TokenizeRequest r;
  std::optional<std::string> prompt;
  if (auto e = get_string(body, "prompt", prompt)) return *e;
  if (!prompt)
    if (auto e = get_string(body, "content", prompt)) return *e;  // llama.cpp's name
  r.prompt = std::move(prompt);
  if (field(body, "messages")) {
    std::vector<ChatMessage> messages;
    if (auto e = parse_messages(body, messages)) return *e;
    r.messages = std::move(messages);
  }
  if (r.prompt.has_value() == r.messages.has_value())
    return bad_request("give exactly one of 'prompt' (or 'content') and 'messages'", "prompt");
  std::optional<bool> add_special;
  if (auto e = get_bool(body, "add_special_tokens", add_special)) return *e;
  r.add_special = add_special.value_or(true);
  return r;
}

std::variant<std::vector<int32_t>, ApiError> parse_detokenize_request(const json& body) {
  const json* v = field(body, "tokens");
  if (!v) return bad_request("'tokens' is required", "tokens");
  if (!v->is_array()) return wrong_type("tokens", "an array of token ids", *v);
  std::vector<int32_t> ids;
  if (auto e = parse_token_list(*v, "tokens", ids)) return *e;
  return ids;
}

}  // namespace drift::server
