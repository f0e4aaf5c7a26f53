#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "server/openai_response.h"
#include "server/openai_service.h"
#include "server/prometheus_metrics.h"
#include "server/sse.h"

namespace drift::server {
namespace {

TEST(Sse, EventIsOneDataLineAndABlankLine) {
  EXPECT_EQ(sse_event(R"({"a":1})"), "data: {\"a\":1}\n\n");
  EXPECT_EQ(sse_done(), "data: [DONE]\n\n");
}

TEST(Sse, ChunkWithNewlinesStaysOnOneLine) {
  ResponseMeta meta{true, "chatcmpl-1", 7, "m"};
  std::string event =
      sse_event(dump_json(chunk_json(meta, 0, "a\nb\n\n", false, std::nullopt, true)));
  EXPECT_EQ(event.find('\n'), event.size() - 2);
  auto j = nlohmann::json::parse(event.substr(6));
  EXPECT_EQ(j["choices"][0]["delta"]["content"], "a\nb\n\n");
  EXPECT_EQ(j["object"], "chat.completion.chunk");
  EXPECT_TRUE(j.contains("usage") && j["usage"].is_null());
}

TEST(Responses, ChatFirstChunkCarriesRoleAndUsageChunkHasNoChoices) {
  ResponseMeta meta{true, "chatcmpl-1", 7, "m"};
  auto first = chunk_json(meta, 0, "", true, std::nullopt, false);
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  EXPECT_FALSE(first.contains("usage"));
  auto usage = usage_chunk_json(meta, 5, 3);
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["total_tokens"], 8);
  ResponseMeta comp{false, "cmpl-1", 7, "m"};
  auto whole = response_json(comp, {{0, "hi", "length"}}, 5, 3);
  EXPECT_EQ(whole["object"], "text_completion");
  EXPECT_EQ(whole["choices"][0]["text"], "hi");
  EXPECT_EQ(whole["usage"]["completion_tokens"], 3);
}

TEST(Responses, LogprobsInBothShapes) {
  TokenLogprobEntry e;
  e.token = 7;
  e.logprobs.logprob = -0.5f;
  e.logprobs.num_top = 2;
  e.logprobs.top_ids = {7, 9};
  e.logprobs.top_logprobs = {-0.5f, -1.5f};
  std::vector<TokenLogprobEntry> entries = {e, e};
  auto text = [](int32_t id) { return id == 7 ? std::string("ab") : std::string("\xC3"); };
  auto c = logprobs_json(false, entries, text, 3);
  EXPECT_EQ(c["tokens"], nlohmann::json({"ab", "ab"}));
  EXPECT_EQ(c["text_offset"], nlohmann::json({3, 5}));
  EXPECT_FLOAT_EQ(c["top_logprobs"][0]["ab"].get<float>(), -0.5f);
  auto chat = logprobs_json(true, entries, text, 0);
  EXPECT_EQ(chat["content"][0]["bytes"], nlohmann::json({97, 98}));
  EXPECT_EQ(chat["content"][0]["top_logprobs"][1]["bytes"], nlohmann::json({0xC3}));
  // Half a character in a token's text still dumps as valid JSON (U+FFFD).
  EXPECT_NE(dump_json(chat).find("\xEF\xBF\xBD"), std::string::npos);
}

TEST(Prometheus, GaugesCountersAndCumulativeHistograms) {
  EngineMetrics m;
  m.num_running = 3;
  m.num_waiting = 2;
  m.kv_pages_total = 100;
  m.kv_pages_used = 25;
  m.generation_tokens_total = 42;
  m.prefix_cache_enabled = true;
  m.prefix_cache.queried_tokens = 300;
  m.prefix_cache.hit_tokens = 128;
  m.spec_drafts = 5;
  m.spec_draft_tokens = 20;
  m.spec_accepted_tokens = 9;
  m.spec_accepted_by_position[0] = 5;
  m.spec_accepted_by_position[1] = 4;
  m.spec_pool_draft_tokens = 7;
  m.spec_pool_accepted_tokens = 3;
  m.spec_pool_bytes = 8388608;
  m.spec_forced_draft_tokens = 11;
  m.spec_forced_accepted_tokens = 10;
  m.spec_auto_steps_with_drafts = 40;
  m.spec_auto_steps_without_drafts = 320;
  m.spec_draft_model_draft_tokens = 64;
  m.spec_draft_model_accepted_tokens = 48;
  m.spec_draft_model_steps = 16;
  m.spec_draft_model_seconds = 0.5;
  m.spec_draft_model_passes = 128;
  m.spec_draft_model_kv_bytes = 1048576;
  m.time_to_first_token.observe(0.003);  // bucket (0.001, 0.005]
  m.time_to_first_token.observe(0.05);   // bucket (0.04, 0.06]
  m.time_to_first_token.observe(1000);   // +Inf only
  ServerStats s;
  s.client_disconnects = 7;
  const std::string text = render_prometheus(m, s, "my\"model");
  auto has = [&](const std::string& line) { return text.find(line + "\n") != std::string::npos; };
  const std::string l = "{model_name=\"my\\\"model\"";
  EXPECT_TRUE(has("vllm:num_requests_running" + l + "} 3"));
  EXPECT_TRUE(has("vllm:num_requests_waiting" + l + "} 2"));
  EXPECT_TRUE(has("vllm:kv_cache_usage_perc" + l + "} 0.25"));
  EXPECT_TRUE(has("vllm:generation_tokens_total" + l + "} 42"));
  EXPECT_TRUE(has("vllm:prefix_cache_queries_total" + l + "} 300"));
  EXPECT_TRUE(has("vllm:prefix_cache_hits_total" + l + "} 128"));
  EXPECT_TRUE(has("drift:prefix_cache_enabled" + l + "} 1"));
  EXPECT_TRUE(has("vllm:spec_decode_num_drafts_total" + l + "} 5"));
  EXPECT_TRUE(has("vllm:spec_decode_num_draft_tokens_total" + l + "} 20"));
  EXPECT_TRUE(has("vllm:spec_decode_num_accepted_tokens_total" + l + "} 9"));
  EXPECT_TRUE(has("vllm:spec_decode_num_accepted_tokens_per_pos" + l + ",position=\"1\"} 4"));
  EXPECT_FALSE(has("vllm:spec_decode_num_accepted_tokens_per_pos" + l + ",position=\"2\"} 0"));
  EXPECT_TRUE(has("drift:spec_decode_pool_draft_tokens_total" + l + "} 7"));
  EXPECT_TRUE(has("drift:spec_decode_pool_accepted_tokens_total" + l + "} 3"));
  EXPECT_TRUE(has("drift:spec_decode_pool_bytes" + l + "} 8388608"));
  EXPECT_TRUE(has("drift:spec_decode_forced_draft_tokens_total" + l + "} 11"));
  EXPECT_TRUE(has("drift:spec_decode_forced_accepted_tokens_total" + l + "} 10"));
  EXPECT_TRUE(has("drift:spec_decode_auto_steps_total" + l + ",drafts=\"allowed\"} 40"));
  EXPECT_TRUE(has("drift:spec_decode_auto_steps_total" + l + ",drafts=\"withheld\"} 320"));
  EXPECT_TRUE(has("drift:spec_decode_draft_model_draft_tokens_total" + l + "} 64"));
  EXPECT_TRUE(has("drift:spec_decode_draft_model_accepted_tokens_total" + l + "} 48"));
  EXPECT_TRUE(has("drift:spec_decode_draft_model_steps_total" + l + "} 16"));
  EXPECT_TRUE(has("drift:spec_decode_draft_model_seconds_total" + l + "} 0.5"));
  EXPECT_TRUE(has("drift:spec_decode_draft_model_passes_total" + l + "} 128"));
  EXPECT_TRUE(has("drift:spec_decode_draft_model_kv_bytes" + l + "} 1048576"));
  EXPECT_TRUE(has("# TYPE vllm:time_to_first_token_seconds histogram"));
  EXPECT_TRUE(has("vllm:time_to_first_token_seconds_bucket" + l + ",le=\"0.001\"} 0"));
  EXPECT_TRUE(has("vllm:time_to_first_token_seconds_bucket" + l + ",le=\"0.005\"} 1"));
  EXPECT_TRUE(has("vllm:time_to_first_token_seconds_bucket" + l + ",le=\"0.04\"} 1"));
  EXPECT_TRUE(has("vllm:time_to_first_token_seconds_bucket" + l + ",le=\"0.06\"} 2"));
  EXPECT_TRUE(has("vllm:time_to_first_token_seconds_bucket" + l + ",le=\"160\"} 2"));
  EXPECT_TRUE(has("vllm:time_to_first_token_seconds_bucket" + l + ",le=\"+Inf\"} 3"));
  EXPECT_TRUE(has("vllm:time_to_first_token_seconds_count" + l + "} 3"));
  EXPECT_TRUE(has("drift:client_disconnects_total" + l + "} 7"));
  // A metric family declared twice makes Prometheus reject the whole scrape.
  std::set<std::string> families;
  for (size_t pos = text.find("# TYPE "); pos != std::string::npos;
       pos = text.find("# TYPE ", pos + 1)) {
    const size_t begin = pos + 7;
    const std::string name = text.substr(begin, text.find(' ', begin) - begin);
    EXPECT_TRUE(families.insert(name).second) << "declared twice: " << name;
  }
  // Every sample line is "name{labels} value".
  for (size_t pos = 0; pos < text.size();) {
    size_t end = text.find('\n', pos);
    std::string line = text.substr(pos, end - pos);
    if (line[0] != '#') {
      EXPECT_NE(line.find("} "), std::string::npos) << line;
    }
    pos = end + 1;
  }
}

TEST(Prometheus, KvTiersPerMedium) {
  EngineMetrics m;
  m.kv_page_size = 16;
  m.kv_page_bytes = 1000;
  m.kv_pages_cached = 5;
  m.prefix_cache.hit_tokens = 16 * 10;  // 10 pages hit, 4 of them read from disk
  auto has = [](const std::string& text, const std::string& line) {
    return text.find(line + "\n") != std::string::npos;
  };
  const std::string l = "{model_name=\"m\"";
  std::string text = render_prometheus(m, ServerStats{}, "m");
  EXPECT_TRUE(has(text, "drift:kv_tier_pages" + l + ",medium=\"CPU\"} 5"));
  EXPECT_TRUE(has(text, "drift:kv_tier_bytes" + l + ",medium=\"CPU\"} 5000"));
  EXPECT_EQ(text.find("medium=\"DISK\""), std::string::npos) << "no tier, no DISK samples";
  m.kv_disk = KVDiskMetrics{};
  m.kv_disk->tier.pages_loaded = 4;
  m.kv_disk->store.pages = 7;
  m.kv_disk->store.bytes = 7200;
  m.kv_disk->store.bytes_read = 4000;
  m.kv_disk->store.read_seconds = 0.5;
  m.kv_disk->tier.pages_written_ahead = 9;
  m.kv_disk->preemption.swapped = 3;
  m.kv_disk->preemption.recomputed = 2;
  m.kv_disk->preemption.predicted_swap_seconds = 0.25;
  m.kv_disk->preemption.predicted_recompute_seconds = 1.5;
  text = render_prometheus(m, ServerStats{}, "m");
  EXPECT_TRUE(has(text, "drift:kv_tier_pages" + l + ",medium=\"DISK\"} 7"));
  EXPECT_TRUE(has(text, "drift:kv_tier_bytes" + l + ",medium=\"DISK\"} 7200"));
  EXPECT_TRUE(has(text, "drift:kv_tier_hit_pages_total" + l + ",medium=\"CPU\"} 6"));
  EXPECT_TRUE(has(text, "drift:kv_tier_hit_pages_total" + l + ",medium=\"DISK\"} 4"));
  EXPECT_TRUE(has(text, "drift:kv_disk_read_bytes_total" + l + "} 4000"));
  EXPECT_TRUE(has(text, "drift:kv_disk_read_seconds_total" + l + "} 0.5"));
  EXPECT_TRUE(has(text, "drift:kv_disk_writes_ahead_total" + l + "} 9"));
  EXPECT_TRUE(has(text, "drift:kv_preemptions_total" + l + ",mode=\"swap\"} 3"));
  EXPECT_TRUE(has(text, "drift:kv_preemptions_total" + l + ",mode=\"recompute\"} 2"));
  EXPECT_TRUE(
      has(text, "drift:kv_preemption_predicted_seconds_total" + l + ",mode=\"swap\"} 0.25"));
  EXPECT_TRUE(
      has(text, "drift:kv_preemption_predicted_seconds_total" + l + ",mode=\"recompute\"} 1.5"));
}

TEST(ApiKey, ExactMatchOnly) {
  EXPECT_TRUE(api_key_matches("Bearer sekret", "sekret"));
  EXPECT_FALSE(api_key_matches("Bearer sekre", "sekret"));
  EXPECT_FALSE(api_key_matches("Bearer sekret2", "sekret"));
  EXPECT_FALSE(api_key_matches("sekret", "sekret"));
  EXPECT_FALSE(api_key_matches("", "sekret"));
  EXPECT_FALSE(api_key_matches("Bearer Sekret", "sekret"));
  EXPECT_FALSE(api_key_matches("Basic sekret", "sekret"));
}

// The scheme is case-insensitive (RFC 9110); the key is not.
TEST(ApiKey, SchemeIsCaseInsensitive) {
  EXPECT_TRUE(api_key_matches("bearer sekret", "sekret"));
  EXPECT_TRUE(api_key_matches("BEARER sekret", "sekret"));
  EXPECT_FALSE(api_key_matches("bearer SEKRET", "sekret"));
  EXPECT_FALSE(api_key_matches("bearer", ""));
}

}  // namespace
}  // namespace drift::server
