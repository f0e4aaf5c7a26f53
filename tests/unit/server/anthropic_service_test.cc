// Anthropic's Messages API through the service over a real Engine with the fake executor, whose
// reply is scripted byte by byte: the request takes the chat endpoint's path (prompt, stop
// strings, tool calls in the model's syntax, limits) and only the shapes are Anthropic's.
#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../engine/engine_fakes.h"
#include "byte_codec.h"
#include "fake_exchange.h"
#include "server/openai_service.h"

namespace drift::server {
namespace {

using namespace drift::testing;  // the fake engine
using nlohmann::json;

constexpr const char* kCallReply =
    "Sure.<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}</tool_call>";

class AnthropicServiceTest : public ::testing::Test {
 protected:
  void start(std::string reply, std::optional<std::string> api_key = std::nullopt) {
    reply_ = std::move(reply);
    service_ = std::make_unique<OpenAIService>(io_, ServiceConfig{"fake-model", api_key});
    FakeHooks hooks;
    hooks.after_step = [this](const StepPlan& plan, ExecutionResult& result) {
      for (size_t i = 0; i < plan.items.size(); ++i) {
        const StepItem& item = plan.items[i];
        if (!item.sample) continue;
        const size_t k = size_t(item.context_len() - item.prompt_len);
        result.items[i].token = k < reply_.size() ? 2 + TokenId(uint8_t(reply_[k])) : kEos;
      }
      return Status::Ok();
    };
    EngineConfig config = small_config(/*kv_pages=*/128);
    config.max_model_len = 256;
    FakeEngine fake =
        make_fake_engine(config, FakeModel{}, std::move(hooks), std::make_shared<ByteCodec>());
    ASSERT_TRUE(fake.engine);
    service_->set_ready(std::make_shared<LoadedModel>(LoadedModel{std::move(fake.engine), {}}));
  }

  std::shared_ptr<FakeExchange> call(std::string target, std::string body,
                                     std::string method = "POST", std::string x_api_key = {},
                                     std::string authorization = {}) {
    HttpRequest request;
    request.id = ++next_id_;
    request.method = std::move(method);
    request.target = std::move(target);
    request.body = std::move(body);
    request.x_api_key = std::move(x_api_key);
    request.authorization = std::move(authorization);
    request.received = std::chrono::steady_clock::now();
    auto exchange = std::make_shared<FakeExchange>();
    service_->handle(std::move(request), exchange);
    EXPECT_TRUE(run_until_answered(io_, *exchange)) << "no response within 10 s";
    return exchange;
  }
  std::shared_ptr<FakeExchange> messages(json extra, std::string target = "/v1/messages") {
    json body = {{"model", "fake-model"},
                 {"max_tokens", 150},
                 {"system", "S"},
                 {"messages", {{{"role", "user"}, {"content", "W?"}}}}};
    body.update(extra);
    return call(std::move(target), body.dump());
  }

  // Each streamed event's data, its "type" checked against the frame's event line.
  static std::vector<json> events(const FakeExchange& r) {
    std::vector<json> out;
    for (SseFrame& frame : sse_frames(r)) {
      EXPECT_EQ(frame.event, frame.data["type"]);
      out.push_back(std::move(frame.data));
    }
    return out;
  }
  static std::string types(const std::vector<json>& events) {
    std::string out;
    for (const json& e : events) out += e["type"].get<std::string>() + " ";
    return out;
  }

