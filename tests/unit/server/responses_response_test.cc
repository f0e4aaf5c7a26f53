// The Responses codec (responses_response.h) on its own: the frames it writes for each reply part,
// the numbering of its events, a failure after the stream started, an empty reply, and what it
// stores (the body GET returns, the chain's items a continuation reads back).
#include "server/responses_response.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "server/responses_schema.h"

namespace drift::server {
namespace {

using nlohmann::json;

struct Frame {
  std::string event;
  json data;
};

// "event: T\ndata: {...}\n\n" frames, in order.
std::vector<Frame> frames(const std::string& text) {
  std::vector<Frame> out;
  size_t at = 0;
  while (at < text.size()) {
    const size_t end = text.find("\n\n", at);
    const std::string frame = text.substr(at, end - at);
    at = end + 2;
    const size_t newline = frame.find('\n');
    EXPECT_TRUE(frame.starts_with("event: ")) << frame;
    EXPECT_EQ(frame.substr(newline + 1, 6), "data: ") << frame;
    out.push_back({frame.substr(7, newline - 7), json::parse(frame.substr(newline + 7))});
  }
  return out;
}

ResponseMeta meta() { return ResponseMeta{true, "resp_00ab", 1700000000, "m"}; }

ResponsesReplyContext context(std::shared_ptr<ResponseStore> store) {
  ResponsesReplyContext c;
  c.echo = jinja::Json{{"metadata", {{"k", "v"}}}, {"store", store != nullptr}};
  c.store = std::move(store);
  c.input_items = jinja::Json::parse(R"([{"type": "message", "role": "user", "content": "Hi"}])");
  c.instructions = "Be brief.";
  return c;
}

std::shared_ptr<ResponseStore> new_store() {
  return std::make_shared<ResponseStore>(ResponseStoreLimits{});
}

TEST(ResponsesCodec, AStreamNumbersItsEventsAndStoresWhatItSent) {
  auto store = new_store();
  ResponsesReplyCodec codec(meta(), context(store));
  std::string out = codec.stream_start({}, 7);
  out += codec.reasoning_delta(0, "Think.", nullptr);
  out += codec.content_delta(0, "Hel", nullptr);
  out += codec.content_delta(0, "lo", nullptr);
  const ToolCall call{"call_1", "f", R"({"a":1})"};
  out += codec.tool_calls(0, std::span<const ToolCall>(&call, 1));
  out += codec.choice_end(0, ChoiceEnd{"tool_calls", std::nullopt, 5, 4}, nullptr);
  out += codec.stream_end(7, 5);
  const std::vector<Frame> f = frames(out);
  std::vector<std::string> names;
  for (size_t i = 0; i < f.size(); ++i) {
    EXPECT_EQ(f[i].event, f[i].data["type"]);
    EXPECT_EQ(f[i].data["sequence_number"], i);
    names.push_back(f[i].event);
  }
  EXPECT_EQ(
      names,
      (std::vector<std::string>{
          "response.created", "response.in_progress", "response.output_item.added",
          "response.reasoning_text.delta", "response.reasoning_text.done",
          "response.output_item.done", "response.output_item.added", "response.content_part.added",
          "response.output_text.delta", "response.output_text.delta", "response.output_text.done",
          "response.content_part.done", "response.output_item.done", "response.output_item.added",
          "response.function_call_arguments.delta", "response.function_call_arguments.done",
          "response.output_item.done", "response.completed"}));
  EXPECT_EQ(f[0].data["response"]["status"], "in_progress");
  EXPECT_EQ(f[0].data["response"]["metadata"]["k"], "v");
  const json& done = f.back().data["response"];
  EXPECT_EQ(done["status"], "completed");
  ASSERT_EQ(done["output"].size(), 3u);
  EXPECT_EQ(done["output"][0]["id"], "rs_00ab_0");
  EXPECT_EQ(done["output"][1]["content"][0]["text"], "Hello");
  EXPECT_EQ(done["output"][2]["call_id"], "call_1");
  EXPECT_EQ(done["usage"], json::parse(R"({"input_tokens": 7,
      "input_tokens_details": {"cached_tokens": 4}, "output_tokens": 5,
      "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 12})"));
  // Stored: the body as sent, and the chain's items read back as one conversation.
  const std::optional<StoredResponse> stored = store->get("resp_00ab");
  ASSERT_TRUE(stored);
  EXPECT_EQ(json::parse(stored->body), done);
  EXPECT_EQ(stored->instructions, "Be brief.");
  std::vector<ChatMessage> turns;
  ASSERT_FALSE(read_input_items(jinja::Json::parse(stored->conversation), "x", turns));
  ASSERT_EQ(turns.size(), 2u);
  EXPECT_EQ(turns[0].content, "Hi");
  EXPECT_EQ(turns[1].reasoning_content, "Think.");
  EXPECT_EQ(turns[1].content, "Hello");
  EXPECT_EQ(turns[1].tool_calls[0]["id"], "call_1");
}

TEST(ResponsesCodec, AnEmptyReplyIsAnEmptyMessageAndALengthEndIsIncomplete) {
  ResponsesReplyCodec streamed(meta(), context(nullptr));
  std::string out = streamed.stream_start({}, 3);
  out += streamed.choice_end(0, ChoiceEnd{"length", std::nullopt, 2, 0}, nullptr);
  out += streamed.stream_end(3, 2);
  const std::vector<Frame> f = frames(out);
  EXPECT_EQ(f.back().event, "response.incomplete");
  const json& last = f.back().data["response"];
  EXPECT_EQ(last["incomplete_details"]["reason"], "max_output_tokens");
  EXPECT_EQ(last["output"][0]["content"][0]["text"], "");

  ResponsesReplyCodec whole(meta(), context(nullptr));
  ChoiceResult empty;
  empty.finish_reason = "length";
  const json body = json::parse(whole.response({empty}, 3, 2));
  EXPECT_EQ(body["status"], "incomplete");
  EXPECT_EQ(body["output"], last["output"]);
}

TEST(ResponsesCodec, AFailureAfterTheStartIsAnErrorThenResponseFailedAndNothingIsStored) {
  auto store = new_store();
  ResponsesReplyCodec codec(meta(), context(store));
  std::string out = codec.stream_start({}, 3);
  out += codec.content_delta(0, "par", nullptr);
  out += codec.stream_error(unavailable("the request was cancelled by the server"));
  const std::vector<Frame> f = frames(out);
  ASSERT_GE(f.size(), 2u);
  EXPECT_EQ(f[f.size() - 2].event, "error");
  EXPECT_EQ(f[f.size() - 2].data["message"], "the request was cancelled by the server");
  EXPECT_EQ(f.back().event, "response.failed");
  EXPECT_EQ(f.back().data["response"]["status"], "failed");
  EXPECT_EQ(f.back().data["sequence_number"], f.size() - 1);
  EXPECT_FALSE(store->get("resp_00ab"));
}

}  // namespace
}  // namespace drift::server
