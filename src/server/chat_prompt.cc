#include "server/chat_prompt.h"

#include <string>
#include <string_view>

namespace drift::server {
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

ChatTemplateInputs inputs_for(jinja::Json messages) {
  ChatTemplateInputs in;
  in.messages = std::move(messages);
  in.add_generation_prompt = true;
  return in;
}

bool has_control_text(const Tokenizer& tokenizer, const std::string& text) {
  const EncodeOptions special{.add_special = false, .parse_special = true};
  const EncodeOptions plain{.add_special = false, .parse_special = false};
  return tokenizer.encode(text, special) != tokenizer.encode(text, plain);
}

}  // namespace

Expected<std::vector<int32_t>> tokenize_chat(const ChatPromptBuilder& builder,
                                             const Tokenizer& tokenizer,
                                             const jinja::Json& messages, size_t max_prompt_bytes) {
  DRIFT_ASSIGN_OR_RETURN(ChatPrompt plain, builder.render(inputs_for(messages)));
  if (plain.text.size() > max_prompt_bytes)
    return make_error(
        "the rendered prompt has {} bytes, more than the {} bytes that could fit this model's "
        "context",
        plain.text.size(), max_prompt_bytes);

  bool any_control = false;
  for (const auto& m : messages) {
    const std::string& content = m["content"].get_ref<const std::string&>();
    if (content.find(kOpen) != std::string::npos || content.find(kClose) != std::string::npos)
      return make_error("message content contains a marker reserved by this server");
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
  DRIFT_ASSIGN_OR_RETURN(ChatPrompt marked, builder.render(inputs_for(std::move(wrapped))));

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

}  // namespace drift::server
