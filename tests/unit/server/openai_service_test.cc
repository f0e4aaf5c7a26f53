// The OpenAI layer over a real Engine with the fake executor and codec (tests/unit/engine): the
// engine alone tokenizes, decides BOS and checks the prompt, and its typed refusals come back as
// the HTTP errors the API promises. No model file, no sockets.
#include "server/openai_service.h"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "../engine/engine_fakes.h"
#include "byte_codec.h"
#include "fake_exchange.h"

namespace drift::server {
namespace {

using namespace drift::testing;  // the fake engine

using nlohmann::json;

TokenId byte_token(char c) { return 2 + TokenId(uint8_t(c)); }  // FakeCodec's byte tokens

class OpenAIServiceTest : public ::testing::Test {
 protected:
  void SetUp() override { start(small_config()); }

  void start(const EngineConfig& config) {
    FakeEngine fake = make_fake_engine(config);
    ASSERT_TRUE(fake.engine);
    engine_ = fake.engine.get();
    service_.set_ready(std::make_shared<LoadedModel>(LoadedModel{std::move(fake.engine), {}}));
  }

  std::shared_ptr<FakeExchange> call(std::string method, std::string target, std::string body) {
    HttpRequest request;
    request.id = ++next_id_;
    request.method = std::move(method);
    request.target = std::move(target);
    request.body = std::move(body);
    request.received = std::chrono::steady_clock::now();
    auto exchange = std::make_shared<FakeExchange>();
    service_.handle(std::move(request), exchange);
    EXPECT_TRUE(run_until_answered(io_, *exchange)) << "no response within 10 s";
    return exchange;
  }
  std::shared_ptr<FakeExchange> post(std::string target, const json& body) {
    return call("POST", std::move(target), body.dump());
  }

