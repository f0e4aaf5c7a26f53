// Ollama's reply shapes (ollama_response.h): NDJSON fragments, the last line's counts and
// durations, tool calls with their arguments as objects, and the error body.
#include "server/ollama_response.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace drift::server {
namespace {

using nlohmann::json;

std::vector<json> lines(const std::string& ndjson) {
  std::vector<json> out;
  std::istringstream in(ndjson);
  for (std::string line; std::getline(in, line);) out.push_back(json::parse(line));
  EXPECT_TRUE(ndjson.empty() || ndjson.back() == '\n');
  return out;
}

TEST(OllamaResponse, AChatStreamIsFragmentsThenADoneLine) {
  const auto received = std::chrono::steady_clock::now();
  OllamaReplyCodec codec(OllamaEndpoint::kChat, "m:latest", true, received);
  EXPECT_EQ(codec.stream_content_type(), "application/x-ndjson");
  EXPECT_EQ(codec.stream_start({}, 5), "");
  codec.first_token();
  // One call at a time: the codec keeps the reply's state between them.
  std::string ndjson = codec.reasoning_delta(0, "hmm", nullptr);
  ndjson += codec.content_delta(0, "Hi", nullptr);
  ndjson += codec.choice_end(0, {"length", std::nullopt, 2}, nullptr);
  ndjson += codec.stream_end(5, 2);
  std::vector<json> out = lines(ndjson);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0]["message"], (json{{"role", "assistant"}, {"content", ""}, {"thinking", "hmm"}}));
  EXPECT_EQ(out[1]["message"]["content"], "Hi");
  EXPECT_EQ(out[1]["model"], "m:latest");
  EXPECT_FALSE(out[1]["done"]);
  const json& last = out[2];
  EXPECT_TRUE(last["done"]);
  EXPECT_EQ(last["done_reason"], "length");
  EXPECT_EQ(last["prompt_eval_count"], 5);
  EXPECT_EQ(last["eval_count"], 2);
  EXPECT_EQ(last["total_duration"].get<int64_t>(), last["load_duration"].get<int64_t>() +
                                                       last["prompt_eval_duration"].get<int64_t>() +
                                                       last["eval_duration"].get<int64_t>());
  EXPECT_EQ(last["created_at"].get<std::string>().size(), 30u);  // 2026-01-02T03:04:05.123456789Z
}

TEST(OllamaResponse, HiddenThinkingAndGenerateFields) {
  OllamaReplyCodec codec(OllamaEndpoint::kGenerate, "m", false, std::chrono::steady_clock::now());
  EXPECT_EQ(codec.reasoning_delta(0, "hmm", nullptr), "");
  const json line = json::parse(codec.content_delta(0, "Hi", nullptr));
  EXPECT_EQ(line["response"], "Hi");
  EXPECT_FALSE(line.contains("message"));
  ChoiceResult r;
  r.text = "Hello";
  r.finish_reason = "stop";
  r.reasoning_content = "secret";
  const json body = json::parse(codec.response({r}, 3, 1));
  EXPECT_EQ(body["response"], "Hello");
  EXPECT_FALSE(body.contains("thinking"));
  EXPECT_EQ(body["done_reason"], "stop");
}

TEST(OllamaResponse, ToolCallsCarryTheirArgumentsAsObjects) {
  OllamaReplyCodec codec(OllamaEndpoint::kChat, "m", true, std::chrono::steady_clock::now());
  ChoiceResult r;
  r.finish_reason = "tool_calls";
  r.tool_calls = {{"call_a", "get_weather", R"({"city": "Paris", "days": 2})"},
                  {"call_b", "f", "not json"}};
  const json body = json::parse(codec.response({r}, 3, 9));
  EXPECT_EQ(body["done_reason"], "stop");  // as Ollama says for a reply that called tools
  const json& calls = body["message"]["tool_calls"];
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0]["id"], "call_a");
  EXPECT_EQ(calls[0]["function"]["name"], "get_weather");
  EXPECT_EQ(calls[0]["function"]["arguments"], (json{{"city", "Paris"}, {"days", 2}}));
  EXPECT_EQ(calls[1]["function"]["index"], 1);
  EXPECT_EQ(calls[1]["function"]["arguments"], (json{{"value", "not json"}}));
  const json streamed = json::parse(codec.tool_calls(0, r.tool_calls));
  EXPECT_EQ(streamed["message"]["tool_calls"], calls);
}

TEST(OllamaResponse, ErrorsAndLoadRepliesAndListings) {
  ApiError e = bad_request("must be a number", "options.top_k");
  EXPECT_EQ(json::parse(ollama_error_json(e)),
            (json{{"error", "options.top_k: must be a number"}}));
  OllamaReplyCodec codec(OllamaEndpoint::kChat, "m", true, std::chrono::steady_clock::now());
  EXPECT_EQ(codec.stream_error(e), ollama_error_json(e) + "\n");
  const json load = json::parse(ollama_load_reply(OllamaEndpoint::kGenerate, "m"));
  EXPECT_EQ(load["done_reason"], "load");
  EXPECT_EQ(load["response"], "");
  ModelCard card;
  card.architecture = "llama";
  card.parameter_count = 134'515'008;
  card.quantization = "Q4_1";
  card.file_bytes = 1000;
  card.modified_unix = 86400;
  const json tags = ollama_tags_json("m:latest", card);
  EXPECT_EQ(tags["models"][0]["name"], "m:latest");
  EXPECT_EQ(tags["models"][0]["modified_at"], "1970-01-02T00:00:00.000000000Z");
  EXPECT_EQ(tags["models"][0]["details"]["parameter_size"], "135M");
  EXPECT_EQ(tags["models"][0]["details"]["quantization_level"], "Q4_1");
  EXPECT_EQ(ollama_ps_json("m:latest", card, 512)["models"][0]["context_length"], 512);
  const json show = ollama_show_json(card, 512, {"completion"});
  EXPECT_EQ(show["model_info"]["general.parameter_count"], 134'515'008);
  EXPECT_EQ(show["capabilities"], json::array({"completion"}));
}

}  // namespace
}  // namespace drift::server
