// A harmony model's chat replies (gpt-oss) through the OpenAI layer, over a real Engine with the
// fake executor: the executor's tokens are replaced by a scripted reply of harmony markers and
// byte tokens, so every byte of the text is its own token (a character's bytes arrive over
// several), and the engine stops on <|return|> and <|call|> as on a real gpt-oss vocabulary.
// What the client gets: content from the final channel, reasoning_content from the analysis
// channel, whole and streamed, tool calls from the commentary channel, no marker in any text.
#include <gtest/gtest.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../engine/engine_fakes.h"
#include "fake_exchange.h"
#include "server/openai_service.h"

namespace drift::server {
namespace {

using namespace drift::testing;  // the fake engine
using nlohmann::json;

// Ids 2..257 are bytes (FakeCodec's); the markers sit above them.
constexpr HarmonyTokens kMarkers{.start = 300,
                                 .end = 301,
                                 .message = 302,
                                 .channel = 303,
                                 .constrain = 304,
                                 .return_ = 305,
                                 .call = 306};

std::string marker_text(TokenId t) {
  switch (t) {
    case kMarkers.start:
      return "<|start|>";
    case kMarkers.end:
      return "<|end|>";
    case kMarkers.message:
      return "<|message|>";
    case kMarkers.channel:
      return "<|channel|>";
    case kMarkers.constrain:
      return "<|constrain|>";
    default:
      return "";
  }
}

// Bytes and markers, decoding as drift's gpt-oss vocabulary does: <|start|>, <|end|>,
// <|message|>, <|channel|> and <|constrain|> are rendered as their text (llama.cpp's rule), the
// stop markers give none. The conversation is FakeCodec's; the last one is kept for the test.
class HarmonyCodec final : public TextCodec {
 public:
  std::vector<TokenId> encode(const TextPrompt& prompt) const override {
    return fake_.encode(prompt);
  }
  Expected<std::vector<TokenId>> encode_chat(const ChatPrompt& chat) const override {
    std::lock_guard<std::mutex> lock(mutex_);
    last_chat_ = chat;
    return fake_.encode_chat(chat);
  }
  ToolCallSyntax tool_call_syntax() const override { return ToolCallSyntax::kHarmony; }
  std::optional<HarmonyTokens> harmony_tokens() const override { return kMarkers; }
  Expected<std::string> decode(std::span<const TokenId> tokens, bool) const override {
    std::string text;
    for (TokenId t : tokens) text += piece(t);
    return text;
  }
  Expected<std::string> token_text(TokenId token) const override { return piece(token); }
  std::unique_ptr<TokenTextStream> start_stream() const override {
    return std::make_unique<FakeTextStream2>();
  }
  ChatPrompt last_chat() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return last_chat_;
  }

 private:
  static std::string piece(TokenId t) {
    if (t >= 300) return marker_text(t);
    return t < 2 ? "" : std::string(1, char(t - 2));
  }
  // Holds back the bytes of an unfinished character, as the engine's decoder does.
  struct FakeTextStream2 final : TokenTextStream {
    Expected<std::string> push(TokenId token) override {
      held += piece(token);
      const size_t complete = utf8_complete_prefix_length(held);
      std::string out = held.substr(0, complete);
      held.erase(0, complete);
      return out;
    }
    std::string finish() override { return std::exchange(held, {}); }
    std::string held;
  };

