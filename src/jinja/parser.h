// Parses template source into a syntax tree, following jinja2's grammar and operator precedence
// (filters and tests bind tighter than arithmetic; `not` looser than comparisons). Every syntax
// error is an Error naming the line and column. Nesting is bounded so that a hostile template
// (100k parentheses, a 100k-term sum) fails to parse instead of exhausting the stack.
#pragma once

#include <string_view>

#include "jinja/ast.h"
#include "jinja/lexer.h"
#include "util/error.h"

namespace drift::jinja {

struct ParseLimits {
  // Nested brackets, unary operators and block statements. jinja2 itself (Python's recursion
  // limit) fails at fewer than 100 nested parentheses.
  uint32_t max_nesting = 128;
  // Height of one expression's tree, which also bounds chains like a + b + c + ...
  uint32_t max_expression_height = 256;
};

Expected<StmtList> parse_template(std::string_view source, const SyntaxOptions& syntax,
                                  const ParseLimits& limits);

}  // namespace drift::jinja
