#include "server/openai_response.h"

#include <chrono>

namespace drift::server {

int64_t unix_seconds_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

using nlohmann::json;

namespace {

json envelope(const ResponseMeta& meta, bool chunk) {
  const char* object =
      meta.chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion";
  return json{{"id", meta.id},
              {"object", object},
              {"created", meta.created},
              {"model", meta.model},
              {"system_fingerprint", nullptr}};
}

}  // namespace

json usage_json(int64_t prompt_tokens, int64_t completion_tokens) {
  return json{{"prompt_tokens", prompt_tokens},
              {"completion_tokens", completion_tokens},
              {"total_tokens", prompt_tokens + completion_tokens}};
}

json response_json(const ResponseMeta& meta, const std::vector<ChoiceResult>& choices,
                   int64_t prompt_tokens, int64_t completion_tokens) {
  json out = envelope(meta, false);
  json list = json::array();
  for (const ChoiceResult& c : choices) {
    json choice{{"index", c.index}, {"logprobs", c.logprobs}, {"finish_reason", c.finish_reason}};
    if (meta.chat) {
      json message{{"role", "assistant"}, {"content", c.text}};
      if (c.reasoning_content)
        message["reasoning_content"] =
            c.reasoning_content->empty() ? json(nullptr) : json(*c.reasoning_content);
      if (!c.tool_calls.empty()) {
        if (c.text.empty()) message["content"] = nullptr;
        message["tool_calls"] = tool_calls_json(c.tool_calls, false);
      }
      choice["message"] = std::move(message);
    } else {
      choice["text"] = c.text;
    }
    list.push_back(std::move(choice));
  }
  out["choices"] = std::move(list);
  out["usage"] = usage_json(prompt_tokens, completion_tokens);
  return out;
}

json chunk_json(const ResponseMeta& meta, int32_t index, std::string_view text, bool with_role,
                const std::optional<std::string>& finish_reason, bool include_usage,
                json logprobs) {
  json out = envelope(meta, true);
  json choice{{"index", index},
              {"logprobs", std::move(logprobs)},
              {"finish_reason", finish_reason ? json(*finish_reason) : json(nullptr)}};
  if (meta.chat) {
    json delta = json::object();
    if (with_role) delta["role"] = "assistant";
    if (!text.empty() || with_role) delta["content"] = std::string(text);
    choice["delta"] = std::move(delta);
  } else {
    choice["text"] = std::string(text);
  }
  out["choices"] = json::array({std::move(choice)});
  if (include_usage) out["usage"] = nullptr;
  return out;
}

json reasoning_chunk_json(const ResponseMeta& meta, int32_t index, std::string_view text,
                          bool include_usage, json logprobs) {
  json out = envelope(meta, true);
  json choice{{"index", index},
              {"logprobs", std::move(logprobs)},
              {"finish_reason", nullptr},
              {"delta", json{{"reasoning_content", std::string(text)}}}};
  out["choices"] = json::array({std::move(choice)});
  if (include_usage) out["usage"] = nullptr;
  return out;
}

json tool_calls_json(std::span<const ToolCall> calls, bool with_index) {
  json list = json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    json call{{"id", calls[i].id},
              {"type", "function"},
              {"function", json{{"name", calls[i].name}, {"arguments", calls[i].arguments}}}};
    if (with_index) call["index"] = i;
    list.push_back(std::move(call));
  }
  return list;
}

json tool_calls_chunk_json(const ResponseMeta& meta, int32_t index, std::span<const ToolCall> calls,
                           bool include_usage) {
  json out = envelope(meta, true);
  json choice{{"index", index},
              {"logprobs", nullptr},
              {"finish_reason", nullptr},
              {"delta", json{{"tool_calls", tool_calls_json(calls, true)}}}};
  out["choices"] = json::array({std::move(choice)});
  if (include_usage) out["usage"] = nullptr;
  return out;
}

json usage_chunk_json(const ResponseMeta& meta, int64_t prompt_tokens, int64_t completion_tokens) {
  json out = envelope(meta, true);
  out["choices"] = json::array();
  out["usage"] = usage_json(prompt_tokens, completion_tokens);
  return out;
}

json logprobs_json(bool chat, std::span<const TokenLogprobEntry> entries,
                   const TokenTextFn& token_text, int64_t text_offset) {
  auto bytes_of = [](const std::string& s) {
    json b = json::array();
    for (unsigned char c : s) b.push_back(int(c));
    return b;
  };
  if (chat) {
    json content = json::array();
    for (const TokenLogprobEntry& e : entries) {
      const std::string text = token_text(e.token);
      json top = json::array();
      for (int32_t i = 0; i < e.logprobs.num_top; ++i) {
        const std::string alt = token_text(e.logprobs.top_ids[size_t(i)]);
        top.push_back(json{{"token", alt},
                           {"logprob", e.logprobs.top_logprobs[size_t(i)]},
                           {"bytes", bytes_of(alt)}});
      }
      content.push_back(json{{"token", text},
                             {"logprob", e.logprobs.logprob},
                             {"bytes", bytes_of(text)},
                             {"top_logprobs", std::move(top)}});
    }
    return json{{"content", std::move(content)}};
  }
  json tokens = json::array(), token_logprobs = json::array(), top_logprobs = json::array(),
       offsets = json::array();
  for (const TokenLogprobEntry& e : entries) {
    const std::string text = token_text(e.token);
    tokens.push_back(text);
    token_logprobs.push_back(e.logprobs.logprob);
    json top = json::object();
    for (int32_t i = 0; i < e.logprobs.num_top; ++i)
      top[token_text(e.logprobs.top_ids[size_t(i)])] = e.logprobs.top_logprobs[size_t(i)];
    top_logprobs.push_back(std::move(top));
    offsets.push_back(text_offset);
    text_offset += int64_t(text.size());
  }
  return json{{"tokens", std::move(tokens)},
              {"token_logprobs", std::move(token_logprobs)},
              {"top_logprobs", std::move(top_logprobs)},
              {"text_offset", std::move(offsets)}};
}

std::string dump_json(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace drift::server