  boost::asio::io_context io_;
  OpenAIService service_{io_, ServiceConfig{"fake-model", std::nullopt}};
  Engine* engine_ = nullptr;  // owned by the service
  uint64_t next_id_ = 0;
};

TEST_F(OpenAIServiceTest, ACompletionReportsTheEnginesPromptTokens) {
  auto r = post("/v1/completions", {{"prompt", "hi"}, {"max_tokens", 4}});
  ASSERT_EQ(r->status, 200) << r->body;
  json j = r->json();
  EXPECT_EQ(j["model"], "fake-model");
  EXPECT_EQ(j["usage"]["prompt_tokens"], 3) << "BOS + one token per byte, as the engine encoded";
  EXPECT_EQ(j["usage"]["completion_tokens"], 4);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
}

TEST_F(OpenAIServiceTest, NChoicesCountTheirPromptOnce) {
  auto r = post("/v1/completions", {{"prompt", "hi"}, {"max_tokens", 2}, {"n", 3}});
  ASSERT_EQ(r->status, 200) << r->body;
  json j = r->json();
  EXPECT_EQ(j["choices"].size(), 3u);
  EXPECT_EQ(j["usage"]["prompt_tokens"], 3);
  EXPECT_EQ(j["usage"]["completion_tokens"], 6);
  auto two = post("/v1/completions", {{"prompt", {"hi", "hey"}}, {"max_tokens", 1}, {"n", 2}});
  ASSERT_EQ(two->status, 200) << two->body;
  EXPECT_EQ(two->json()["usage"]["prompt_tokens"], 3 + 4) << "each distinct prompt once";
}

TEST_F(OpenAIServiceTest, AStreamEndsWithDone) {
  auto r = post("/v1/completions", {{"prompt", "hi"}, {"max_tokens", 3}, {"stream", true}});
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->content_type, "text/event-stream");
  ASSERT_FALSE(r->chunks.empty());
  EXPECT_EQ(r->chunks.back(), "data: [DONE]\n\n");
}

TEST_F(OpenAIServiceTest, TheEnginesRefusalsBecomeErrorsNamingTheField) {
  json too_long = json::array();
  for (int i = 0; i < 200; ++i) too_long.push_back(5);  // max_model_len is 128
  struct Case {
    const char* target;
    json body;
    int status;
    json param;
  };
  const Case cases[] = {
      {"/v1/completions", {{"prompt", too_long}}, 400, "prompt"},
      {"/v1/completions", {{"prompt", {1, kVocab}}}, 400, "prompt"},
      {"/v1/completions", {{"prompt", "hi"}, {"max_tokens", 1000}}, 400, "max_tokens"},
      {"/v1/chat/completions",
       {{"messages", {{{"role", "user"}, {"content", std::string(200, 'x')}}}}},
       400,
       "messages"},
      {"/v1/completions", {{"prompt", "hi"}, {"priority", 1}}, 400, "priority"},
      {"/v1/completions", {{"prompt", "hi"}, {"model", "gpt-4"}}, 404, nullptr},
  };
  for (const Case& c : cases) {
    auto r = post(c.target, c.body);
    EXPECT_EQ(r->status, c.status) << c.body.dump() << " -> " << r->body;
    EXPECT_EQ(r->error_param(), c.param) << c.body.dump() << " -> " << r->body;
  }
  auto priority = post("/v1/completions", {{"prompt", "hi"}, {"priority", 1}});
  EXPECT_NE(priority->body.find("--policy priority"), std::string::npos) << priority->body;
}

TEST_F(OpenAIServiceTest, AnEngineThatStoppedAnswers503WithRetryAfter) {
  engine_->shutdown(ShutdownMode::kDrain);
  auto r = post("/v1/completions", {{"prompt", "hi"}, {"max_tokens", 2}});
  EXPECT_EQ(r->status, 503) << r->body;
  EXPECT_EQ(r->header("Retry-After"), "1");
}

TEST_F(OpenAIServiceTest, AFullQueueAnswers429WithRetryAfter) {
  // One request runs (held inside its first step), one waits in a queue of one: the next is
  // refused at once.
  StepGate gate([](const StepPlan& plan) { return plan_has(plan, 1); });
  EngineConfig config = small_config();
  config.max_queued_requests = 1;
  FakeEngine fake = make_fake_engine(config, FakeModel{}, pause_hooks(gate));
  ASSERT_TRUE(fake.engine);
  RequestHandle running = fake.engine->submit(token_request(1, 4, 2));
  ASSERT_TRUE(gate.wait_paused());
  RequestHandle waiting = fake.engine->submit(token_request(2, 4, 2));
  Engine* engine = fake.engine.get();
  service_.set_ready(std::make_shared<LoadedModel>(LoadedModel{std::move(fake.engine), {}}));
  auto r = post("/v1/completions", {{"prompt", "hi"}, {"max_tokens", 2}});
  EXPECT_EQ(r->status, 429) << r->body;
  EXPECT_EQ(r->json()["error"]["code"], "overloaded");
  EXPECT_EQ(r->header("Retry-After"), "1");
  gate.open();
  engine->shutdown(ShutdownMode::kAbort);  // no step may reach the gate after this test
}

TEST_F(OpenAIServiceTest, DrainingAnswers503) {
  service_.set_draining();
  auto r = post("/v1/completions", {{"prompt", "hi"}});
  EXPECT_EQ(r->status, 503);
}

TEST_F(OpenAIServiceTest, TokenizeAsksTheEngine) {
  auto with_bos = post("/tokenize", {{"prompt", "ab"}});
  ASSERT_EQ(with_bos->status, 200) << with_bos->body;
  EXPECT_EQ(with_bos->json()["tokens"], json({kBos, byte_token('a'), byte_token('b')}));
  EXPECT_EQ(with_bos->json()["max_model_len"], 128);
  auto plain = post("/tokenize", {{"prompt", "ab"}, {"add_special_tokens", false}});
  EXPECT_EQ(plain->json()["tokens"], json({byte_token('a'), byte_token('b')}));
}

TEST_F(OpenAIServiceTest, AConversationIsTokenizedOnceTheSameWay) {
  const json messages = {{{"role", "user"}, {"content", "hi"}}};
  auto tokenized = post("/tokenize", {{"messages", messages}});
  ASSERT_EQ(tokenized->status, 200) << tokenized->body;
  ChatPrompt conversation;
  conversation.messages = {{"user", "hi"}};
  auto expected = FakeCodec().encode_chat(conversation);
  ASSERT_TRUE(expected.ok());
  EXPECT_EQ(tokenized->json()["tokens"], json(*expected));
  auto chat = post("/v1/chat/completions", {{"messages", messages}, {"max_tokens", 2}});
  ASSERT_EQ(chat->status, 200) << chat->body;
  EXPECT_EQ(chat->json()["usage"]["prompt_tokens"], tokenized->json()["count"]);
}

TEST_F(OpenAIServiceTest, DetokenizeChecksTheVocabulary) {
  auto ok = post("/detokenize", {{"tokens", {kBos, 10}}});
  ASSERT_EQ(ok->status, 200) << ok->body;
  EXPECT_EQ(ok->json()["content"], "<s>" + fake_piece(10)) << "control tokens rendered";
  auto bad = post("/detokenize", {{"tokens", {kVocab}}});
  EXPECT_EQ(bad->status, 400);
  EXPECT_EQ(bad->error_param(), "tokens");
}

TEST_F(OpenAIServiceTest, EchoOfTokenIdsIsTheEnginesDecode) {
  auto r = post("/v1/completions", {{"prompt", {kBos, 10}}, {"echo", true}, {"max_tokens", 1}});
  ASSERT_EQ(r->status, 200) << r->body;
  const std::string text = r->json()["choices"][0]["text"];
  EXPECT_EQ(text.substr(0, fake_piece(10).size()), fake_piece(10)) << "BOS gives no text";
}

TEST_F(OpenAIServiceTest, ASessionsNextTurnGetsNoSecondBos) {
  auto first = post("/v1/completions", {{"prompt", "ab"}, {"max_tokens", 2}, {"session_id", "s"}});
  ASSERT_EQ(first->status, 200) << first->body;
  EXPECT_EQ(first->json()["usage"]["prompt_tokens"], 3);
  auto second = post("/v1/completions", {{"prompt", "cd"}, {"max_tokens", 2}, {"session_id", "s"}});
  ASSERT_EQ(second->status, 200) << second->body;
  // The history (3 prompt + 2 generated) and "cd" without BOS: the engine decided.
  EXPECT_EQ(second->json()["usage"]["prompt_tokens"], 3 + 2 + 2);
  const auto history = engine_->session_history("s");
  ASSERT_TRUE(history);
  EXPECT_EQ(std::count(history->begin(), history->end(), kBos), 1);
}

TEST_F(OpenAIServiceTest, RoutesCheckTheirMethod) {
  EXPECT_EQ(call("GET", "/v1/completions", "")->status, 405);
  EXPECT_EQ(call("POST", "/health", "")->status, 405);
  EXPECT_EQ(call("GET", "/v1/engines", "")->status, 404);
  EXPECT_EQ(call("GET", "/health", "")->status, 200);
}

}  // namespace
}  // namespace drift::server

