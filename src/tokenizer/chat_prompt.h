// Turns a conversation into the prompt a chat model expects: the model's chat template (or a
// given override, or ChatML when the model has none, as llama.cpp does) rendered with the
// tokenizer's BOS/EOS text, plus whether the tokenizer must still add BOS itself. Templates that
// start with `{{ bos_token }}` already put it in the text, and adding it again would give the
// model two BOS tokens.
#pragma once

#include <optional>
#include <string>

#include "gguf/gguf_file.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace drift {

// Where a ChatPromptBuilder's template came from.
enum class ChatTemplateSource { kModel, kOverride, kChatmlFallback };

struct ChatPrompt {
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
  Expected<ChatPrompt> render(ChatTemplateInputs inputs) const;

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

}  // namespace drift