  FakeCodec fake_;
  mutable std::mutex mutex_;
  mutable ChatPrompt last_chat_;
};

// A reply script: markers and text, the text one byte token per byte.
struct Script {
  std::vector<TokenId> ids;
  Script& mark(TokenId t) {
    ids.push_back(t);
    return *this;
  }
  Script& text(std::string_view s) {
    for (char c : s) ids.push_back(2 + TokenId(uint8_t(c)));
    return *this;
  }
};

const Script kAnalysisThenFinal = Script()
                                      .mark(kMarkers.channel)
                                      .text("analysis")
                                      .mark(kMarkers.message)
                                      .text("The user greets. Reply with café ✓.")
                                      .mark(kMarkers.end)
                                      .mark(kMarkers.start)
                                      .text("assistant")
                                      .mark(kMarkers.channel)
                                      .text("final")
                                      .mark(kMarkers.message)
                                      .text("Bonjour, café ✓! Type <|end|> to end.")
                                      .mark(kMarkers.return_)
                                      .text("never sent");

const Script kCall = Script()
                         .mark(kMarkers.channel)
                         .text("analysis")
                         .mark(kMarkers.message)
                         .text("Need the weather.")
                         .mark(kMarkers.end)
                         .mark(kMarkers.start)
                         .text("assistant")
                         .mark(kMarkers.channel)
                         .text("commentary to=functions.get_weather ")
                         .mark(kMarkers.constrain)
                         .text("json")
                         .mark(kMarkers.message)
                         .text(R"({"city": "Paris"})")
                         .mark(kMarkers.call)
                         .text("never sent");

class HarmonyChatTest : public ::testing::Test {
 protected:
  void start(Script script) {
    script_ = std::move(script.ids);
    FakeHooks hooks;
    hooks.after_step = [this](const StepPlan& plan, ExecutionResult& result) {
      for (size_t i = 0; i < plan.items.size(); ++i) {
        const StepItem& item = plan.items[i];
        if (!item.sample) continue;
        const size_t k = size_t(item.context_len() - item.prompt_len);
        result.items[i].token = k < script_.size() ? script_[k] : kEos;
      }
      return Status::Ok();
    };
    EngineConfig config = small_config(/*kv_pages=*/256);
    config.max_model_len = 1024;
    ModelFacts facts = fake_model_facts();
    facts.n_ctx_train = 1024;
    facts.eog_token_ids = {kEos, kMarkers.return_, kMarkers.call};  // as gpt-oss's vocabulary
    auto factory = [&](const EngineSetup& setup) -> Expected<std::unique_ptr<Executor>> {
      return std::unique_ptr<Executor>(
          std::make_unique<FakeExecutor>(setup, FakeModel{}, std::move(hooks)));
    };
    codec_ = std::make_shared<HarmonyCodec>();
    auto engine = Engine::create(config, facts, codec_, factory);
    ASSERT_TRUE(engine.ok()) << engine.error().message;
    service_.set_ready(std::make_shared<LoadedModel>(LoadedModel{std::move(engine).value(), {}}));
  }

  std::shared_ptr<FakeExchange> chat(json extra) {
    json body = {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"max_tokens", 150}};
    body.update(extra);
    return post("/v1/chat/completions", body);
  }

  // Anthropic's /v1/messages over the same model.
  std::shared_ptr<FakeExchange> messages(json extra) {
    json body = {{"model", "fake-gpt-oss"},
                 {"messages", {{{"role", "user"}, {"content", "Hi"}}}},
                 {"max_tokens", 150}};
    body.update(extra);
    return post("/v1/messages", body);
  }

  // OpenAI's /v1/responses over the same model.
  std::shared_ptr<FakeExchange> responses(json extra) {
    json body = {{"model", "fake-gpt-oss"}, {"input", "Hi"}, {"max_output_tokens", 150}};
    body.update(extra);
    return post("/v1/responses", body);
  }

  std::shared_ptr<FakeExchange> post(std::string target, const json& body) {
    HttpRequest request;
    request.id = ++next_id_;
    request.method = "POST";
    request.target = std::move(target);
    request.body = body.dump();
    request.received = std::chrono::steady_clock::now();
    auto exchange = std::make_shared<FakeExchange>();
    service_.handle(std::move(request), exchange);
    EXPECT_TRUE(run_until_answered(io_, *exchange)) << "no response within 10 s";
    return exchange;
  }