namespace drift::server {
namespace {

// A model whose every reply is `reply` (then EOS): the fake executor's tokens are replaced, after
// each step, by the reply's bytes in order.
class ScriptedReplyTest : public ::testing::Test {
 protected:
  void start(std::string reply) {
    reply_ = std::move(reply);
    FakeHooks hooks;
    hooks.after_step = [this](const StepPlan& plan, ExecutionResult& result) {
      for (size_t i = 0; i < plan.items.size(); ++i) {
        const StepItem& item = plan.items[i];
        if (!item.sample) continue;
        const size_t k = size_t(item.context_len() - item.prompt_len);
        result.items[i].token = k < reply_.size() ? byte_token(reply_[k]) : kEos;
      }
      return Status::Ok();
    };
    EngineConfig config = small_config(/*kv_pages=*/128);
    config.max_model_len = 256;  // the fake model's trained context
    FakeEngine fake =
        make_fake_engine(config, FakeModel{}, std::move(hooks), std::make_shared<ByteCodec>());
    ASSERT_TRUE(fake.engine);
    service_.set_ready(std::make_shared<LoadedModel>(LoadedModel{std::move(fake.engine), {}}));
  }

  std::shared_ptr<FakeExchange> chat(json extra) {
    json body = {{"messages", {{{"role", "user"}, {"content", "W?"}}}}, {"max_tokens", 165}};
    body.update(extra);
    HttpRequest request;
    request.id = ++next_id_;
    request.method = "POST";
    request.target = "/v1/chat/completions";
    request.body = body.dump();
    request.received = std::chrono::steady_clock::now();
    auto exchange = std::make_shared<FakeExchange>();
    service_.handle(std::move(request), exchange);
    EXPECT_TRUE(run_until_answered(io_, *exchange)) << "no response within 10 s";
    return exchange;
  }

