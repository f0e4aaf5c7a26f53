#include "jinja/lexer.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <deque>
#include <optional>

#include "jinja/unicode.h"

namespace drift::jinja {
namespace {

std::string normalize_newlines(std::string_view source, bool keep_trailing_newline) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out.push_back(source[i]);
    }
  }
  if (!keep_trailing_newline && !out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

bool is_ascii_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c >= 0x80;
}
bool is_name_char(unsigned char c) {
  return is_name_start(c) || is_ascii_digit(static_cast<char>(c));
}

// Decodes the code point at `pos` and its length in bytes.
std::pair<char32_t, size_t> code_point_at(std::string_view s, size_t pos) {
  const auto b0 = static_cast<unsigned char>(s[pos]);
  size_t len = b0 < 0x80 ? 1 : (b0 & 0xE0) == 0xC0 ? 2 : (b0 & 0xF0) == 0xE0 ? 3 : 4;
  len = std::min(len, s.size() - pos);
  const std::u32string points = decode_utf8(s.substr(pos, len), Utf8Policy::kStrict);
  if (points.size() != 1) return {0xFFFD, 1};
  return {points[0], len};
}

size_t skip_whitespace(std::string_view s, size_t pos) {
  while (pos < s.size()) {
    const auto [c, len] = code_point_at(s, pos);
    if (!py_isspace(c)) break;
    pos += len;
  }
  return pos;
}

bool all_whitespace(std::string_view s) { return skip_whitespace(s, 0) == s.size(); }

constexpr std::string_view kOperators2[] = {"//", "**", "==", "!=", ">=", "<="};
constexpr std::string_view kOperators1 = "+-/*%~[](){}><=.:|,;";

}  // namespace

