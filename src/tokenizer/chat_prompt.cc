#include "tokenizer/chat_prompt.h"

#include <string_view>

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

Expected<RenderedChat> ChatPromptBuilder::render(ChatTemplateInputs inputs) const {
  if (!inputs.bos_token) inputs.bos_token = bos_;
  if (!inputs.eos_token) inputs.eos_token = eos_;
  DRIFT_ASSIGN_OR_RETURN(std::string text, template_.render(inputs));
  RenderedChat prompt;
  prompt.add_special = !(add_bos_ && bos_ && !bos_->empty() && text.starts_with(*bos_));
  prompt.text = std::move(text);
  return prompt;
}

namespace {

// U+F8F0 / U+F8F1 (private use) around a marker no template would produce.
constexpr std::string_view kOpen =
    "\xEF\xA3\xB0"
    "drift:content"
    "\xEF\xA3\xB0";
constexpr std::string_view kClose =
    "\xEF\xA3\xB1"
    "drift:content"
    "\xEF\xA3\xB1";
constexpr std::string_view kSpace = " \t\n\r\f\v";

bool has_control_text(const Tokenizer& tokenizer, const std::string& text) {
  const EncodeOptions special{.add_special = false, .parse_special = true};
  const EncodeOptions plain{.add_special = false, .parse_special = false};
  return tokenizer.encode(text, special) != tokenizer.encode(text, plain);
}

}  // namespace

Expected<std::vector<int32_t>> tokenize_chat(const ChatPromptBuilder& builder,
                                             const Tokenizer& tokenizer,
                                             ChatTemplateInputs inputs) {
  const jinja::Json& messages = inputs.messages;
  if (inputs.tools && has_control_text(tokenizer, inputs.tools->dump()))
    return make_error("a tool definition contains control-token text (such as a turn marker)");
  for (const auto& m : messages) {
    auto calls = m.find("tool_calls");
    if (calls != m.end() && has_control_text(tokenizer, calls->dump()))
      return make_error(
          "a message's tool call contains control-token text (such as a turn marker)");
  }
  DRIFT_ASSIGN_OR_RETURN(RenderedChat plain, builder.render(inputs));

  bool any_control = false;
  for (const auto& m : messages) {
    const std::string& content = m["content"].get_ref<const std::string&>();
    if (content.find(kOpen) != std::string::npos || content.find(kClose) != std::string::npos)
      return make_error("message content contains a marker reserved by drift");
    any_control = any_control || has_control_text(tokenizer, content);
  }
  if (!any_control)
    return tokenizer.encode(plain.text, {.add_special = plain.add_special, .parse_special = true});

  // Wrap the non-blank core of each content, so that trim/strip in a template acts as before.
  jinja::Json wrapped = messages;
  for (auto& m : wrapped) {
    const std::string content = m["content"].get<std::string>();
    const size_t begin = content.find_first_not_of(kSpace);
    if (begin == std::string::npos) continue;
    const size_t end = content.find_last_not_of(kSpace) + 1;
    m["content"] = content.substr(0, begin) + std::string(kOpen) +
                   content.substr(begin, end - begin) + std::string(kClose) + content.substr(end);
  }
  inputs.messages = std::move(wrapped);
  DRIFT_ASSIGN_OR_RETURN(RenderedChat marked, builder.render(std::move(inputs)));

  std::vector<int32_t> tokens;
  std::string reassembled;
  const std::string_view text = marked.text;
  bool first = true;  // BOS, when the renderer asks for it, goes before the first segment only
  auto add = [&](std::string_view segment, bool parse_special) {
    const bool add_special = first && plain.add_special;
    first = false;
    if (segment.empty() && !add_special) return;
    std::vector<int32_t> ids =
        tokenizer.encode(segment, {.add_special = add_special, .parse_special = parse_special});
    tokens.insert(tokens.end(), ids.begin(), ids.end());
    reassembled += segment;
  };
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t open = text.find(kOpen, pos);
    add(text.substr(pos, open == std::string_view::npos ? std::string_view::npos : open - pos),
        true);
    if (open == std::string_view::npos) break;
    const size_t close = text.find(kClose, open + kOpen.size());
    if (close == std::string_view::npos)
      return make_error("the chat template split a message's content");
    add(text.substr(open + kOpen.size(), close - open - kOpen.size()), false);
    pos = close + kClose.size();
  }
  if (reassembled != plain.text)
    return make_error(
        "a message contains control-token text (such as a turn marker) and this model's chat "
        "template transforms message content, so it cannot be kept as plain text; remove it");
  return tokens;
}

}  // namespace drift
