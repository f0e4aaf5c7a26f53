// The /v1/engine/events payload from a hand-made snapshot: counts, pages and steps as the page
// reads them.
#include "server/engine_view_json.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace drift::server {
namespace {

using nlohmann::json;

TEST(EngineViewJson, CountsPagesStepsAndHistograms) {
  EngineSnapshot s;
  s.version = 4;
  s.steps = 12;
  SequenceView decoding{.id = kFirstEngineAssignedId + 5,
                        .phase = SequencePhase::kDecode,
                        .prompt_tokens = 9,
                        .prefilled_tokens = 9,
                        .generated_tokens = 3,
                        .max_new_tokens = 16,
                        .pages = 3};
  SequenceView prefilling{.id = 2,
                          .phase = SequencePhase::kPrefill,
                          .prompt_tokens = 40,
                          .prefilled_tokens = 8,
                          .max_new_tokens = 4,
                          .pages = 2};
  SequenceView preempted{.id = 3,
                         .phase = SequencePhase::kWaiting,
                         .num_preemptions = 1,
                         .prompt_tokens = 5,
                         .generated_tokens = 2,
                         .max_new_tokens = 8};
  s.sequences = {decoding, prefilling, preempted};
  s.recent_steps = {{11, 8, 1, 2, 0.0123456}, {12, 0, 2, 2, 0.004}};
  s.page_map = "uussccf";
  EngineMetrics m;
  m.num_waiting = 3;  // one preempted + two not taken yet
  m.prefix_cache_enabled = true;
  m.prefix_cache.queried_tokens = 100;
  m.prefix_cache.hit_tokens = 25;
  m.time_to_first_token.observe(0.03);
  m.inter_token_latency.observe(0.002);
  m.inter_token_latency.observe(0.002);
  m.spec_drafts = 4;
  m.spec_draft_tokens = 20;
  m.spec_accepted_tokens = 11;
  m.spec_forced_draft_tokens = 6;
  m.spec_forced_accepted_tokens = 6;
  m.spec_auto_steps_with_drafts = 8;
  m.spec_auto_steps_without_drafts = 16;

  const json j = json::parse(engine_view_json(s, m, /*page_size=*/16));
  EXPECT_EQ(j["version"], 4);
  EXPECT_EQ(j["steps"], 12);
  EXPECT_EQ(j["page_size"], 16);
  EXPECT_EQ(j["counts"], (json{{"running", 2}, {"waiting", 1}, {"preempted", 1}, {"queued", 3}}));
  ASSERT_EQ(j["sequences"].size(), 3u);
  // Ids are strings: 2^63 + 5 is no exact JavaScript number.
  EXPECT_EQ(j["sequences"][0]["id"], "9223372036854775813");
  EXPECT_EQ(j["sequences"][0]["phase"], "decode");
  EXPECT_EQ(j["sequences"][1]["prefilled_tokens"], 8);
  EXPECT_EQ(j["sequences"][2]["preempted"], true);
  EXPECT_EQ(j["sequences"][2]["phase"], "waiting");
  EXPECT_EQ(j["recent_steps"], (json::parse("[[11, 8, 1, 2, 12.35], [12, 0, 2, 2, 4.0]]")));
  EXPECT_EQ(j["kv"]["map"], "uussccf");
  EXPECT_EQ(j["kv"]["total"], 7);
  EXPECT_EQ(j["kv"]["used"], 4) << "shared pages are used pages";
  EXPECT_EQ(j["kv"]["shared"], 2);
  EXPECT_EQ(j["kv"]["cached"], 2);
  EXPECT_EQ(j["kv"]["free"], 1);
  EXPECT_EQ(j["prefix_cache"]["hit_tokens"], 25);
  EXPECT_EQ(j["ttft"]["count"], 1);
  EXPECT_EQ(j["itl"]["count"], 2);
  EXPECT_EQ(j["itl"]["counts"].size(), j["itl"]["bounds"].size() + 1);
  EXPECT_EQ(j["spec"]["drafts"], 4);
  EXPECT_EQ(j["spec"]["draft_tokens"], 20);
  EXPECT_EQ(j["spec"]["accepted_tokens"], 11);
  EXPECT_EQ(j["spec"]["forced_accepted_tokens"], 6);
  EXPECT_EQ(j["spec"]["pool_draft_tokens"], 0);
  EXPECT_EQ(j["spec"]["auto_steps_with_drafts"], 8);
  EXPECT_EQ(j["spec"]["auto_steps_without_drafts"], 16);
}

// With a disk tier, the swap-or-recompute choices of preemption and the cost model's figures.
TEST(EngineViewJson, DiskTierShowsHowPreemptionsWent) {
  EngineMetrics m;
  const json none = json::parse(engine_view_json(EngineSnapshot{}, m, 16));
  EXPECT_FALSE(none.contains("disk_tier"));
  m.kv_disk = KVDiskMetrics{};
  m.kv_disk->preemption.swapped = 2;
  m.kv_disk->preemption.recomputed = 1;
  m.kv_disk->preemption.predicted_swap_seconds = 0.5;
  m.kv_disk->preemption.last =
      PreemptionChoice{PreemptionMode::kSwap, /*swap_seconds=*/0.125, /*recompute_seconds=*/2.0};
  const json j = json::parse(engine_view_json(EngineSnapshot{}, m, 16));
  const json& p = j["disk_tier"]["preemption"];
  EXPECT_EQ(p["swapped"], 2);
  EXPECT_EQ(p["recomputed"], 1);
  EXPECT_EQ(p["predicted_swap_seconds"], 0.5);
  EXPECT_EQ(p["last"],
            (json{{"mode", "swap"}, {"swap_seconds", 0.125}, {"recompute_seconds", 2.0}}));
}

}  // namespace
}  // namespace drift::server