  // Short, so that the prompt and the call fit the fake model's context of 256.
  const json tools_ =
      json::parse(R"([{"name": "get_weather", "input_schema": {"type": "object"}}])");
  boost::asio::io_context io_;
  std::unique_ptr<OpenAIService> service_;
  std::string reply_;
  uint64_t next_id_ = 0;
};

TEST_F(AnthropicServiceTest, AMessageCountsItsPromptAsCountTokensDoes) {
  start("Hello there.");
  auto r = messages(json::object());
  ASSERT_EQ(r->status, 200) << r->body;
  const json body = r->json();
  EXPECT_TRUE(body["id"].get<std::string>().starts_with("msg_")) << body["id"];
  EXPECT_EQ(body["type"], "message");
  EXPECT_EQ(body["model"], "fake-model");
  EXPECT_EQ(body["content"], json::parse(R"([{"type": "text", "text": "Hello there."}])"));
  EXPECT_EQ(body["stop_reason"], "end_turn");
  EXPECT_EQ(body["stop_sequence"], nullptr);
  // The fake template: BOS, then "system: S\nuser: W?\nassistant: ", a token per byte.
  const int prompt_tokens = 1 + int(std::string("system: S\nuser: W?\nassistant: ").size());
  EXPECT_EQ(body["usage"], json({{"input_tokens", prompt_tokens}, {"output_tokens", 13}}))
      << "12 bytes and the end token";
  auto count =
      call("/v1/messages/count_tokens", json{{"model", "fake-model"},
                                             {"system", "S"},
                                             {"messages", {{{"role", "user"}, {"content", "W?"}}}}}
                                            .dump());
  ASSERT_EQ(count->status, 200) << count->body;
  EXPECT_EQ(count->json(), json({{"input_tokens", prompt_tokens}}));
}

TEST_F(AnthropicServiceTest, AStreamSendsTheSameTextInAnthropicsEvents) {
  start("Hello there.");
  auto r = messages({{"stream", true}});
  ASSERT_EQ(r->status, 200);
  EXPECT_EQ(r->content_type, "text/event-stream");
  const std::vector<json> e = events(*r);
  ASSERT_GE(e.size(), 6u);
  std::string text;
  for (const json& event : e)
    if (event["type"] == "content_block_delta") text += event["delta"]["text"].get<std::string>();
  EXPECT_EQ(text, "Hello there.");
  EXPECT_TRUE(types(e).starts_with("message_start ping content_block_start content_block_delta"))
      << types(e);
  EXPECT_TRUE(
      types(e).ends_with("content_block_delta content_block_stop message_delta "
                         "message_stop "))
      << types(e);
  EXPECT_EQ(e[e.size() - 2]["delta"]["stop_reason"], "end_turn");
  EXPECT_EQ(e[e.size() - 2]["usage"]["output_tokens"], 13);
}

TEST_F(AnthropicServiceTest, StopSequencesAndMaxTokensGiveTheirStopReasons) {
  start("1, 2, 3, 4");
  for (bool stream : {false, true}) {
    auto r = messages({{"stop_sequences", {", 3", "9"}}, {"stream", stream}});
    ASSERT_EQ(r->status, 200) << r->body;
    const json end = stream ? events(*r).end()[-2]["delta"] : r->json();
    EXPECT_EQ(end["stop_reason"], "stop_sequence");
    EXPECT_EQ(end["stop_sequence"], ", 3");
    if (!stream) {
      EXPECT_EQ(r->json()["content"][0]["text"], "1, 2");
    }
  }
  auto r = messages({{"max_tokens", 3}});
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(r->json()["stop_reason"], "max_tokens");
  EXPECT_EQ(r->json()["content"][0]["text"], "1, ");
  EXPECT_EQ(r->json()["usage"]["output_tokens"], 3);
}

TEST_F(AnthropicServiceTest, AReplysCallBecomesAToolUseBlock) {
  start(kCallReply);
  auto r = messages({{"tools", tools_}, {"max_tokens", 100}});
  ASSERT_EQ(r->status, 200) << r->body;
  const json body = r->json();
  EXPECT_EQ(body["stop_reason"], "tool_use");
  ASSERT_EQ(body["content"].size(), 2u) << body;
  EXPECT_EQ(body["content"][0], json::parse(R"({"type": "text", "text": "Sure."})"));
  const json& call = body["content"][1];
  EXPECT_EQ(call["type"], "tool_use");
  EXPECT_TRUE(call["id"].get<std::string>().starts_with("toolu_")) << call;
  EXPECT_EQ(call["name"], "get_weather");
  EXPECT_EQ(call["input"], json::parse(R"({"city": "Paris"})"));

  auto streamed = messages({{"tools", tools_}, {"max_tokens", 100}, {"stream", true}});
  const std::vector<json> e = events(*streamed);
  ASSERT_GE(e.size(), 9u);
  EXPECT_TRUE(
      types(e).ends_with("content_block_stop content_block_start content_block_delta "
                         "content_block_stop message_delta message_stop "))
      << "the text block, then the call whole in a block of its own: " << types(e);
  std::string text;
  for (const json& event : e)
    if (event["type"] == "content_block_delta" && event["delta"]["type"] == "text_delta")
      text += event["delta"]["text"].get<std::string>();
  EXPECT_EQ(text, "Sure.") << "text that might start a call waits; the call is never text";
  const json& start = e[e.size() - 5];
  EXPECT_EQ(start["content_block"]["name"], "get_weather");
  EXPECT_EQ(start["index"], 1);
  EXPECT_EQ(json::parse(e[e.size() - 4]["delta"]["partial_json"].get<std::string>()),
            json::parse(R"({"city": "Paris"})"));
  EXPECT_EQ(e[e.size() - 2]["delta"]["stop_reason"], "tool_use");
}

TEST_F(AnthropicServiceTest, TheKeyMayComeAsXApiKeyOnAnthropicsRoutesOnly) {
  start("ok", "sekret");
  const std::string body = json{{"model", "fake-model"},
                                {"max_tokens", 4},
                                {"messages", {{{"role", "user"}, {"content", "W?"}}}}}
                               .dump();
  EXPECT_EQ(call("/v1/messages", body, "POST", "sekret")->status, 200);
  EXPECT_EQ(call("/v1/messages", body, "POST", "", "Bearer sekret")->status, 200);
  auto wrong = call("/v1/messages", body, "POST", "sekre");
  EXPECT_EQ(wrong->status, 401);
  EXPECT_EQ(wrong->json()["type"], "error");
  EXPECT_EQ(wrong->json()["error"]["type"], "authentication_error");
  EXPECT_NE(wrong->json()["error"]["message"].get<std::string>().find("x-api-key"),
            std::string::npos);
  auto missing = call("/v1/messages/count_tokens", body, "POST");
  EXPECT_EQ(missing->status, 401);
  EXPECT_EQ(missing->json()["error"]["type"], "authentication_error");
  // OpenAI's routes keep their own header and shape.
  auto openai = call("/v1/models", "", "GET", "sekret");
  EXPECT_EQ(openai->status, 401);
  EXPECT_EQ(openai->json()["error"]["code"], "invalid_api_key");
}

TEST_F(AnthropicServiceTest, ErrorsComeInAnthropicsShape) {
  start("ok");
  auto expect_error = [](const FakeExchange& r, int status, std::string_view type,
                         std::string_view words) {
    EXPECT_EQ(r.status, status) << r.body;
    const json body = json::parse(r.body);
    EXPECT_EQ(body["type"], "error") << r.body;
    EXPECT_EQ(body["error"]["type"], type) << r.body;
    EXPECT_NE(body["error"]["message"].get<std::string>().find(words), std::string::npos) << r.body;
  };
  expect_error(*call("/v1/messages", "{not json"), 400, "invalid_request_error", "JSON");
  expect_error(*messages({{"max_tokens", nullptr}}), 400, "invalid_request_error", "max_tokens");
  expect_error(*messages({{"model", "claude-x"}}), 404, "not_found_error", "claude-x");
  expect_error(*call("/v1/messages/batches", "{}"), 404, "not_found_error", "no route");
  expect_error(*call("/v1/messages", "", "GET"), 405, "invalid_request_error", "takes POST");
  // A prompt longer than the context: the engine's judgement, in Anthropic's shape.
  expect_error(*messages({{"messages", {{{"role", "user"}, {"content", std::string(400, 'a')}}}}}),
               400, "invalid_request_error", "max_model_len");
  // The server goes on serving.
  EXPECT_EQ(messages(json::object())->status, 200);
}

}  // namespace
}  // namespace drift::server
