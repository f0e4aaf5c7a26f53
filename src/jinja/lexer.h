// Splits template source into text and tag tokens, applying jinja2's whitespace control while
// doing so (as jinja2's own lexer does): `{%-`/`-%}` strip all whitespace on that side,
// trim_blocks drops the newline after a block or comment tag, lstrip_blocks drops the indentation
// before one, `+` turns either off for one tag. Newlines are normalised to \n and a single
// trailing newline is removed unless keep_trailing_newline is set.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "util/error.h"

namespace drift::jinja {

struct SyntaxOptions {
  // Hugging Face renders chat templates with trim_blocks and lstrip_blocks on.
  bool trim_blocks = true;
  bool lstrip_blocks = true;
  bool keep_trailing_newline = false;
};

struct SourceLocation {
  uint32_t line = 1;
  uint32_t column = 1;  // in bytes, from 1
};

enum class TokenType : uint8_t {
  kText,
  kVariableBegin,  // {{
  kVariableEnd,    // }}
  kBlockBegin,     // {%
  kBlockEnd,       // %}
  kName,
  kString,
  kInteger,
  kFloat,
  kOperator,
  kEof,
};

struct Token {
  TokenType type = TokenType::kEof;
  std::string text;  // text data, name, unescaped string literal, or operator spelling
  int64_t int_value = 0;
  double float_value = 0;
  SourceLocation location;
};

// Hands out the tokens of a template one at a time (the parser pulls them, so a syntax error
// stops the lexing too). A malformed tag — unterminated string or comment, unbalanced or too
// deeply nested brackets, unexpected character — is an Error naming its line and column.
class Lexer {
 public:
  Lexer(std::string_view source, const SyntaxOptions& options, uint32_t max_bracket_depth);
  ~Lexer();
  Lexer(Lexer&&) noexcept;
  Lexer& operator=(Lexer&&) noexcept;

  // The next token; kEof at the end (and again on every later call).
  Expected<Token> next();

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

// "line 3, column 14" — the prefix of every syntax and render error.
std::string describe_location(const SourceLocation& location);

}  // namespace drift::jinja
