#include "chat/harmony_parser.h"

#include <algorithm>
#include <array>

#include "util/utf8.h"

namespace drift {
namespace {

// In a header's text, the markers stand as 0xFF and a letter: no UTF-8 text holds a 0xFF byte, so
// text a model writes can never be taken for one.
constexpr std::string_view kChannelMark =
    "\xFF"
    "C";
constexpr std::string_view kConstrainMark =
    "\xFF"
    "K";
constexpr std::string_view kAsciiSpace = " \t\n\r\f\v";

// The roles openai-harmony knows by name; any other first word of a header is a tool's name.
constexpr std::array<std::string_view, 5> kRoles = {"user", "assistant", "system", "developer",
                                                    "tool"};

bool is_ascii_space(char c) { return kAsciiSpace.find(c) != std::string_view::npos; }

std::string_view trim(std::string_view s) {
  const size_t begin = s.find_first_not_of(kAsciiSpace);
  if (begin == std::string_view::npos) return {};
  return s.substr(begin, s.find_last_not_of(kAsciiSpace) + 1 - begin);
}

std::vector<std::string> split_words(std::string_view s) {
  std::vector<std::string> words;
  size_t pos = 0;
  while (pos < s.size()) {
    while (pos < s.size() && is_ascii_space(s[pos])) ++pos;
    const size_t begin = pos;
    while (pos < s.size() && !is_ascii_space(s[pos])) ++pos;
    if (pos > begin) words.emplace_back(s.substr(begin, pos - begin));
  }
  return words;
}

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
}

// A header word as openai-harmony reports it: the markers written out.
std::string shown(std::string word) {
  replace_all(word, kConstrainMark, "<|constrain|>");
  replace_all(word, kChannelMark, "<|channel|>");
  return word;
}

std::string without_to(std::string_view word) {
  return shown(std::string(word.starts_with("to=") ? word.substr(3) : word));
}

}  // namespace

bool HarmonyTokens::is_marker(int32_t token) const {
  return token == start || token == end || token == message || token == channel ||
         token == constrain || token == return_ || token == call;
}

std::optional<HarmonyTokens> find_harmony_tokens(const Tokenizer& tokenizer) {
  HarmonyTokens t;
  const std::array<std::pair<std::string_view, int32_t*>, 7> markers = {{
      {"<|start|>", &t.start},
      {"<|end|>", &t.end},
      {"<|message|>", &t.message},
      {"<|channel|>", &t.channel},
      {"<|constrain|>", &t.constrain},
      {"<|return|>", &t.return_},
      {"<|call|>", &t.call},
  }};
  for (const auto& [text, id] : markers) {
    std::optional<int32_t> found = tokenizer.find_special(text);
    if (!found) return std::nullopt;
    *id = *found;
  }
  return t;
}

HarmonyParser::HarmonyParser(HarmonyTokens tokens) : tokens_(tokens) { open_header("assistant"); }

void HarmonyParser::open_header(std::string role_given) {
  state_ = State::kHeader;
  role_given_ = std::move(role_given);
  header_.clear();
  header_text_.clear();
}

void HarmonyParser::add_header_text_run() {
  header_ += repair_utf8(header_text_);
  header_text_.clear();
}

std::string HarmonyParser::push(int32_t token, std::string_view text) {
  const HarmonyTokens& m = tokens_;
  switch (state_) {
    case State::kExpectStart:
      if (token == m.start) {
        open_header("");
      } else if (token == m.channel) {
        open_header("assistant");
        header_ += kChannelMark;
      }
      return {};  // anything else between messages is dropped
    case State::kHeader:
      if (token == m.message) {
        read_header();
      } else if (token == m.channel || token == m.constrain) {
        add_header_text_run();
        header_ += token == m.channel ? kChannelMark : kConstrainMark;
      } else if (token == m.start) {
        open_header("");  // the header was abandoned
      } else if (m.is_marker(token)) {
        state_ = State::kExpectStart;  // a message that never had content
      } else {
        header_text_ += text;
      }
      return {};
    case State::kContent:
      break;
  }
  if (token == m.end || token == m.return_ || token == m.call) {
    end_message();
    return {};
  }
  if (token == m.start || token == m.channel) {
    end_message();
    open_header(token == m.start ? "" : "assistant");
    if (token == m.channel) header_ += kChannelMark;
    return {};
  }
  if (m.is_marker(token)) return {};  // <|message|>, <|constrain|>: never content
  pending_utf8_ += text;
  const size_t complete = utf8_complete_prefix_length(pending_utf8_);
  std::string delta = repair_utf8(std::string_view(pending_utf8_).substr(0, complete));
  pending_utf8_.erase(0, complete);
  current_.content += delta;
  return delta;
}

void HarmonyParser::finish() {
  if (state_ == State::kContent) end_message();
  state_ = State::kExpectStart;
}

// openai-harmony's header reading, over the marks: the first <|channel|> and the word after it
// (up to a space or '<') give the channel and are cut out; the rest, with a space put before
// each <|constrain|>, splits into words: the role (unless the prompt wrote it), then
// [recipient] [content type], a lone word or one starting with "to=" being the recipient.
void HarmonyParser::read_header() {
  add_header_text_run();
  current_ = HarmonyMessage{};
  std::string h = header_;
  if (const size_t at = h.find(kChannelMark); at != std::string::npos) {
    const size_t value = at + kChannelMark.size();
    size_t stop = value;
    while (stop < h.size() && !is_ascii_space(h[stop]) && h[stop] != '<' && h[stop] != '\xFF')
      ++stop;
    current_.channel = h.substr(value, stop - value);
    h = h.substr(0, at) + h.substr(stop);
  }
  h = std::string(trim(h));
  replace_all(h, kConstrainMark, std::string(" ") + std::string(kConstrainMark));
  std::vector<std::string> words = split_words(h);
  size_t first = 0;  // words before it are read
  if (!role_given_.empty()) {
    current_.role = role_given_;
  } else if (!words.empty()) {
    current_.role = words[0];
    const bool known = std::find(kRoles.begin(), kRoles.end(), words[0]) != kRoles.end();
    // An unknown first word is a tool's name when a recipient follows; else it is read as the
    // role all the same (openai-harmony refuses the header).
    if (!known && (words.size() > 1 || words[0].starts_with("to="))) first = 1;
  }
  if (first < words.size() && words[first] == current_.role) ++first;
  const size_t left = words.size() - first;
  if (left == 1) {
    current_.recipient = without_to(words.back());
  } else if (left >= 2) {
    if (words.back().starts_with("to=")) {
      current_.recipient = without_to(words.back());
    } else {
      current_.content_type = shown(words.back());
      current_.recipient = without_to(words[words.size() - 2]);
    }
  }
  // Words before those (openai-harmony refuses such a header) are not read.
  state_ = State::kContent;
  pending_utf8_.clear();
}

void HarmonyParser::end_message() {
  pending_utf8_.clear();  // a character the message never finished
  messages_.push_back(std::move(current_));
  current_ = HarmonyMessage{};
  state_ = State::kExpectStart;
}

}  // namespace drift
