#include "tokenizer/chat_prompt.h"

namespace drift {
namespace {

// llama.cpp's fallback for a model without a chat template.
constexpr const char* kChatmlTemplate =
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}";

std::optional<std::string> token_text_of(const Tokenizer& tokenizer, std::optional<int32_t> id) {
  if (!id) return std::nullopt;
  auto text = tokenizer.token_text(*id);
  if (!text.ok()) return std::nullopt;
  return std::string(*text);
}

}  // namespace

Expected<ChatPromptBuilder> ChatPromptBuilder::create(const GgufFile& file,
                                                      const Tokenizer& tokenizer,
                                                      std::optional<std::string> override_source) {
  ChatTemplateSource source = ChatTemplateSource::kOverride;
  std::string text;
  if (override_source) {
    text = std::move(*override_source);
  } else if (file.find("tokenizer.chat_template")) {
    DRIFT_ASSIGN_OR_RETURN(std::string_view model_text, file.get_string("tokenizer.chat_template"));
    text = std::string(model_text);
    source = ChatTemplateSource::kModel;
  } else {
    text = kChatmlTemplate;
    source = ChatTemplateSource::kChatmlFallback;
  }
  auto parsed = ChatTemplate::parse(std::move(text));
  if (!parsed.ok()) return make_error("chat template: {}", parsed.error().message);
  return ChatPromptBuilder(std::move(*parsed), source, token_text_of(tokenizer, tokenizer.bos()),
                           token_text_of(tokenizer, tokenizer.eos()), tokenizer.add_bos());
}

Expected<ChatPrompt> ChatPromptBuilder::render(ChatTemplateInputs inputs) const {
  if (!inputs.bos_token) inputs.bos_token = bos_;
  if (!inputs.eos_token) inputs.eos_token = eos_;
  DRIFT_ASSIGN_OR_RETURN(std::string text, template_.render(inputs));
  ChatPrompt prompt;
  prompt.add_special = !(add_bos_ && bos_ && !bos_->empty() && text.starts_with(*bos_));
  prompt.text = std::move(text);
  return prompt;
}

}  // namespace drift
