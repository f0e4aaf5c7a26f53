// A model's chat template (GGUF `tokenizer.chat_template`) rendered as Hugging Face transformers'
// apply_chat_template renders it: the template sees `messages`, `tools` (none when not given),
// `documents` (none), `add_generation_prompt`, the special tokens and any extra context, and the
// engine behind it is drift's Jinja interpreter (jinja/template.h), which matches
// Python's jinja2 output byte for byte.
//
// An error — a template syntax error, or a conversation the template rejects with
// raise_exception (e.g. "Conversation roles must alternate user/assistant/...") — is returned
// with the template's message and its line and column, and the template's jinja::ErrorKind as
// its code (inputs that are not a conversation, checked before rendering, have none).
#pragma once

#include <ctime>
#include <functional>
#include <optional>
#include <string>

#include "gguf/gguf_file.h"
#include "jinja/json.h"
#include "jinja/render_options.h"
#include "jinja/template.h"
#include "util/error.h"

namespace drift {

struct ChatTemplateInputs {
  // OpenAI-style messages: objects with "role", "content" (a string or a list of parts),
  // optionally "tool_calls", "tool_call_id", "name", ... Use ordered JSON (jinja::Json) to keep
  // key order, which tojson output follows; nlohmann::json converts implicitly but sorts keys.
  jinja::Json messages = jinja::Json::array();
  bool add_generation_prompt = true;
  // The tokenizer's special tokens; unset ones stay undefined in the template, as in
  // transformers when the tokenizer has no such token.
  std::optional<std::string> bos_token;
  std::optional<std::string> eos_token;
  // Tool schemas (a JSON array); unset renders the template's no-tools branch.
  std::optional<jinja::Json> tools;
  // More template variables (a JSON object), e.g. {"enable_thinking": false}. They may replace
  // the special tokens but not messages, tools, documents or add_generation_prompt.
  jinja::Json extra_context = jinja::Json::object();
  // What strftime_now() reads (local time now when unset), and the sandbox limits.
  std::function<std::tm()> clock;
  jinja::RenderLimits limits;
};

class ChatTemplate {
 public:
  // Parses a template; a syntax error names its line and column.
  static Expected<ChatTemplate> parse(std::string source);
  // The template of a GGUF file's `tokenizer.chat_template`.
  static Expected<ChatTemplate> from_gguf(const GgufFile& file);

  // The prompt text for `inputs`.
  Expected<std::string> render(const ChatTemplateInputs& inputs) const;

  const std::string& source() const { return source_; }

 private:
  ChatTemplate(std::string source, jinja::Template compiled)
      : source_(std::move(source)), compiled_(std::move(compiled)) {}

  std::string source_;
  jinja::Template compiled_;
};

}  // namespace drift