  struct Streamed {
    std::string reasoning, content, finish;
    std::vector<json> calls;
    std::vector<std::string> order;  // "reasoning" / "content" per delta, in order
  };
  static Streamed read_stream(const FakeExchange& r) {
    Streamed s;
    for (const std::string& chunk : r.chunks) {
      if (!chunk.starts_with("data: {")) continue;
      const json e = json::parse(chunk.substr(6));
      const json& choice = e["choices"][0];
      const json& delta = choice["delta"];
      const bool has_reasoning = delta.contains("reasoning_content");
      const bool has_content = delta.contains("content") && delta["content"] != "";
      EXPECT_FALSE(has_reasoning && has_content) << "one kind of text per delta: " << chunk;
      if (has_reasoning) {
        s.reasoning += delta["reasoning_content"].get<std::string>();
        s.order.push_back("reasoning");
      }
      if (has_content) {
        s.content += delta["content"].get<std::string>();
        s.order.push_back("content");
      }
      if (delta.contains("tool_calls"))
        for (const json& c : delta["tool_calls"]) s.calls.push_back(c);
      if (choice["finish_reason"].is_string()) s.finish = choice["finish_reason"];
    }
    return s;
  }

  const json tools_ = json::parse(R"([{"type": "function", "function": {"name": "get_weather",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}])");
  boost::asio::io_context io_;
  OpenAIService service_{io_, ServiceConfig{"fake-gpt-oss", std::nullopt}};
  std::shared_ptr<HarmonyCodec> codec_;
  std::vector<TokenId> script_;
  uint64_t next_id_ = 0;
};

TEST_F(HarmonyChatTest, TheFinalChannelIsContentAndTheAnalysisChannelReasoning) {
  start(kAnalysisThenFinal);
  auto r = chat(json::object());
  ASSERT_EQ(r->status, 200) << r->body;
  const json choice = r->json()["choices"][0];
  EXPECT_EQ(choice["message"]["content"], "Bonjour, café ✓! Type <|end|> to end.")
      << "text that spells a marker in byte tokens is text; real markers never are";
  EXPECT_EQ(choice["message"]["reasoning_content"], "The user greets. Reply with café ✓.");
  EXPECT_EQ(choice["finish_reason"], "stop") << "ended by <|return|>";
  EXPECT_FALSE(choice["message"].contains("tool_calls"));
  // 127 scripted tokens up to and with <|return|>; nothing after it was generated.
  EXPECT_EQ(r->json()["usage"]["completion_tokens"], int(kAnalysisThenFinal.ids.size()) - 10);
}

TEST_F(HarmonyChatTest, AStreamSendsReasoningDeltasThenContentDeltas) {
  start(kAnalysisThenFinal);
  auto r = chat({{"stream", true}});
  ASSERT_EQ(r->status, 200);
  const Streamed s = read_stream(*r);
  EXPECT_EQ(s.reasoning, "The user greets. Reply with café ✓.");
  EXPECT_EQ(s.content, "Bonjour, café ✓! Type <|end|> to end.");
  EXPECT_EQ(s.finish, "stop");
  ASSERT_FALSE(s.order.empty());
  // One delta per byte token (multi-byte characters whole): the text streams as it comes.
  EXPECT_GT(s.order.size(), 40u);
  const auto first_content = std::find(s.order.begin(), s.order.end(), "content");
  EXPECT_EQ(std::find(first_content, s.order.end(), "reasoning"), s.order.end())
      << "all reasoning comes before the content";
}

