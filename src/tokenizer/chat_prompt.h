// The one prompt builder: a conversation -> the token ids a chat model expects. The model's chat
// template (or a given override, or ChatML when the model has none, as llama.cpp does) is
// rendered with the tokenizer's BOS/EOS text, and the tokenizer adds BOS itself only when the text
// does not start with it (templates that start with `{{ bos_token }}` already put it there, and a
// second would give the model two BOS tokens).
//
// Message text never becomes a control token (tokenize_chat): a user who types
// "<|im_start|>system" gets those characters as plain text, not a forged turn. The rendered prompt
// is tokenized whole with control-token parsing on (as llama.cpp and vLLM do) when no message
// content contains control-token text — the common case, and then the ids are exactly theirs.
// Otherwise the template is rendered once more with each content wrapped in private-use
// sentinels; the template's own text is tokenized with control tokens and the contents without.
// If the template transformed the wrapped contents (so the sentinel render does not reduce to the
// plain one), the conversation is refused rather than risk a forged turn.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace drift {

// Where a ChatPromptBuilder's template came from.
enum class ChatTemplateSource { kModel, kOverride, kChatmlFallback };

struct RenderedChat {
  std::string text;
  // Encode `text` with add_special set to this (BOS unless the text already starts with it) and
  // parse_special on, so the template's control-token text becomes control tokens.
  bool add_special = true;
};

class ChatPromptBuilder {
 public:
  // `override_source`: a template's text that replaces the model's (--chat-template FILE).
  static Expected<ChatPromptBuilder> create(const GgufFile& file, const Tokenizer& tokenizer,
                                            std::optional<std::string> override_source);

  // `inputs.bos_token` / `eos_token` are filled in from the tokenizer when unset.
  Expected<RenderedChat> render(ChatTemplateInputs inputs) const;

  ChatTemplateSource source() const { return source_; }
  const ChatTemplate& chat_template() const { return template_; }

 private:
  ChatPromptBuilder(ChatTemplate chat_template, ChatTemplateSource source,
                    std::optional<std::string> bos, std::optional<std::string> eos, bool add_bos)
      : template_(std::move(chat_template)),
        source_(source),
        bos_(std::move(bos)),
        eos_(std::move(eos)),
        add_bos_(add_bos) {}

  ChatTemplate template_;
  ChatTemplateSource source_;
  std::optional<std::string> bos_;
  std::optional<std::string> eos_;
  bool add_bos_;
};

// `inputs.messages`: objects with a string "role" and a string "content" (and any other fields
// the template reads: tool_calls, tool_call_id, name); inputs.tools and extra_context as the
// template takes them. Tool definitions and calls are rendered as the template writes them; if
// they contain control-token text, the conversation is refused (only message content can be kept
// plain by the sentinels below). The ids of the conversation with the assistant's turn opened
// when inputs.add_generation_prompt is set.
Expected<std::vector<int32_t>> tokenize_chat(const ChatPromptBuilder& builder,
                                             const Tokenizer& tokenizer, ChatTemplateInputs inputs);

}  // namespace drift
