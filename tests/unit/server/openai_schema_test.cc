#include "server/openai_schema.h"

#include <gtest/gtest.h>

#include "engine/session_store.h"  // kMaxSessionIdBytes

namespace drift::server {
namespace {

using nlohmann::json;

ApiError completion_error(const json& body) {
  auto r = parse_completion_request(body);
  EXPECT_TRUE(std::holds_alternative<ApiError>(r)) << body.dump();
  return std::holds_alternative<ApiError>(r) ? std::get<ApiError>(r) : ApiError{};
}

TEST(CompletionSchema, ReadsEveryParameter) {
  auto r = parse_completion_request(json::parse(R"({
    "model": "m", "prompt": "hi", "max_tokens": 7, "temperature": 0.5, "top_p": 0.9, "top_k": 40,
    "min_p": 0.05, "presence_penalty": 0.5, "frequency_penalty": -0.5, "repetition_penalty": 1.1,
    "seed": -1, "stop": ["a", "b"], "n": 2, "echo": true, "logprobs": 3, "ignore_eos": true,
    "stream": true, "stream_options": {"include_usage": true}, "user": "ignored"})"));
  ASSERT_TRUE(std::holds_alternative<CompletionRequest>(r));
  const auto& c = std::get<CompletionRequest>(r);
  EXPECT_EQ(c.model, "m");
  ASSERT_EQ(c.prompts.size(), 1u);
  EXPECT_EQ(std::get<std::string>(c.prompts[0]), "hi");
  const GenerationOptions& o = c.options;
  EXPECT_EQ(o.max_tokens, 7);
  EXPECT_FLOAT_EQ(o.sampling.temperature.value_or(-1), 0.5f);
  EXPECT_FLOAT_EQ(o.sampling.top_p.value_or(-1), 0.9f);
  EXPECT_EQ(o.sampling.top_k, 40);
  EXPECT_FLOAT_EQ(o.sampling.min_p.value_or(-1), 0.05f);
  EXPECT_FLOAT_EQ(o.sampling.repetition_penalty.value_or(-1), 1.1f);
  EXPECT_EQ(o.sampling.seed, ~uint64_t{0});  // -1 modulo 2^64
  EXPECT_TRUE(o.sampling.ignore_eos);
  EXPECT_EQ(o.stop, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(o.n, 2);
  EXPECT_TRUE(o.echo && o.stream && o.include_usage);
  EXPECT_EQ(o.logprobs, 3);
}

TEST(CompletionSchema, PromptForms) {
  auto ids = parse_completion_request(json::parse(R"({"prompt": [1, 2, 3]})"));
  ASSERT_TRUE(std::holds_alternative<CompletionRequest>(ids));
  EXPECT_EQ(std::get<std::vector<int32_t>>(std::get<CompletionRequest>(ids).prompts[0]),
            (std::vector<int32_t>{1, 2, 3}));
  auto many = parse_completion_request(json::parse(R"({"prompt": ["a", [4, 5]]})"));
  ASSERT_TRUE(std::holds_alternative<CompletionRequest>(many));
  EXPECT_EQ(std::get<CompletionRequest>(many).prompts.size(), 2u);
}

TEST(CompletionSchema, MaxCompletionTokensWinsAndNullIsAbsent) {
  auto r = parse_completion_request(json::parse(
      R"({"prompt": "x", "max_tokens": 5, "max_completion_tokens": 9, "top_k": null})"));
  ASSERT_TRUE(std::holds_alternative<CompletionRequest>(r));
  EXPECT_EQ(std::get<CompletionRequest>(r).options.max_tokens, 9);
  EXPECT_FALSE(std::get<CompletionRequest>(r).options.sampling.top_k);
}

TEST(CompletionSchema, TopKMinusOneAndZeroMeanNoLimit) {
  // An explicit "no limit" (0), which overrides a default top-k; absent would take it.
  for (int k : {-1, 0}) {
    auto r = parse_completion_request(json{{"prompt", "x"}, {"top_k", k}});
    ASSERT_TRUE(std::holds_alternative<CompletionRequest>(r));
    EXPECT_EQ(std::get<CompletionRequest>(r).options.sampling.top_k, 0);
  }
}

TEST(CompletionSchema, UnsetSamplingFieldsStayUnsetAndDefaultValuesStaySet) {
  // The engine's defaults fill only what the body leaves out, so a field set to OpenAI's own
  // default (temperature 1, top_p 1) must stay distinguishable from an absent one.
  auto bare = parse_completion_request(json{{"prompt", "x"}});
  ASSERT_TRUE(std::holds_alternative<CompletionRequest>(bare));
  const SamplingSettings& unset = std::get<CompletionRequest>(bare).options.sampling;
  EXPECT_FALSE(unset.temperature || unset.top_k || unset.top_p || unset.min_p ||
               unset.repetition_penalty || unset.presence_penalty || unset.frequency_penalty ||
               unset.penalty_last_n || unset.order);
  auto plain = parse_chat_request(json::parse(
      R"({"messages": [{"role": "user", "content": "hi"}], "temperature": 1, "top_p": 1})"));
  ASSERT_TRUE(std::holds_alternative<ChatRequest>(plain));
  const SamplingSettings& set = std::get<ChatRequest>(plain).options.sampling;
  EXPECT_EQ(set.temperature, 1.0f);
  EXPECT_EQ(set.top_p, 1.0f);
  EXPECT_FALSE(set.min_p);
}

TEST(CompletionSchema, RefusalsNameTheField) {
  struct Case {
    json body;
    std::string param;
  };
  const Case cases[] = {
      {{{"prompt", 1}}, "prompt"},
      {{{"prompt", json::array()}}, "prompt"},
      {{{"prompt", {1, -2}}}, "prompt"},
      {{{"prompt", "x"}, {"max_tokens", 0}}, "max_tokens"},
      {{{"prompt", "x"}, {"max_tokens", -5}}, "max_tokens"},
      {{{"prompt", "x"}, {"max_tokens", 1.5}}, "max_tokens"},
      {{{"prompt", "x"}, {"max_tokens", "5"}}, "max_tokens"},
      {{{"prompt", "x"}, {"n", 17}}, "n"},
      {{{"prompt", "x"}, {"temperature", 2.5}}, "temperature"},
      {{{"prompt", "x"}, {"top_p", 0}}, "top_p"},
      {{{"prompt", "x"}, {"top_k", -2}}, "top_k"},
      {{{"prompt", "x"}, {"min_p", 1.5}}, "min_p"},
      {{{"prompt", "x"}, {"repetition_penalty", 0}}, "repetition_penalty"},
      {{{"prompt", "x"}, {"logprobs", 6}}, "logprobs"},
      {{{"prompt", "x"}, {"stop", {"a", 1}}}, "stop"},
      {{{"prompt", "x"}, {"stop", 5}}, "stop"},
      {{{"prompt", "x"}, {"stream_options", {{"include_usage", true}}}}, "stream_options"},
      {{{"prompt", "x"}, {"logit_bias", {{"x", 2}}}}, "logit_bias"},
      {{{"prompt", "x"}, {"best_of", 2}}, "best_of"},
      {{{"prompt", "x"}, {"suffix", "y"}}, "suffix"},
      {{{"prompt", "x"}, {"model", 3}}, "model"},
      {{{"prompt", "x"}, {"echo", "yes"}}, "echo"},
  };
  for (const Case& c : cases) {
    ApiError e = completion_error(c.body);
    EXPECT_EQ(e.status, 400) << c.body.dump();
    EXPECT_EQ(e.param, c.param) << c.body.dump();
  }
}

// The schema checks stop strings' type only: their number and sizes are the engine's to judge
// (EngineStopStrings.BadStopStringsAreRefusedByTheEngine; tests/server/test_bad_input.py).
TEST(CompletionSchema, StopStringsPassToTheEngineAndChoicesAreBounded) {
  json stops = json::array();
  for (int i = 0; i < 1000; ++i) stops.push_back("s" + std::to_string(i));
  auto many_stops = parse_completion_request({{"prompt", "x"}, {"stop", stops}});
  ASSERT_TRUE(std::holds_alternative<CompletionRequest>(many_stops));
  EXPECT_EQ(std::get<CompletionRequest>(many_stops).options.stop.size(), 1000u);
  EXPECT_EQ(std::get<CompletionRequest>(many_stops).options.stop_param, "stop");
  json prompts = json::array();
  for (int i = 0; i < 8; ++i) prompts.push_back("p");
  EXPECT_EQ(completion_error({{"prompt", prompts}, {"n", 8}}).param, "n");  // 64 choices
}

TEST(ChatSchema, MessagesAreValidatedAndFlattened) {
  auto r = parse_chat_request(json::parse(R"({"messages": [
      {"role": "developer", "content": "be brief"},
      {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
      {"role": "assistant", "content": "ok", "name": "bot"}],
      "logprobs": true, "top_logprobs": 4})"));
  ASSERT_TRUE(std::holds_alternative<ChatRequest>(r));
  const auto& c = std::get<ChatRequest>(r);
  ASSERT_EQ(c.messages.size(), 3u);
  EXPECT_EQ(c.messages[0].role, "system");
  EXPECT_EQ(c.messages[1].content, "ab");
  EXPECT_EQ(c.messages[2].name, "bot");
  EXPECT_FALSE(c.messages[0].name);
  EXPECT_EQ(c.options.logprobs, 4);
}

TEST(ChatSchema, Refusals) {
  struct Case {
    const char* body;
    const char* param;
  };
  const Case cases[] = {
      {R"({})", "messages"},
      {R"({"messages": []})", "messages"},
      {R"({"messages": {}})", "messages"},
      {R"({"messages": [1]})", "messages[0]"},
      {R"({"messages": [{"content": "x"}]})", "messages[0].role"},
      {R"({"messages": [{"role": "wizard", "content": "x"}]})", "messages[0].role"},
      {R"({"messages": [{"role": "user"}]})", "messages[0].content"},
      {R"({"messages": [{"role": "user", "content": 5}]})", "messages[0].content"},
      {R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})",
       "messages[0].content"},
      {R"({"messages": [{"role": "user", "content": "x"}], "functions": []})", "functions"},
      {R"({"messages": [{"role": "user", "content": "x"}], "best_of": 2})", "best_of"},
      {R"({"messages": [{"role": "user", "content": "x"}], "n": 17})", "n"},
      {R"({"messages": [{"role": "user", "content": null}]})", "messages[0].content"},
      {R"({"messages": [{"role": "user", "content": "x"}], "response_format": {}})",
       "response_format.type"},
      {R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2})", "top_logprobs"},
      {R"({"messages": [{"role": "user", "content": "x"}], "logprobs": true,
           "top_logprobs": 21})",
       "top_logprobs"},
  };
  for (const Case& c : cases) {
    auto r = parse_chat_request(json::parse(c.body));
    ASSERT_TRUE(std::holds_alternative<ApiError>(r)) << c.body;
    EXPECT_EQ(std::get<ApiError>(r).param, c.param) << c.body;
  }
}