TEST_F(HarmonyChatTest, ACommentaryMessageToAFunctionIsAToolCall) {
  start(kCall);
  for (bool stream : {false, true}) {
    SCOPED_TRACE(stream ? "streamed" : "whole");
    auto r = chat({{"tools", tools_}, {"stream", stream}});
    ASSERT_EQ(r->status, 200) << r->body;
    json call;
    if (stream) {
      const Streamed s = read_stream(*r);
      EXPECT_EQ(s.reasoning, "Need the weather.");
      EXPECT_EQ(s.content, "");
      EXPECT_EQ(s.finish, "tool_calls");
      ASSERT_EQ(s.calls.size(), 1u);
      call = s.calls[0];
    } else {
      const json choice = r->json()["choices"][0];
      EXPECT_EQ(choice["finish_reason"], "tool_calls") << "ended by <|call|>";
      EXPECT_TRUE(choice["message"]["content"].is_null());
      EXPECT_EQ(choice["message"]["reasoning_content"], "Need the weather.");
      ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u);
      call = choice["message"]["tool_calls"][0];
    }
    EXPECT_TRUE(call["id"].get<std::string>().starts_with("call_"));
    EXPECT_EQ(call["function"]["name"], "get_weather");
    EXPECT_EQ(json::parse(call["function"]["arguments"].get<std::string>()),
              json::parse(R"({"city": "Paris"})"));
  }
  // Without tools offered, the call is no call and nothing of it is content.
  auto plain = chat(json::object());
  ASSERT_EQ(plain->status, 200) << plain->body;
  EXPECT_EQ(plain->json()["choices"][0]["message"]["content"], "");
  EXPECT_EQ(plain->json()["choices"][0]["finish_reason"], "stop");
}

