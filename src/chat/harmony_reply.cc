#include "chat/harmony_reply.h"

#include <cstdint>

namespace drift {
namespace {

constexpr std::string_view kFunctions = "functions.";
constexpr std::string_view kSpace = " \t\n\r";

std::string_view trim(std::string_view s) {
  const size_t begin = s.find_first_not_of(kSpace);
  if (begin == std::string_view::npos) return {};
  return s.substr(begin, s.find_last_not_of(kSpace) + 1 - begin);
}

}  // namespace

HarmonyReply::Kind HarmonyReply::kind_of(const HarmonyMessage& message) {
  if (message.recipient.starts_with(kFunctions) && message.recipient.size() > kFunctions.size())
    return Kind::kCall;
  if (!message.recipient.empty()) return Kind::kIgnored;
  if (message.channel == "analysis") return Kind::kReasoning;
  return Kind::kContent;
}

void HarmonyReply::add(Kind kind, size_t message, std::string_view text, Delta& delta) {
  if (text.empty() || (kind != Kind::kReasoning && kind != Kind::kContent)) return;
  const bool reasoning = kind == Kind::kReasoning;
  size_t& last = reasoning ? last_reasoning_message_ : last_content_message_;
  std::string& out = reasoning ? delta.reasoning : delta.content;
  if (last != SIZE_MAX && last != message) out += '\n';
  last = message;
  out += text;
}

void HarmonyReply::take_completed_calls() {
  const std::vector<HarmonyMessage>& messages = parser_.messages();
  for (; messages_read_ < messages.size(); ++messages_read_) {
    const HarmonyMessage& m = messages[messages_read_];
    if (kind_of(m) != Kind::kCall) continue;
    const std::string_view arguments = trim(m.content);
    calls_.push_back(
        {m.recipient.substr(kFunctions.size()), arguments.empty() ? "{}" : std::string(arguments)});
  }
}

HarmonyReply::Delta HarmonyReply::push(int32_t token, std::string_view text) {
  Delta delta;
  if (!saw_marker_) {
    if (!tokens_.is_marker(token)) {
      unformatted_ += text;
    } else {
      saw_marker_ = true;
      unformatted_.clear();
    }
  }
  const std::string content = parser_.push(token, text);
  if (parser_.state() == HarmonyParser::State::kContent)
    add(kind_of(parser_.current()), parser_.messages().size(), content, delta);
  take_completed_calls();
  return delta;
}

HarmonyReply::Delta HarmonyReply::finish() {
  Delta delta;
  if (!saw_marker_) {
    delta.content = std::move(unformatted_);
    unformatted_.clear();
    return delta;
  }
  // The message being read ends here, cut: its text was given as it came; a call it was is lost.
  const bool cut_call = parser_.state() == HarmonyParser::State::kContent &&
                        kind_of(parser_.current()) == Kind::kCall;
  parser_.finish();
  if (cut_call) messages_read_ = parser_.messages().size();
  take_completed_calls();
  return delta;
}

}  // namespace drift