  // The JSON of each "data:" chunk but [DONE].
  static std::vector<json> events(const FakeExchange& r) {
    std::vector<json> out;
    for (const std::string& chunk : r.chunks)
      if (chunk.starts_with("data: {")) out.push_back(json::parse(chunk.substr(6)));
    return out;
  }

  const json tools_ =
      json::parse(R"([{"type": "function", "function": {"name": "get_weather"}}])");  // 56 bytes
  boost::asio::io_context io_;
  OpenAIService service_{io_, ServiceConfig{"fake-model", std::nullopt}};
  std::string reply_;
  uint64_t next_id_ = 0;
};

constexpr const char* kCallReply =
    "Sure.<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}</tool_call>";

TEST_F(ScriptedReplyTest, AReplysCallsBecomeToolCallsWithContentAroundThem) {
  start(kCallReply);
  auto r = chat({{"tools", tools_}});
  ASSERT_EQ(r->status, 200) << r->body;
  const json choice = r->json()["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  EXPECT_EQ(choice["message"]["content"], "Sure.");
  ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u);
  const json call = choice["message"]["tool_calls"][0];
  EXPECT_EQ(call["type"], "function");
  EXPECT_TRUE(call["id"].get<std::string>().starts_with("call_"));
  EXPECT_EQ(call["function"]["name"], "get_weather");
  EXPECT_EQ(json::parse(call["function"]["arguments"].get<std::string>()),
            json::parse(R"({"city": "Paris"})"));

  // Without tools the same reply is plain text, and so with tool_choice "none".
  for (json extra : {json::object(), json{{"tools", tools_}, {"tool_choice", "none"}}}) {
    auto plain = chat(extra);
    ASSERT_EQ(plain->status, 200) << plain->body;
    EXPECT_EQ(plain->json()["choices"][0]["message"]["content"], kCallReply);
    EXPECT_EQ(plain->json()["choices"][0]["finish_reason"], "stop");
    EXPECT_FALSE(plain->json()["choices"][0]["message"].contains("tool_calls"));
  }
}

TEST_F(ScriptedReplyTest, AStreamSendsTheContentBeforeACallAndTheCallWhole) {
  start(kCallReply);
  auto r = chat({{"tools", tools_}, {"stream", true}});
  ASSERT_EQ(r->status, 200);
  std::string content;
  std::vector<json> calls;
  std::string finish;
  for (const json& e : events(*r)) {
    const json& choice = e["choices"][0];
    const json& delta = choice["delta"];
    if (delta.contains("content") && delta["content"].is_string()) content += delta["content"];
    if (delta.contains("tool_calls"))
      for (const json& c : delta["tool_calls"]) calls.push_back(c);
    if (choice["finish_reason"].is_string()) finish = choice["finish_reason"];
  }
  EXPECT_EQ(content, "Sure.") << "no byte of the call leaks into the content";
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0]["index"], 0);
  EXPECT_EQ(calls[0]["function"]["name"], "get_weather");
  EXPECT_EQ(json::parse(calls[0]["function"]["arguments"].get<std::string>()),
            json::parse(R"({"city": "Paris"})"));
  EXPECT_EQ(finish, "tool_calls");
}