TEST_F(HarmonyChatTest, ACallCutByMaxTokensIsNoCall) {
  start(kCall);
  auto r = chat({{"tools", tools_}, {"max_tokens", int(kCall.ids.size()) - 16}});
  ASSERT_EQ(r->status, 200) << r->body;
  const json choice = r->json()["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "length");
  EXPECT_FALSE(choice["message"].contains("tool_calls"));
  EXPECT_EQ(choice["message"]["reasoning_content"], "Need the weather.");
}

TEST_F(HarmonyChatTest, StopStringsCutTheContentNotTheReasoning) {
  start(kAnalysisThenFinal);
  for (bool stream : {false, true}) {
    auto r = chat({{"stop", "café"}, {"stream", stream}});
    ASSERT_EQ(r->status, 200) << r->body;
    std::string reasoning, content, finish;
    if (stream) {
      const Streamed s = read_stream(*r);
      reasoning = s.reasoning, content = s.content, finish = s.finish;
    } else {
      const json choice = r->json()["choices"][0];
      reasoning = choice["message"]["reasoning_content"], content = choice["message"]["content"];
      finish = choice["finish_reason"];
    }
    EXPECT_EQ(reasoning, "The user greets. Reply with café ✓.");
    EXPECT_EQ(content, "Bonjour, ");
    EXPECT_EQ(finish, "stop");
  }
}

TEST_F(HarmonyChatTest, ReasoningEffortReachesTheTemplate) {
  start(kAnalysisThenFinal);
  auto r = chat({{"reasoning_effort", "high"}});
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(codec_->last_chat().template_kwargs["reasoning_effort"], "high");
  auto same =
      chat({{"reasoning_effort", "low"}, {"chat_template_kwargs", {{"reasoning_effort", "low"}}}});
  ASSERT_EQ(same->status, 200) << same->body;
  EXPECT_EQ(codec_->last_chat().template_kwargs["reasoning_effort"], "low");

  auto bad = chat({{"reasoning_effort", "extreme"}});
  EXPECT_EQ(bad->status, 400);
  EXPECT_EQ(bad->json()["error"]["param"], "reasoning_effort");
  auto conflict =
      chat({{"reasoning_effort", "low"}, {"chat_template_kwargs", {{"reasoning_effort", "high"}}}});
  EXPECT_EQ(conflict->status, 400);
  EXPECT_EQ(conflict->json()["error"]["param"], "reasoning_effort");
}

TEST_F(HarmonyChatTest, AnEarlierTurnsReasoningReachesTheTemplate) {
  start(kAnalysisThenFinal);
  auto r = chat({{"messages",
                  {{{"role", "user"}, {"content", "Weather?"}},
                   {{"role", "assistant"}, {"content", "Sunny."}, {"reasoning_content", "Look."}},
                   {{"role", "user"}, {"content", "Thanks"}}}}});
  ASSERT_EQ(r->status, 200) << r->body;
  const ChatPrompt prompt = codec_->last_chat();
  ASSERT_EQ(prompt.messages.size(), 3u);
  EXPECT_EQ(prompt.messages[1].reasoning_content, "Look.");
}

// A model that ignores the format (no marker at all) still answers: its text is the content.
TEST_F(HarmonyChatTest, AReplyWithoutMarkersIsContent) {
  start(Script().text("plain words"));
  for (bool stream : {false, true}) {
    auto r = chat({{"stream", stream}, {"max_tokens", 11}});
    ASSERT_EQ(r->status, 200) << r->body;
    if (stream) {
      EXPECT_EQ(read_stream(*r).content, "plain words");
    } else {
      EXPECT_EQ(r->json()["choices"][0]["message"]["content"], "plain words");
      EXPECT_TRUE(r->json()["choices"][0]["message"]["reasoning_content"].is_null());
    }
  }
}

TEST_F(HarmonyChatTest, AnthropicMessagesShowTheReasoningAsThinkingBlocks) {
  start(kAnalysisThenFinal);
  auto whole = messages(json::object());
  ASSERT_EQ(whole->status, 200) << whole->body;
  EXPECT_EQ(whole->json()["content"], json::parse(R"([
      {"type": "thinking", "thinking": "The user greets. Reply with café ✓.", "signature": ""},
      {"type": "text", "text": "Bonjour, café ✓! Type <|end|> to end."}])"));
  EXPECT_EQ(whole->json()["stop_reason"], "end_turn");

  auto streamed = messages({{"stream", true}});
  ASSERT_EQ(streamed->status, 200);
  std::string thinking, text;
  std::vector<std::pair<std::string, int>> blocks;  // each block's type and index, as started
  for (const SseFrame& frame : sse_frames(*streamed)) {
    const json& e = frame.data;
    if (e["type"] == "content_block_start")
      blocks.emplace_back(e["content_block"]["type"], e["index"]);
    if (e["type"] != "content_block_delta") continue;
    if (e["delta"]["type"] == "thinking_delta") {
      EXPECT_TRUE(text.empty()) << "thinking comes before the text";
      thinking += e["delta"]["thinking"].get<std::string>();
    } else {
      text += e["delta"]["text"].get<std::string>();
    }
  }
  EXPECT_EQ(thinking, "The user greets. Reply with café ✓.");
  EXPECT_EQ(text, "Bonjour, café ✓! Type <|end|> to end.");
  EXPECT_EQ(blocks, (std::vector<std::pair<std::string, int>>{{"thinking", 0}, {"text", 1}}));

  auto hidden = messages({{"thinking", {{"type", "disabled"}}}});
  ASSERT_EQ(hidden->status, 200) << hidden->body;
  EXPECT_EQ(hidden->json()["content"], json::parse(R"([
      {"type": "text", "text": "Bonjour, café ✓! Type <|end|> to end."}])"));
}

TEST_F(HarmonyChatTest, AnthropicMessagesReadACommentaryCallAsToolUse) {
  start(kCall);
  const json tools = json::parse(R"([{"name": "get_weather",
      "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}])");
  auto r = messages({{"tools", tools}});
  ASSERT_EQ(r->status, 200) << r->body;
  const json body = r->json();
  EXPECT_EQ(body["stop_reason"], "tool_use");
  ASSERT_EQ(body["content"].size(), 2u) << body;
  EXPECT_EQ(body["content"][0]["thinking"], "Need the weather.");
  EXPECT_EQ(body["content"][1]["type"], "tool_use");
  EXPECT_EQ(body["content"][1]["name"], "get_weather");
  EXPECT_EQ(body["content"][1]["input"], json::parse(R"({"city": "Paris"})"));
}

TEST_F(HarmonyChatTest, ResponsesShowTheReasoningAsAReasoningItem) {
  start(kAnalysisThenFinal);
  auto whole = responses(json::object());
  ASSERT_EQ(whole->status, 200) << whole->body;
  const json output = whole->json()["output"];
  ASSERT_EQ(output.size(), 2u) << output;
  EXPECT_EQ(output[0]["type"], "reasoning");
  EXPECT_EQ(output[0]["content"], json::parse(R"([
      {"type": "reasoning_text", "text": "The user greets. Reply with café ✓."}])"));
  EXPECT_EQ(output[1]["type"], "message");
  EXPECT_EQ(output[1]["content"][0]["text"], "Bonjour, café ✓! Type <|end|> to end.");
  EXPECT_EQ(whole->json()["status"], "completed");

  auto streamed = responses({{"stream", true}});
  ASSERT_EQ(streamed->status, 200);
  std::string reasoning, text;
  std::vector<std::string> added;  // each item's type, as added
  json completed;
  int64_t sequence = 0;
  for (const SseFrame& frame : sse_frames(*streamed)) {
    const json& e = frame.data;
    EXPECT_EQ(e["sequence_number"], sequence++) << e;
    if (e["type"] == "response.output_item.added") added.push_back(e["item"]["type"]);
    if (e["type"] == "response.reasoning_text.delta") {
      EXPECT_TRUE(text.empty()) << "the reasoning comes before the text";
      reasoning += e["delta"].get<std::string>();
    }
    if (e["type"] == "response.output_text.delta") text += e["delta"].get<std::string>();
    if (e["type"] == "response.completed") completed = e["response"];
  }
  EXPECT_EQ(reasoning, "The user greets. Reply with café ✓.");
  EXPECT_EQ(text, "Bonjour, café ✓! Type <|end|> to end.");
  EXPECT_EQ(added, (std::vector<std::string>{"reasoning", "message"}));
  ASSERT_TRUE(completed.is_object());
  ASSERT_EQ(completed["output"].size(), 2u);
  EXPECT_EQ(completed["output"][0]["content"], output[0]["content"]);
  EXPECT_EQ(completed["output"][1]["content"], output[1]["content"]);
}

TEST_F(HarmonyChatTest, ResponsesReadACommentaryCallAsAFunctionCallAndContinueAfterIt) {
  start(kCall);
  const json tools = json::parse(R"([{"type": "function", "name": "get_weather",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}])");
  auto r = responses({{"tools", tools}, {"reasoning", {{"effort", "high"}}}});
  ASSERT_EQ(r->status, 200) << r->body;
  const json body = r->json();
  ASSERT_EQ(body["output"].size(), 2u) << body;
  EXPECT_EQ(body["output"][0]["type"], "reasoning");
  const json& call = body["output"][1];
  EXPECT_EQ(call["type"], "function_call");
  EXPECT_EQ(call["name"], "get_weather");
  EXPECT_EQ(json::parse(call["arguments"].get<std::string>()), json::parse(R"({"city": "Paris"})"));
  EXPECT_EQ(codec_->last_chat().template_kwargs["reasoning_effort"], "high");
  // The call's output continues the stored response: the template gets the earlier turn whole,
  // its reasoning included (gpt-oss's shows it again before a call).
  auto next = responses(
      {{"previous_response_id", body["id"]},
       {"tools", tools},
       {"input",
        {{{"type", "function_call_output"}, {"call_id", call["call_id"]}, {"output", "sunny"}}}}});
  ASSERT_EQ(next->status, 200) << next->body;
  const ChatPrompt prompt = codec_->last_chat();
  ASSERT_EQ(prompt.messages.size(), 3u);
  EXPECT_EQ(prompt.messages[0].content, "Hi");
  EXPECT_EQ(prompt.messages[1].reasoning_content, "Need the weather.");
  EXPECT_EQ(prompt.messages[1].tool_calls[0]["id"], call["call_id"]);
  EXPECT_EQ(prompt.messages[1].tool_calls[0]["function"]["arguments"]["city"], "Paris");
  EXPECT_EQ(prompt.messages[2].role, "tool");
  EXPECT_EQ(prompt.messages[2].content, "sunny");
}

}  // namespace
}  // namespace drift::server
