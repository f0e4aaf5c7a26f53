// response_format, guided_* and logit_bias as the schema reads them: which grammar each gives,
// which field a refusal names, and the bounds on sizes.
#include "server/guided_decoding.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "server/openai_schema.h"

namespace drift::server {
namespace {

using nlohmann::json;

json chat(json extra) {
  json body = {{"messages", {{{"role", "user"}, {"content", "x"}}}}};
  for (auto& [k, v] : extra.items()) body[k] = v;
  return body;
}

std::optional<OutputConstraint> constraint_of(const json& extra) {
  auto r = parse_chat_request(chat(extra));
  EXPECT_TRUE(std::holds_alternative<ChatRequest>(r)) << extra.dump();
  if (!std::holds_alternative<ChatRequest>(r)) return std::nullopt;
  return std::get<ChatRequest>(r).options.constraint;
}

ApiError error_of(const json& extra) {
  auto r = parse_chat_request(chat(extra));
  EXPECT_TRUE(std::holds_alternative<ApiError>(r)) << extra.dump();
  return std::holds_alternative<ApiError>(r) ? std::get<ApiError>(r) : ApiError{};
}

TEST(GuidedDecoding, EachFieldGivesItsGrammar) {
  EXPECT_FALSE(constraint_of({{"response_format", {{"type", "text"}}}}));
  auto object = constraint_of({{"response_format", {{"type", "json_object"}}}});
  ASSERT_TRUE(object);
  EXPECT_EQ(object->grammar.kind, GrammarKind::kJsonObject);

  auto schema = constraint_of(json::parse(R"({"response_format": {"type": "json_schema",
      "json_schema": {"name": "p", "strict": true, "schema": {"type": "object"}}}})"));
  ASSERT_TRUE(schema);
  EXPECT_EQ(schema->grammar, (GrammarSpec{GrammarKind::kJsonSchema, R"({"type":"object"})"}));
  EXPECT_EQ(schema->param, "response_format.json_schema.schema");

  auto as_text = constraint_of({{"guided_json", R"({"type": "integer"})"}});
  ASSERT_TRUE(as_text);
  EXPECT_EQ(as_text->grammar, (GrammarSpec{GrammarKind::kJsonSchema, R"({"type":"integer"})"}));
  EXPECT_EQ(as_text->param, "guided_json");

  auto regex = constraint_of({{"guided_regex", "[a-z]+"}});
  ASSERT_TRUE(regex);
  EXPECT_EQ(regex->grammar, (GrammarSpec{GrammarKind::kRegex, "[a-z]+"}));

  auto choice = constraint_of({{"guided_choice", json::array({"yes", "say \"no\""})}});
  ASSERT_TRUE(choice);
  EXPECT_EQ(choice->grammar,
            (GrammarSpec{GrammarKind::kLark, "start: \"yes\" | \"say \\\"no\\\"\"\n"}));

  auto lark = constraint_of({{"guided_grammar", "start: \"a\"+"}});
  ASSERT_TRUE(lark);
  EXPECT_EQ(lark->grammar, (GrammarSpec{GrammarKind::kLark, "start: \"a\"+"}));
  EXPECT_EQ(lark->param, "guided_grammar");
}

TEST(GuidedDecoding, RefusalsNameTheField) {
  struct Case {
    json extra;
    std::string param;
  };
  const std::vector<Case> cases = {
      {{{"response_format", "json"}}, "response_format"},
      {{{"response_format", {{"type", "yaml"}}}}, "response_format.type"},
      {{{"response_format", {{"type", "json_schema"}}}}, "response_format.json_schema"},
      {{{"response_format", {{"type", "json_schema"}, {"json_schema", {{"schema", 5}}}}}},
       "response_format.json_schema.schema"},
      {{{"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", 5}}}}}},
       "response_format.json_schema.name"},
      {{{"guided_json", "{not json"}}, "guided_json"},
      {{{"guided_json", 12}}, "guided_json"},
      {{{"guided_regex", 12}}, "guided_regex"},
      {{{"guided_choice", json::array()}}, "guided_choice"},
      {{{"guided_choice", json::array({"a", ""})}}, "guided_choice"},
      {{{"guided_choice", std::vector<std::string>(kMaxGuidedChoices + 1, "a")}}, "guided_choice"},
      {{{"guided_grammar", std::string(kMaxGrammarSourceBytes + 1, 'a')}}, "guided_grammar"},
      {{{"guided_regex", "a"}, {"guided_choice", json::array({"b"})}}, "guided_choice"},
      {{{"response_format", {{"type", "json_object"}}}, {"guided_json", {{"type", "object"}}}},
       "guided_json"},
  };
  for (const Case& c : cases) {
    ApiError e = error_of(c.extra);
    EXPECT_EQ(e.status, 400) << c.extra.dump();
    EXPECT_EQ(e.param, c.param) << c.extra.dump() << ": " << e.message;
  }
}

TEST(GuidedDecoding, LogitBias) {
  auto r = parse_chat_request(chat({{"logit_bias", {{"7", -100}, {"12", 2.5}}}}));
  ASSERT_TRUE(std::holds_alternative<ChatRequest>(r));
  std::vector<LogitBias> bias = std::get<ChatRequest>(r).options.sampling.logit_bias;
  std::sort(bias.begin(), bias.end(), [](auto& a, auto& b) { return a.token < b.token; });
  EXPECT_EQ(bias, (std::vector<LogitBias>{{7, -100.0f}, {12, 2.5f}}));

  for (const json& bad :
       {json{{"logit_bias", {{"-1", 1}}}}, json{{"logit_bias", {{"1x", 1}}}},
        json{{"logit_bias", {{"", 1}}}}, json{{"logit_bias", {{"1", 100.5}}}},
        json{{"logit_bias", {{"1", "5"}}}}, json{{"logit_bias", json::array({1, 2})}},
        json{{"logit_bias", {{"99999999999", 1}}}}}) {
    ApiError e = error_of(bad);
    EXPECT_EQ(e.param, "logit_bias") << bad.dump();
  }
  json many = json::object();
  for (size_t i = 0; i <= kMaxLogitBias; ++i) many[std::to_string(i)] = 1;
  ApiError e = error_of({{"logit_bias", many}});
  EXPECT_NE(e.message.find("at most 1024"), std::string::npos) << e.message;
}

}  // namespace
}  // namespace drift::server