TEST_F(ScriptedReplyTest, ParallelToolCallsFalseKeepsTheFirstCall) {
  start(
      "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}</tool_call>"
      "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}</tool_call>");
  auto both = chat({{"tools", tools_}});
  ASSERT_EQ(both->status, 200) << both->body;
  const json message = both->json()["choices"][0]["message"];
  ASSERT_EQ(message["tool_calls"].size(), 2u);
  EXPECT_TRUE(message["content"].is_null()) << "no content around the calls: null, as OpenAI";
  EXPECT_NE(message["tool_calls"][0]["id"], message["tool_calls"][1]["id"]);
  auto one = chat({{"tools", tools_}, {"parallel_tool_calls", false}});
  ASSERT_EQ(one->status, 200) << one->body;
  const json calls = one->json()["choices"][0]["message"]["tool_calls"];
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_NE(calls[0]["function"]["arguments"].get<std::string>().find("Paris"), std::string::npos);
}

TEST_F(OpenAIServiceTest, ServesTheWebPageUnlessTurnedOff) {
  auto page = call("GET", "/", "");
  EXPECT_EQ(page->status, 200);
  EXPECT_EQ(page->content_type, "text/html; charset=utf-8");
  EXPECT_FALSE(page->header("Content-Security-Policy").empty());
  EXPECT_EQ(call("GET", "/engine?x=1", "")->status, 200) << "a query does not change the page";
  EXPECT_EQ(call("POST", "/", "")->status, 404);
  boost::asio::io_context io;
  OpenAIService off{
      io,
      ServiceConfig{.served_model_name = "fake-model", .api_key = std::nullopt, .web_ui = false}};
  HttpRequest request;
  request.method = "GET";
  request.target = "/";
  auto exchange = std::make_shared<FakeExchange>();
  off.handle(request, exchange);
  EXPECT_EQ(exchange->status, 404);
}

TEST_F(OpenAIServiceTest, EngineEventsStreamSnapshotsUntilTheDrain) {
  auto r = post("/v1/completions", {{"prompt", "hello"}, {"max_tokens", 3}});
  ASSERT_EQ(r->status, 200) << r->body;
  HttpRequest request;
  request.method = "GET";
  request.target = "/v1/engine/events";
  auto exchange = std::make_shared<FakeExchange>();
  service_.handle(request, exchange);
  EXPECT_EQ(exchange->status, 200);
  EXPECT_EQ(exchange->content_type, "text/event-stream");
  ASSERT_EQ(exchange->chunks.size(), 1u) << "the current snapshot at once";
  const std::string& event = exchange->chunks[0];
  ASSERT_TRUE(event.starts_with("data: ") && event.ends_with("\n\n")) << event;
  const json view = json::parse(event.substr(6));
  EXPECT_EQ(view["counts"]["running"], 0);
  EXPECT_EQ(view["kv"]["total"], view["kv"]["map"].get<std::string>().size());
  EXPECT_EQ(view["kv"]["total"], engine_->setup().num_kv_pages);
  EXPECT_GE(view["steps"], 1) << "the completion's steps";
  EXPECT_EQ(view["page_size"], 4);
  EXPECT_FALSE(exchange->ended);
  service_.set_draining();
  EXPECT_TRUE(exchange->ended) << "a drain ends the open-ended streams";
}

}  // namespace
}  // namespace drift::server