// Lexes lazily, one tag (or one token inside a tag) at a time, so that a parser error stops the
// work early: a hostile template of 100k nested parentheses fails after 129 of them.
class Lexer::Impl {
 public:
  Impl(std::string source, const SyntaxOptions& options, uint32_t max_bracket_depth)
      : src_(std::move(source)), options_(options), max_bracket_depth_(max_bracket_depth) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i) {
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  Expected<Token> next() {
    while (tokens_.empty()) {
      if (in_tag_) {
        DRIFT_RETURN_IF_ERROR(step_tag());
      } else if (pos_ >= src_.size()) {
        tokens_.push_back(Token{TokenType::kEof, "", 0, 0, locate(src_.size())});
      } else {
        DRIFT_RETURN_IF_ERROR(step_root());
      }
    }
    Token t = std::move(tokens_.front());
    tokens_.pop_front();
    return t;
  }

 private:
  // Template data up to the next tag, and the tag's start (comments and raw blocks whole).
  Status step_root() {
    const size_t tag = find_tag_start(pos_);
    if (tag == std::string_view::npos) {
      emit_text(src_.substr(pos_), pos_);
      pos_ = src_.size();
      return Status::Ok();
    }
    const char kind = src_[tag + 1];
    size_t after = tag + 2;
    char sign = 0;
    if (after < src_.size() && (src_[after] == '-' || src_[after] == '+')) sign = src_[after++];

    std::string text = src_.substr(pos_, tag - pos_);
    apply_left_whitespace_control(text, sign, kind != '{', line_starting_);
    emit_text(std::move(text), pos_);

    if (kind == '%') {
      if (auto raw_end = match_raw_begin(after)) {
        DRIFT_ASSIGN_OR_RETURN(pos_, lex_raw(*raw_end, line_starting_));
        return Status::Ok();
      }
    }
    if (kind == '#') {
      DRIFT_ASSIGN_OR_RETURN(pos_, lex_comment(tag, after));
      line_starting_ = pos_ > 0 && src_[pos_ - 1] == '\n';
      return Status::Ok();
    }
    tag_is_block_ = kind == '%';
    tag_start_ = tag;
    emit(tag_is_block_ ? TokenType::kBlockBegin : TokenType::kVariableBegin, "", tag);
    brackets_.clear();
    in_tag_ = true;
    pos_ = after;
    return Status::Ok();
  }

  // One token inside {{ }} or {% %}, or the end delimiter.
  Status step_tag() {
    while (true) {
      if (pos_ >= src_.size())
        return error_at(tag_start_, "unexpected end of template inside a tag");
      const auto [cp, cp_len] = code_point_at(src_, pos_);
      if (!py_isspace(cp)) break;
      pos_ += cp_len;
    }
    if (brackets_.empty()) {
      if (auto end = match_tag_end(pos_, tag_is_block_)) {
        pos_ = *end;
        in_tag_ = false;
        line_starting_ = pos_ > 0 && src_[pos_ - 1] == '\n';
        return Status::Ok();
      }
    }
    const char c = src_[pos_];
    DRIFT_ASSIGN_OR_RETURN(std::optional<size_t> number_end, lex_number(pos_));
    if (number_end) {
      pos_ = *number_end;
      return Status::Ok();
    }
    if (is_name_start(static_cast<unsigned char>(c))) {
      size_t end = pos_;
      while (end < src_.size() && is_name_char(static_cast<unsigned char>(src_[end]))) ++end;
      emit(TokenType::kName, src_.substr(pos_, end - pos_), pos_);
      pos_ = end;
      return Status::Ok();
    }
    if (c == '\'' || c == '"') {
      DRIFT_ASSIGN_OR_RETURN(pos_, lex_string(pos_));
      return Status::Ok();
    }
    DRIFT_ASSIGN_OR_RETURN(pos_, lex_operator(pos_, brackets_));
    return Status::Ok();
  }

 private:
  SourceLocation locate(size_t offset) const {
    const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
    const size_t line = static_cast<size_t>(it - line_starts_.begin());
    return SourceLocation{static_cast<uint32_t>(line),
                          static_cast<uint32_t>(offset - line_starts_[line - 1] + 1)};
  }

  Error error_at(size_t offset, std::string message) const {
    return Error{fmt::format("syntax error at {}: {}", describe_location(locate(offset)), message)};
  }

  size_t find_tag_start(size_t pos) const {
    while (true) {
      pos = src_.find('{', pos);
      if (pos == std::string::npos || pos + 1 >= src_.size()) return std::string_view::npos;
      const char next = src_[pos + 1];
      if (next == '{' || next == '%' || next == '#') return pos;
      ++pos;
    }
  }

  void emit_text(std::string text, size_t offset) {
    if (text.empty()) return;
    tokens_.push_back(Token{TokenType::kText, std::move(text), 0, 0, locate(offset)});
  }

  void emit(TokenType type, std::string text, size_t offset) {
    tokens_.push_back(Token{type, std::move(text), 0, 0, locate(offset)});
  }

  // The whitespace control a tag applies to the text before it. `lstrip_applies` is false for
  // {{ }}, which lstrip_blocks never touches.
  void apply_left_whitespace_control(std::string& text, char sign, bool lstrip_applies,
                                     bool line_starting) const {
    if (sign == '-') {
      text = strip(text, false, true, nullptr);
      return;
    }
    if (sign == '+' || !options_.lstrip_blocks || !lstrip_applies) return;
    const size_t newline = text.rfind('\n');
    const size_t line_start = newline == std::string::npos ? 0 : newline + 1;
    if (line_start == 0 && !line_starting) return;
    const std::string_view rest = std::string_view(text).substr(line_start);
    if (!rest.empty() && all_whitespace(rest)) text.resize(line_start);
  }

  // After a closing `%}`/`#}` or `}}`: `-` strips all following whitespace, `+` nothing, and
  // a plain block or comment end drops one newline when trim_blocks is on.
  size_t apply_right_whitespace_control(size_t pos, char sign, bool trims) const {
    if (sign == '-') return skip_whitespace(src_, pos);
    if (sign == 0 && trims && options_.trim_blocks && pos < src_.size() && src_[pos] == '\n') {
      return pos + 1;
    }
    return pos;
  }

  // `{%[-+]? raw [-]?%}` starting after the `{%` and its sign: returns where the raw text begins.
  std::optional<size_t> match_raw_begin(size_t pos) const {
    pos = skip_whitespace(src_, pos);
    if (src_.compare(pos, 3, "raw") != 0) return std::nullopt;
    pos += 3;
    if (pos < src_.size() && is_name_char(static_cast<unsigned char>(src_[pos]))) {
      return std::nullopt;
    }
    pos = skip_whitespace(src_, pos);
    if (src_.compare(pos, 3, "-%}") == 0) return skip_whitespace(src_, pos + 3);
    if (src_.compare(pos, 2, "%}") == 0) return pos + 2;  // jinja2 applies no trim_blocks here
    return std::nullopt;
  }

  Expected<size_t> lex_raw(size_t content_start, bool& line_starting) {
    for (size_t pos = src_.find("{%", content_start); pos != std::string::npos;
         pos = src_.find("{%", pos + 1)) {
      size_t p = pos + 2;
      char sign = 0;
      if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) sign = src_[p++];
      p = skip_whitespace(src_, p);
      if (src_.compare(p, 6, "endraw") != 0) continue;
      p = skip_whitespace(src_, p + 6);
      char end_sign = 0;
      if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) end_sign = src_[p++];
      if (src_.compare(p, 2, "%}") != 0) continue;
      const bool raw_line_starting =
          content_start > 0 && src_[content_start - 1] == '\n';  // how the raw tag ended
      std::string text = src_.substr(content_start, pos - content_start);
      apply_left_whitespace_control(text, sign, true, raw_line_starting);
      emit_text(std::move(text), content_start);
      const size_t end = apply_right_whitespace_control(p + 2, end_sign, true);
      line_starting = end > 0 && src_[end - 1] == '\n';
      return end;
    }
    return error_at(content_start, "Missing end of raw directive");
  }

  Expected<size_t> lex_comment(size_t tag, size_t content_start) {
    const size_t close = src_.find("#}", content_start);
    if (close == std::string::npos) return error_at(tag, "Missing end of comment tag");
    char sign = 0;
    if (close > content_start && (src_[close - 1] == '-' || src_[close - 1] == '+')) {
      sign = src_[close - 1];
    }
    return apply_right_whitespace_control(close + 2, sign, true);
  }

  std::optional<size_t> match_tag_end(size_t pos, bool is_block) {
    const std::string_view close = is_block ? "%}" : "}}";
    if (is_block && src_.compare(pos, 3, "+%}") == 0) {
      emit(TokenType::kBlockEnd, "", pos);
      return pos + 3;
    }
    if (src_.compare(pos, 1, "-") == 0 && src_.compare(pos + 1, 2, close) == 0) {
      emit(is_block ? TokenType::kBlockEnd : TokenType::kVariableEnd, "", pos);
      return apply_right_whitespace_control(pos + 3, '-', is_block);
    }
    if (src_.compare(pos, 2, close) == 0) {
      emit(is_block ? TokenType::kBlockEnd : TokenType::kVariableEnd, "", pos);
      return apply_right_whitespace_control(pos + 2, 0, is_block);
    }
    return std::nullopt;
  }

  // Integer and float literals with jinja2's syntax (0b/0o/0x prefixes, `_` separators, floats
  // need digits on both sides of the point). Returns where the number ends, or nullopt if none
  // starts at `pos`.
  Expected<std::optional<size_t>> lex_number(size_t pos) {
    if (!is_ascii_digit(src_[pos])) return std::optional<size_t>();
    auto digits_end = [&](size_t p, auto is_digit) {
      // (_?digit)* after a first digit
      while (p < src_.size()) {
        if (is_digit(src_[p])) {
          ++p;
        } else if (src_[p] == '_' && p + 1 < src_.size() && is_digit(src_[p + 1])) {
          p += 2;
        } else {
          break;
        }
      }
      return p;
    };
    auto without_underscores = [](std::string_view s) {
      std::string out;
      for (char c : s) {
        if (c != '_') out.push_back(c);
      }
      return out;
    };
    const bool after_dot = pos > 0 && src_[pos - 1] == '.';
    // Float: digits, then a fraction and/or an exponent.
    if (!after_dot) {
      size_t p = digits_end(pos + 1, is_ascii_digit);
      bool is_float = false;
      if (p + 1 < src_.size() && src_[p] == '.' && is_ascii_digit(src_[p + 1])) {
        p = digits_end(p + 2, is_ascii_digit);
        is_float = true;
      }
      if (p < src_.size() && (src_[p] == 'e' || src_[p] == 'E')) {
        size_t q = p + 1;
        if (q < src_.size() && (src_[q] == '+' || src_[q] == '-')) ++q;
        if (q < src_.size() && is_ascii_digit(src_[q])) {
          p = digits_end(q + 1, is_ascii_digit);
          is_float = true;
        }
      }
      if (is_float) {
        const std::string text = without_underscores(std::string_view(src_).substr(pos, p - pos));
        Token token{TokenType::kFloat, text, 0, 0, locate(pos)};
        std::from_chars(text.data(), text.data() + text.size(), token.float_value);
        tokens_.push_back(std::move(token));
        return std::optional<size_t>(p);
      }
    }
    // Integer.
    int base = 10;
    size_t start = pos;
    size_t end;
    const char prefix = pos + 1 < src_.size() ? static_cast<char>(src_[pos + 1] | 0x20) : 0;
    auto is_bin = [](char c) { return c == '0' || c == '1'; };
    auto is_oct = [](char c) { return c >= '0' && c <= '7'; };
    auto is_hex = [](char c) {
      return is_ascii_digit(c) || ((c | 0x20) >= 'a' && (c | 0x20) <= 'f');
    };
    auto prefixed_end = [&](auto is_digit) {
      // 0x(_?digit)+
      size_t p = pos + 2;
      if (p < src_.size() && src_[p] == '_') ++p;
      if (p >= src_.size() || !is_digit(src_[p])) return std::string::npos;
      return digits_end(p + 1, is_digit);
    };
    if (src_[pos] == '0' && (prefix == 'b' || prefix == 'o' || prefix == 'x')) {
      base = prefix == 'b' ? 2 : prefix == 'o' ? 8 : 16;
      end = base == 2   ? prefixed_end(is_bin)
            : base == 8 ? prefixed_end(is_oct)
                        : prefixed_end(is_hex);
      if (end == std::string::npos) {
        end = pos + 1;  // just "0"; the letter lexes as a name
        base = 10;
      } else {
        start = pos + 2;
      }
    } else if (src_[pos] == '0') {
      end = digits_end(pos + 1, [](char c) { return c == '0'; });
    } else {
      end = digits_end(pos + 1, is_ascii_digit);
    }
    const std::string digits =
        without_underscores(std::string_view(src_).substr(start, end - start));
    Token token{TokenType::kInteger, src_.substr(pos, end - pos), 0, 0, locate(pos)};
    const auto result =
        std::from_chars(digits.data(), digits.data() + digits.size(), token.int_value, base);
    if (result.ec != std::errc()) {
      return error_at(pos, "integer literal is too large (drift's integers are 64-bit)");
    }
    tokens_.push_back(std::move(token));
    return std::optional<size_t>(end);
  }

  Expected<size_t> lex_string(size_t pos) {
    const char quote = src_[pos];
    std::string value;
    size_t p = pos + 1;
    while (true) {
      if (p >= src_.size()) return error_at(pos, "unterminated string literal");
      const char c = src_[p];
      if (c == quote) break;
      if (c != '\\') {
        value.push_back(c);
        ++p;
        continue;
      }
      if (p + 1 >= src_.size()) return error_at(pos, "unterminated string literal");
      DRIFT_ASSIGN_OR_RETURN(p, unescape(p, value));
    }
    emit(TokenType::kString, std::move(value), pos);
    return p + 1;
  }

  // Python's unicode-escape decoding of the escape at `p` (a backslash); appends the result and
  // returns the position after the escape.
  Expected<size_t> unescape(size_t p, std::string& out) {
    const char e = src_[p + 1];
    auto hex_escape = [&](size_t digits, const char* what) -> Expected<size_t> {
      uint32_t v = 0;
      for (size_t k = 0; k < digits; ++k) {
        const size_t q = p + 2 + k;
        if (q >= src_.size()) return error_at(p, fmt::format("truncated {} escape", what));
        const char h = src_[q];
        const char lower_h = static_cast<char>(h | 0x20);
        if (!is_ascii_digit(h) && !(lower_h >= 'a' && lower_h <= 'f')) {
          return error_at(p, fmt::format("truncated {} escape", what));
        }
        v = v * 16 + static_cast<uint32_t>(is_ascii_digit(h) ? h - '0' : lower_h - 'a' + 10);
      }
      if (v > 0x10FFFF) return error_at(p, "illegal Unicode character");
      append_utf8(v, out, Utf8Policy::kStrict);
      return p + 2 + digits;
    };
    switch (e) {
      case '\n':
        return p + 2;  // line continuation
      case '\\':
      case '\'':
      case '"':
        out.push_back(e);
        return p + 2;
      case 'a':
        out.push_back('\a');
        return p + 2;
      case 'b':
        out.push_back('\b');
        return p + 2;
      case 'f':
        out.push_back('\f');
        return p + 2;
      case 'n':
        out.push_back('\n');
        return p + 2;
      case 'r':
        out.push_back('\r');
        return p + 2;
      case 't':
        out.push_back('\t');
        return p + 2;
      case 'v':
        out.push_back('\v');
        return p + 2;
      case 'x':
        return hex_escape(2, "\\xXX");
      case 'u':
        return hex_escape(4, "\\uXXXX");
      case 'U':
        return hex_escape(8, "\\UXXXXXXXX");
      case 'N':
        return error_at(p, "\\N{...} escapes are not supported");
      default:
        break;
    }
    if (e >= '0' && e <= '7') {
      uint32_t v = 0;
      size_t q = p + 1;
      for (int k = 0; k < 3 && q < src_.size() && src_[q] >= '0' && src_[q] <= '7'; ++k, ++q) {
        v = v * 8 + static_cast<uint32_t>(src_[q] - '0');
      }
      append_utf8(v, out, Utf8Policy::kStrict);
      return q;
    }
    out.push_back('\\');  // unknown escapes stay as written
    return p + 1;
  }

  Expected<size_t> lex_operator(size_t pos, std::vector<char>& brackets) {
    for (std::string_view op : kOperators2) {
      if (src_.compare(pos, 2, op) == 0) {
        emit(TokenType::kOperator, std::string(op), pos);
        return pos + 2;
      }
    }
    const char c = src_[pos];
    if (kOperators1.find(c) == std::string_view::npos) {
      const auto [cp, len] = code_point_at(src_, pos);
      std::string shown;
      append_utf8(cp, shown, Utf8Policy::kStrict);
      return error_at(pos, fmt::format("unexpected character '{}'", shown));
    }
    if (c == '(' || c == '[' || c == '{') {
      if (brackets.size() >= max_bracket_depth_) {
        return error_at(pos,
                        fmt::format("brackets nest more than {} levels deep", max_bracket_depth_));
      }
      brackets.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
    } else if (c == ')' || c == ']' || c == '}') {
      if (brackets.empty()) return error_at(pos, fmt::format("unexpected '{}'", c));
      if (brackets.back() != c) {
        return error_at(pos, fmt::format("unexpected '{}', expected '{}'", c, brackets.back()));
      }
      brackets.pop_back();
    }
    emit(TokenType::kOperator, std::string(1, c), pos);
    return pos + 1;
  }

  std::string src_;
  const SyntaxOptions options_;
  const uint32_t max_bracket_depth_;
  std::vector<size_t> line_starts_;
  std::deque<Token> tokens_;  // lexed, not yet handed out
  size_t pos_ = 0;
  bool line_starting_ = true;  // the last consumed text ended a line (for lstrip_blocks)
  bool in_tag_ = false;
  bool tag_is_block_ = false;
  size_t tag_start_ = 0;
  std::vector<char> brackets_;  // closers expected; end delimiters only count outside brackets
};

Lexer::Lexer(std::string_view source, const SyntaxOptions& options, uint32_t max_bracket_depth)
    : impl_(std::make_unique<Impl>(normalize_newlines(source, options.keep_trailing_newline),
                                   options, max_bracket_depth)) {}
Lexer::~Lexer() = default;
Lexer::Lexer(Lexer&&) noexcept = default;
Lexer& Lexer::operator=(Lexer&&) noexcept = default;

Expected<Token> Lexer::next() { return impl_->next(); }

std::string describe_location(const SourceLocation& location) {
  return fmt::format("line {}, column {}", location.line, location.column);
}

}  // namespace drift::jinja