TEST(TokenizeSchema, PromptOrMessagesExactlyOne) {
  EXPECT_TRUE(std::holds_alternative<TokenizeRequest>(
      parse_tokenize_request(json::parse(R"({"content": "x"})"))));
  EXPECT_TRUE(std::holds_alternative<ApiError>(parse_tokenize_request(json::parse("{}"))));
  EXPECT_TRUE(std::holds_alternative<ApiError>(parse_tokenize_request(
      json::parse(R"({"prompt": "x", "messages": [{"role": "user", "content": "y"}]})"))));
  EXPECT_TRUE(std::holds_alternative<ApiError>(
      parse_detokenize_request(json::parse(R"({"tokens": [1, -1]})"))));
  EXPECT_TRUE(std::holds_alternative<std::vector<int32_t>>(
      parse_detokenize_request(json::parse(R"({"tokens": [1, 2]})"))));
}

}  // namespace
}  // namespace drift::server

namespace drift::server {
namespace {

TEST(CompletionSchema, PriorityIsVllmsIntegerField) {
  auto r = parse_completion_request(json::parse(R"({"prompt": "hi", "priority": -5})"));
  ASSERT_TRUE(std::holds_alternative<CompletionRequest>(r));
  EXPECT_EQ(std::get<CompletionRequest>(r).options.priority, -5);
  auto chat = parse_chat_request(
      json::parse(R"({"messages": [{"role": "user", "content": "hi"}], "priority": 2})"));
  ASSERT_TRUE(std::holds_alternative<ChatRequest>(chat));
  EXPECT_EQ(std::get<ChatRequest>(chat).options.priority, 2);
  EXPECT_EQ(completion_error(json::parse(R"({"prompt": "hi", "priority": "high"})")).param,
            "priority");
  EXPECT_EQ(completion_error(json::parse(R"({"prompt": "hi", "priority": 1e9})")).param,
            "priority");
}

}  // namespace
}  // namespace drift::server

