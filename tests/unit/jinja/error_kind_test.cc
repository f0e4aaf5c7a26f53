// Every template failure carries a jinja::ErrorKind, because a server answers differently for
// each: the template refusing its inputs (raise_exception) or the inputs outgrowing the sandbox is
// the request's doing; a template that does not parse or breaks while rendering is its author's.
#include "jinja/error_kind.h"

#include <gtest/gtest.h>

#include <string>

#include "jinja/template.h"

namespace drift::jinja {
namespace {

// The error of parsing and rendering `source` with `variables`; fails the test if it renders.
Error failure(const std::string& source, const Json& variables = Json::object()) {
  auto compiled = Template::parse(source);
  if (!compiled.ok()) return compiled.error();
  auto rendered = compiled->render(variables);
  EXPECT_FALSE(rendered.ok()) << "rendered: " << *rendered;
  return rendered.ok() ? Error{} : rendered.error();
}

TEST(JinjaErrorKind, RaiseExceptionIsTheTemplateRefusingWithItsOwnMessage) {
  const Error e = failure(
      "{% if messages[0].role != 'user' %}{{ raise_exception('roles must alternate') }}"
      "{% endif %}",
      Json{{"messages", Json::array({Json{{"role", "assistant"}}})}});
  EXPECT_EQ(e.code, ErrorKind::kRaised);
  EXPECT_NE(e.message.find("roles must alternate"), std::string::npos) << e.message;
}

TEST(JinjaErrorKind, RaisedInsideAMacroAndAFilterKeepsItsKind) {
  // The kind survives the location prefix added at each level and a call through a filter.
  const Error e = failure(
      "{% macro check(m) %}{% if m.role == 'tool' %}{{ raise_exception('no tools here') }}"
      "{% endif %}{% endmacro %}{% for m in messages %}{{ check(m) | trim }}{% endfor %}",
      Json{{"messages", Json::array({Json{{"role", "tool"}}})}});
  EXPECT_EQ(e.code, ErrorKind::kRaised);
  EXPECT_NE(e.message.find("no tools here"), std::string::npos) << e.message;
}

TEST(JinjaErrorKind, BrokenTemplatesAreRuntimeErrors) {
  // What a template author gets wrong: a method strings do not have, arithmetic on a string,
  // division by zero, calling something undefined.
  for (const char* source :
       {"{{ messages[0].content.no_such_method() }}", "{{ messages[0].content + 1 }}",
        "{{ 1 // 0 }}", "{{ 1 / 0 }}", "{{ undefined_function() }}"}) {
    const Error e = failure(source, Json{{"messages", Json::array({Json{{"content", "hi"}}})}});
    EXPECT_EQ(e.code, ErrorKind::kRuntime) << source << ": " << e.message;
    EXPECT_FALSE(e.message.empty()) << source;
  }
}

TEST(JinjaErrorKind, SyntaxErrors) {
  for (const char* source : {"{% for m in messages %}", "{{ 1 + }}", "{% endif %}"}) {
    const Error e = failure(source);
    EXPECT_EQ(e.code, ErrorKind::kSyntax) << source << ": " << e.message;
  }
}

TEST(JinjaErrorKind, SandboxLimitsAreLimitErrors) {
  for (const char* source :
       {"{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
        "{{ range(100001) | length }}", "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
        "{{ 'x' * 100000000 }}", "{{ [1] * 100000000 }}"}) {
    const Error e = failure(source);
    EXPECT_EQ(e.code, ErrorKind::kLimit) << source << ": " << e.message;
  }
  // Output over the limit, driven by the input's size as a client would drive it.
  RenderOptions small;
  small.limits.max_output_bytes = 1000;
  auto compiled = Template::parse("{{ text }}");
  ASSERT_TRUE(compiled.ok());
  auto rendered = compiled->render(Json{{"text", std::string(2000, 'a')}}, small);
  ASSERT_FALSE(rendered.ok());
  EXPECT_EQ(rendered.error().code, ErrorKind::kLimit) << rendered.error().message;
}

TEST(JinjaErrorKind, VariablesATemplateCannotTakeAreInvalidVariables) {
  Json deep = Json::array();
  for (int i = 0; i < 300; ++i) deep = Json::array({deep});
  auto compiled = Template::parse("{{ x }}");
  ASSERT_TRUE(compiled.ok());
  auto rendered = compiled->render(Json{{"x", deep}});
  ASSERT_FALSE(rendered.ok());
  EXPECT_EQ(rendered.error().code, ErrorKind::kInvalidVariables) << rendered.error().message;
  auto not_object = compiled->render(Json::array({1}));
  ASSERT_FALSE(not_object.ok());
  EXPECT_EQ(not_object.error().code, ErrorKind::kInvalidVariables);
}

TEST(JinjaErrorKind, KindsAreDistinctFromOtherLibrariesCodes) {
  // A caller compares codes, not numbers: another category's 3 is not kRaised.
  const std::error_code raised = ErrorKind::kRaised;
  EXPECT_EQ(raised.category().name(), std::string("jinja"));
  EXPECT_NE(std::error_code(3, std::generic_category()), ErrorKind::kRaised);
  EXPECT_FALSE(Error{"plain"}.code);
}

}  // namespace
}  // namespace drift::jinja
