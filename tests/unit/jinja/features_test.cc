// Each language feature, one small template at a time, rendered by drift and compared byte for
// byte with what Python's jinja2 rendered under Hugging Face's chat template settings
// (tests/data/templates/fixtures.json, from scripts/fixtures/make_template_fixtures.py). Where
// jinja2 fails, drift fails too, with jinja2's message.
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "jinja/template.h"

namespace drift::jinja {
namespace {

struct FeatureCase {
  std::string name;
  std::string source;
  Json variables;
  Json expectation;  // {"expected": text} or {"error": message, "error_type": Python class}
};

Json load_fixture() {
  std::ifstream in(std::string(DRIFT_TEST_DATA_DIR) + "/templates/fixtures.json");
  return Json::parse(in, nullptr, /*allow_exceptions=*/false);
}

std::vector<FeatureCase> feature_cases() {
  std::vector<FeatureCase> cases;
  const Json fixture = load_fixture();
  if (fixture.is_discarded()) return cases;
  for (const Json& c : fixture["features"]) {
    cases.push_back({c["name"], c["source"], c["variables"], c});
  }
  return cases;
}

// The strftime_now() time the fixture was rendered with (its "frozen_now").
std::tm frozen_now() {
  std::tm tm{};
  tm.tm_year = 2024 - 1900;
  tm.tm_mon = 6;
  tm.tm_mday = 26;
  tm.tm_hour = 14;
  tm.tm_min = 5;
  tm.tm_sec = 9;
  tm.tm_wday = 5;
  tm.tm_yday = 207;
  return tm;
}

// drift's error messages are jinja2's (after drift's "line L, column C: " prefix), except for
// these two, where jinja2 reports an internal detail: the regex that failed at an unterminated
// string ("unexpected char \"'\" at 3"), and the line of the Python code it compiled a stray
// {% break %} into.
const std::set<std::string> kOwnMessage = {"error_unclosed_string", "error_break_outside_loop"};

void PrintTo(const FeatureCase& c, std::ostream* os) { *os << c.name; }

class JinjaFeature : public ::testing::TestWithParam<FeatureCase> {};

TEST_P(JinjaFeature, MatchesJinja2) {
  const FeatureCase& c = GetParam();
  RenderOptions options;
  options.clock = frozen_now;
  auto compiled = Template::parse(c.source);
  Expected<std::string> rendered = compiled.ok() ? compiled->render(c.variables, options)
                                                 : Expected<std::string>(compiled.error());
  if (c.expectation.contains("expected")) {
    ASSERT_TRUE(rendered.ok()) << "template: " << c.source
                               << "\nerror: " << rendered.error().message;
    EXPECT_EQ(*rendered, c.expectation["expected"].get<std::string>()) << "template: " << c.source;
    return;
  }
  const std::string jinja2_error = c.expectation["error"];
  ASSERT_FALSE(rendered.ok()) << "template: " << c.source
                              << "\njinja2 failed with: " << jinja2_error
                              << "\ndrift rendered: " << *rendered;
  if (!kOwnMessage.count(c.name)) {
    EXPECT_NE(rendered.error().message.find(jinja2_error), std::string::npos)
        << "drift: " << rendered.error().message << "\njinja2: " << jinja2_error;
  }
}

INSTANTIATE_TEST_SUITE_P(Fixture, JinjaFeature, ::testing::ValuesIn(feature_cases()),
                         [](const ::testing::TestParamInfo<FeatureCase>& info) {
                           return info.param.name;
                         });

TEST(JinjaFeatureFixture, IsPresentAndRecordsItsJinja2Version) {
  const Json fixture = load_fixture();
  ASSERT_FALSE(fixture.is_discarded()) << "tests/data/templates/fixtures.json is missing or bad";
  EXPECT_FALSE(fixture["jinja2_version"].get<std::string>().empty());
  EXPECT_GE(fixture["features"].size(), 100u);
}

}  // namespace
}  // namespace drift::jinja
