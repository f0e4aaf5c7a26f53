#include "chat/tool_call_reply.h"

namespace drift {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

}  // namespace

size_t ToolCallReply::streamable() const {
  size_t n = streamable_content_length(syntax_, reply_);
  // Rule: a Hermes reply's content is trimmed when a call follows, so its trailing whitespace
  // waits until text (or the end of a reply without calls) shows it is inside the content.
  if (syntax_ == ToolCallSyntax::kHermes)
    while (n > sent_ && is_space(reply_[n - 1])) --n;
  return n;
}

std::string ToolCallReply::push(std::string_view text) {
  reply_ += text;
  const size_t n = streamable();
  if (n <= sent_) return {};
  std::string out = reply_.substr(sent_, n - sent_);
  sent_ = n;
  return out;
}

std::string ToolCallReply::finish() {
  // Rule: the whole reply is parsed once; what went out is its content's start, so the rest of
  // that content follows. Otherwise (see the header's exception) what was held back is parsed.
  ParsedReply parsed = parse_tool_calls(syntax_, reply_);
  const std::string_view sent = std::string_view(reply_).substr(0, sent_);
  std::string content;
  if (std::string_view(parsed.content).starts_with(sent)) {
    content = parsed.content.substr(sent_);
  } else {
    parsed = parse_tool_calls(syntax_, std::string_view(reply_).substr(sent_));
    content = std::move(parsed.content);
  }
  calls_ = std::move(parsed.tool_calls);
  sent_ = reply_.size();
  return content;
}

}  // namespace drift
