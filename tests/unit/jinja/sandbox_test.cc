// Hostile templates: a chat template comes from a model file, so it must not be able to hang,
// crash or exhaust the server, nor reach anything but its variables. Each attack below returns an
// error (or a harmless render) well within a second, also under AddressSanitizer.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "jinja/template.h"

namespace drift::jinja {
namespace {

struct Outcome {
  Expected<std::string> result;
  double seconds;
};

Outcome render(const std::string& source, const Json& variables = Json::object()) {
  const auto start = std::chrono::steady_clock::now();
  auto compiled = Template::parse(source);
  Expected<std::string> result =
      compiled.ok() ? compiled->render(variables) : Expected<std::string>(compiled.error());
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  return {std::move(result), elapsed.count()};
}

// Fails with a message containing `expected`, in well under a second.
void expect_refused(const std::string& source, const std::string& expected,
                    const Json& variables = Json::object()) {
  const Outcome outcome = render(source, variables);
  ASSERT_FALSE(outcome.result.ok()) << "rendered " << outcome.result->size() << " bytes";
  EXPECT_NE(outcome.result.error().message.find(expected), std::string::npos)
      << outcome.result.error().message;
  EXPECT_LT(outcome.seconds, 1.0);
}

std::string repeat(const std::string& s, size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i) out += s;
  return out;
}

TEST(JinjaSandbox, NestedHugeLoopsRunOutOfSteps) {
  expect_refused("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
                 "budget of 1000000 evaluation steps");
  expect_refused(
      "{% for i in range(100000) %}{% for j in range(100000) %}{{ i + j }}{% endfor %}"
      "{% endfor %}",
      "budget");
}

TEST(JinjaSandbox, RangeIsCappedLikeJinja2Sandbox) {
  expect_refused("{{ range(100001) | length }}", "MAX_RANGE (100000)");
  expect_refused("{{ range(0, 9223372036854775807) | length }}", "Range too big");
}

TEST(JinjaSandbox, RunawayRecursionStops) {
  expect_refused("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
                 "macro calls nest more than 100 deep");
  // Exponential fan-out within the depth limit runs out of steps instead.
  expect_refused(
      "{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}"
      "{% endmacro %}{{ f(60) }}",
      "budget");
}

TEST(JinjaSandbox, HugeStringsAreRefusedBeforeTheyAreBuilt) {
  expect_refused("{{ 'x' * 10000000000 }}", "string repetition");
  expect_refused("{{ 'x' * 1000000 * 1000 }}", "string repetition");
  expect_refused("{{ [0] * 1000000000 }}", "list repetition");
  expect_refused("{{ [1, 2, 3] * 9223372036854775807 }}", "list repetition");
  expect_refused(
      "{% set ns = namespace(s='x') %}{% for i in range(64) %}"
      "{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
      "over the limit");
  expect_refused("{{ ('a' * 1000000) | replace('a', 'aaaaaaaaaaaaaaaaaaaa') }}", "over the limit");
  expect_refused("{{ 'a\\nb' | indent(1000000000) }}", "over the limit");
  expect_refused("{{ [1] | tojson(indent=1000000000) }}", "over the limit");
  expect_refused("{{ 'ab'.replace('', 'x' * 10000000) }}", "over the output limit");
}

TEST(JinjaSandbox, OutputIsBounded) {
  expect_refused("{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}",
                 "output exceeds the limit");
}

TEST(JinjaSandbox, IntegerOverflowIsAnErrorNotWraparound) {
  expect_refused("{{ 10 ** 100 }}", "integer overflow");
  expect_refused("{{ 9223372036854775807 + 1 }}", "integer overflow");
  expect_refused("{{ -9223372036854775807 - 2 }}", "integer overflow");
  expect_refused("{{ 4611686018427387904 * 4 }}", "integer overflow");
  expect_refused("{{ (-9223372036854775807 - 1) // -1 }}", "integer overflow");
  expect_refused("{{ 99999999999999999999 }}", "integer literal is too large");
  // Extremes that must not overflow internally either.
  const Outcome range =
      render("{{ range(-9200000000000000000, 9200000000000000000, 184000000000000) | last }}");
  ASSERT_TRUE(range.result.ok()) << range.result.error().message;
  EXPECT_EQ(*range.result, "9199816000000000000");
  const Outcome width = render("[{{ '%*d' % (-9223372036854775807 - 1, 7) }}]");
  ASSERT_TRUE(width.result.ok()) << width.result.error().message;
  EXPECT_EQ(width.result->size(), (1u << 20) + 2);
}

TEST(JinjaSandbox, DeepNestingFailsToParse) {
  expect_refused("{{ " + repeat("(", 100000) + "1" + repeat(")", 100000) + " }}",
                 "brackets nest more than 128 levels");
  expect_refused("{{ " + repeat("[", 100000) + repeat("]", 100000) + " }}", "nest more than");
  expect_refused("{{ " + repeat("not ", 100000) + "1 }}", "nests more than");
  expect_refused("{{ " + repeat("-", 100000) + "1 }}", "nests more than");
  expect_refused("{{ 1" + repeat(" + 1", 100000) + " }}", "expression nests more than 256");
  expect_refused(repeat("{% if true %}", 100000) + repeat("{% endif %}", 100000),
                 "nests more than 128 levels");
  expect_refused("{{ x" + repeat(".a", 100000) + " }}", "expression nests more than");
  expect_refused("{{ x" + repeat("|trim", 100000) + " }}", "expression nests more than");
}

TEST(JinjaSandbox, DeeplyNestedInputIsRefused) {
  // Parsed in place: copying a JSON value this deep would itself recurse 10000 levels.
  const Json deep = Json::parse("{\"x\": " + repeat("[", 10000) + repeat("]", 10000) + "}");
  expect_refused("{{ x }}", "nested too deeply", deep);
}

TEST(JinjaSandbox, DeeplyNestedValuesCannotBeBuilt) {
  expect_refused(
      "{% set ns = namespace(v=[]) %}{% for i in range(100000) %}"
      "{% set ns.v = [ns.v] %}{% endfor %}{{ ns.v | length }}",
      "nest more than 256 levels");
}

TEST(JinjaSandbox, NoWayOutThroughPythonInternals) {
  // Every dunder lookup is undefined; using one is an error; nothing internal is printed.
  const Outcome printed = render(
      "[{{ ''.__class__ }}][{{ range.__globals__ }}][{{ namespace.__init__ }}]"
      "[{{ messages.__class__ }}][{{ loop }}][{{ self }}][{{ config }}]",
      Json{{"messages", Json::array()}});
  ASSERT_TRUE(printed.result.ok()) << printed.result.error().message;
  EXPECT_EQ(*printed.result, "[][][][][][][]");
  expect_refused("{{ ''.__class__.__mro__ }}", "is unsafe");
  expect_refused("{{ ''.__class__() }}", "is unsafe");
  expect_refused("{{ '{0.__class__}'.format(1) }}", "not supported");
  expect_refused("{{ lipsum.__globals__['os'] }}", "'lipsum' is undefined");
}

TEST(JinjaSandbox, ImmutableContainers) {
  expect_refused("{% set l = [] %}{{ l.append(1) }}", "'append' of 'list' object is unsafe");
  expect_refused("{{ messages.pop() }}", "'pop' of 'list' object is unsafe",
                 Json{{"messages", Json::array({1})}});
  expect_refused("{{ {}.update(a=1) }}", "'update' of 'dict' object is unsafe");
}

TEST(JinjaSandbox, ReferenceCyclesAreReleased) {
  // Under LeakSanitizer these would be reported as leaks if a render kept them alive.
  const Outcome cycle = render(
      "{% set ns = namespace() %}{% set ns.self = ns %}{% set ns.list = [ns, ns] %}"
      "{% macro m() %}{{ ns.self.self is defined }}{% endmacro %}{% set ns.m = m %}{{ ns.m() }}");
  ASSERT_TRUE(cycle.result.ok()) << cycle.result.error().message;
  EXPECT_EQ(*cycle.result, "True");
  const Outcome chain = render(
      "{% set ns = namespace(next=none) %}{% for i in range(50000) %}"
      "{% set ns.next = namespace(next=ns.next) %}{% endfor %}done");
  ASSERT_TRUE(chain.result.ok()) << chain.result.error().message;
  EXPECT_EQ(*chain.result, "done");
}

TEST(JinjaSandbox, LimitsAreConfigurable) {
  auto compiled = Template::parse("{% for i in range(1000) %}x{% endfor %}");
  ASSERT_TRUE(compiled.ok());
  RenderOptions tight;
  tight.limits.max_steps = 100;
  EXPECT_FALSE(compiled->render(Json::object(), tight).ok());
  RenderOptions small_output;
  small_output.limits.max_output_bytes = 10;
  EXPECT_FALSE(compiled->render(Json::object(), small_output).ok());
  auto fine = compiled->render(Json::object());
  ASSERT_TRUE(fine.ok());
  EXPECT_EQ(fine->size(), 1000u);
}

}  // namespace
}  // namespace drift::jinja
