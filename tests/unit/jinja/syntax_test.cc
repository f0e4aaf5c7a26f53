// Where errors point: every syntax and render error names the line and column of the tag or
// expression at fault, so a template author can find it. Also the syntax options.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "jinja/template.h"

namespace drift::jinja {
namespace {

std::string error_of(const std::string& source, const Json& variables = Json::object()) {
  auto compiled = Template::parse(source);
  if (!compiled.ok()) return compiled.error().message;
  auto rendered = compiled->render(variables);
  return rendered.ok() ? "rendered: " + *rendered : rendered.error().message;
}

TEST(JinjaSyntax, SyntaxErrorsNameLineAndColumn) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{{ 1 + }}", "syntax error at line 1, column 8: unexpected 'end of print statement'"},
      {"line one\n{% for x in %}",
       "syntax error at line 2, column 13: Expected an expression, got 'end of statement block'"},
      {"{% if x %}\n  text\n",
       "syntax error at line 2, column 7: Unexpected end of template. Jinja was looking for the "
       "following tags: 'elif' or 'else' or 'endif'. The innermost block that needs to be "
       "closed is 'if'."},
      {"{% for x in y %}{% endif %}",
       "syntax error at line 1, column 20: Encountered unknown tag 'endif'. Jinja was looking "
       "for the following tags: 'endfor' or 'else'. The innermost block that needs to be closed "
       "is 'for'."},
      {"a\n\n   {{ 'unterminated }}",
       "syntax error at line 3, column 7: unterminated string literal"},
      {"{{ x | nope }}", "syntax error at line 1, column 8: No filter named 'nope'."},
      {"{{ 1 ! 2 }}", "syntax error at line 1, column 6: unexpected character '!'"},
      {"{{ foo(1, 2 }}", "syntax error at line 1, column 13: unexpected '}', expected ')'"},
      {"{% set x = 1", "syntax error at line 1, column 1: unexpected end of template inside a tag"},
      {"{% macro m(a=1, b) %}{% endmacro %}",
       "syntax error at line 1, column 18: non-default argument follows default argument"},
      {"{{ x is defined is defined }}",
       "syntax error at line 1, column 17: You cannot chain multiple tests with is"},
      {"{% include 'other.jinja' %}",
       "syntax error at line 1, column 4: the 'include' tag is not "
       "supported"},
  };
  for (const auto& [source, expected] : cases) {
    EXPECT_EQ(error_of(source), expected) << source;
  }
}

TEST(JinjaSyntax, RenderErrorsNameTheFailingExpression) {
  EXPECT_EQ(error_of("{% for m in messages %}\n  {{ m.x.y }}\n{% endfor %}",
                     Json{{"messages", Json::array({Json::object()})}}),
            "line 2, column 9: 'dict object' has no attribute 'x'");
  EXPECT_EQ(error_of("{% set n = 1 %}\n{{ n + 'a' }}"),
            "line 2, column 6: unsupported operand type(s) for +: 'int' and 'str'");
  EXPECT_EQ(error_of("{% macro f() %}\n{{ raise_exception('inside') }}{% endmacro %}\n{{ f() }}"),
            "line 2, column 4: inside");
  EXPECT_EQ(error_of("{% for a, b in [1] %}{% endfor %}"),
            "line 1, column 4: 'int' object is not iterable");
}

TEST(JinjaSyntax, DefaultJinja2OptionsCanBeChosen) {
  // jinja2's own defaults keep the whitespace Hugging Face's settings remove.
  SyntaxOptions plain;
  plain.trim_blocks = false;
  plain.lstrip_blocks = false;
  plain.keep_trailing_newline = true;
  auto compiled = Template::parse("{% if true %}\nx\n  {% endif %}\n", plain);
  ASSERT_TRUE(compiled.ok()) << compiled.error().message;
  auto rendered = compiled->render(Json::object());
  ASSERT_TRUE(rendered.ok());
  EXPECT_EQ(*rendered, "\nx\n  \n");
}

TEST(JinjaSyntax, ParsedTemplateRendersManyTimes) {
  auto compiled = Template::parse("{{ greeting }}, {{ name | default('you') }}!");
  ASSERT_TRUE(compiled.ok());
  EXPECT_EQ(*compiled->render(Json{{"greeting", "Hi"}}), "Hi, you!");
  EXPECT_EQ(*compiled->render(Json{{"greeting", "Bye"}, {"name", "Ana"}}), "Bye, Ana!");
}

TEST(JinjaSyntax, VariablesMustBeAnObject) {
  auto compiled = Template::parse("x");
  ASSERT_TRUE(compiled.ok());
  auto rendered = compiled->render(Json::array());
  ASSERT_FALSE(rendered.ok());
  EXPECT_EQ(rendered.error().message, "template variables must be a JSON object, not array");
}

}  // namespace
}  // namespace drift::jinja
