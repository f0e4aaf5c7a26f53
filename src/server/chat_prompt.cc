#include "server/chat_prompt.h"

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

ChatTemplateInputs inputs_for(const Tokenizer& tokenizer, jinja::Json messages) {
  ChatTemplateInputs in;
  in.messages = std::move(messages);
  in.add_generation_prompt = true;
  if (auto bos = tokenizer.bos())
    if (auto t = tokenizer.token_text(*bos); t.ok()) in.bos_token = std::string(*t);
  if (auto eos = tokenizer.eos())
    if (auto t = tokenizer.token_text(*eos); t.ok()) in.eos_token = std::string(*t);
  return in;
}

bool has_control_text(const Tokenizer& tokenizer, const std::string& text) {
  EncodeOptions special{.add_special = false, .parse_special = true};
  EncodeOptions plain{.add_special = false, .parse_special = false};
  return tokenizer.encode(text, special) != tokenizer.encode(text, plain);
}

void append(std::vector<int32_t>& out, const std::vector<int32_t>& ids) {
  out.insert(out.end(), ids.begin(), ids.end());
}

}  // namespace

Expected<ChatPrompt> build_chat_prompt(const ChatTemplate& chat_template,
                                       const Tokenizer& tokenizer, const jinja::Json& messages) {
  ChatPrompt prompt;
  DRIFT_ASSIGN_OR_RETURN(prompt.text, chat_template.render(inputs_for(tokenizer, messages)));
  const EncodeOptions with_control{.add_special = false, .parse_special = true};

  bool any_control = false;
  for (const auto& m : messages) {
    const std::string& content = m["content"].get_ref<const std::string&>();
    if (content.find(kOpen) != std::string::npos || content.find(kClose) != std::string::npos)
      return make_error("message content contains a reserved marker of this server");
    any_control = any_control || has_control_text(tokenizer, content);
  }
  if (!any_control) {
    prompt.tokens = tokenizer.encode(prompt.text, with_control);
    return prompt;
  }

  // Wrap the non-blank core of each content, so that trim/strip in a template acts as before.
  jinja::Json wrapped = messages;
  for (auto& m : wrapped) {
    std::string content = m["content"].get<std::string>();
    const size_t begin = content.find_first_not_of(kSpace);
    if (begin == std::string::npos) continue;
    const size_t end = content.find_last_not_of(kSpace) + 1;
    m["content"] = content.substr(0, begin) + std::string(kOpen) +
                   content.substr(begin, end - begin) + std::string(kClose) + content.substr(end);
  }
  DRIFT_ASSIGN_OR_RETURN(std::string marked, chat_template.render(inputs_for(tokenizer, wrapped)));

  const EncodeOptions as_text{.add_special = false, .parse_special = false};
  std::string reassembled;
  size_t pos = 0;
  while (pos < marked.size()) {
    const size_t open = marked.find(kOpen, pos);
    const std::string_view outside = std::string_view(marked).substr(
        pos, open == std::string::npos ? std::string::npos : open - pos);
    reassembled += outside;
    append(prompt.tokens, tokenizer.encode(outside, with_control));
    if (open == std::string::npos) break;
    const size_t close = marked.find(kClose, open + kOpen.size());
    if (close == std::string::npos)
      return make_error("the chat template split a message's content");
    const std::string_view inside =
        std::string_view(marked).substr(open + kOpen.size(), close - open - kOpen.size());
    reassembled += inside;
    append(prompt.tokens, tokenizer.encode(inside, as_text));
    pos = close + kClose.size();
  }
  if (reassembled != prompt.text)
    return make_error(
        "a message contains control-token text (such as a turn marker) and this model's chat "
        "template transforms message content, so it cannot be kept as plain text; remove it");
  return prompt;
}

}  // namespace drift::server