namespace drift::server {
namespace {

TEST(SessionId, OnlyUrlSafeCharactersAreAccepted) {
  EXPECT_FALSE(check_session_id("user-42_chat.v1~a"));
  EXPECT_FALSE(check_session_id(std::string(kMaxSessionIdBytes, 'a')));
  for (std::string_view bad : {"a/b", "a b", "a?b", "a#b", "a%20b", "caf\xC3\xA9", ""}) {
    auto e = check_session_id(bad);
    ASSERT_TRUE(e) << bad;
    EXPECT_EQ(e->status, 400);
    EXPECT_EQ(e->param, "session_id");
  }
  EXPECT_NE(check_session_id("a/b")->message.find("byte 1 is '/'"), std::string::npos);
  EXPECT_NE(check_session_id("caf\xC3\xA9")->message.find("byte 3 is 0xC3"), std::string::npos);
  EXPECT_TRUE(check_session_id(std::string(kMaxSessionIdBytes + 1, 'a')));
}

TEST(SessionId, PercentDecoding) {
  EXPECT_EQ(percent_decode("abc"), "abc");
  EXPECT_EQ(percent_decode("a%7Eb%2fc"), "a~b/c");
  EXPECT_EQ(percent_decode("%41"), "A");
  EXPECT_FALSE(percent_decode("a%"));
  EXPECT_FALSE(percent_decode("a%4"));
  EXPECT_FALSE(percent_decode("a%G1"));
}

}  // namespace
}  // namespace drift::server
