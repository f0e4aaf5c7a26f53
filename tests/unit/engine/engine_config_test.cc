// Every field of EngineConfig is validated at construction, with an error that names it.
#include "engine/engine_config.h"

#include <gtest/gtest.h>

#include <functional>

#include "engine_fakes.h"

namespace drift {
namespace {

using testing::fake_model_facts;
using testing::small_config;

constexpr uint64_t kRam = uint64_t{16} << 30;

std::string error_of(const EngineConfig& config, const ModelFacts& model = fake_model_facts()) {
  Expected<EngineSetup> setup = resolve_engine_setup(config, model, kRam);
  return setup.ok() ? "" : setup.error().message;
}

TEST(EngineConfig, SmallConfigResolves) {
  Expected<EngineSetup> setup = resolve_engine_setup(small_config(64), fake_model_facts(), kRam);
  ASSERT_TRUE(setup.ok()) << setup.error().message;
  EXPECT_EQ(setup->num_kv_pages, 64);
  EXPECT_EQ(setup->kv_layout.page_size, 4);
  EXPECT_EQ(setup->kv_layout.num_layers, 2);
  EXPECT_EQ(setup->max_model_len, 128);
  EXPECT_EQ(setup->scheduler.max_model_len, 128);  // the engine's value, not SchedulerConfig's
}

// A model whose layer 0 slides over 8 positions and layer 1 attends to everything: two KV groups
// of one layer, pages of half the bytes, twice as many; the longest sequence the cache holds alone
// counts the sliding group at a window and a step.
TEST(EngineConfig, SlidingLayersGetKvGroupsAndTheContextTheyHold) {
  ModelFacts model = fake_model_facts();
  model.layer_windows = {8, 0};
  EngineConfig c = small_config(64);
  c.max_model_len.reset();
  c.scheduler.max_num_batched_tokens = 8;  // steps of at most 8 tokens
  Expected<EngineSetup> setup = resolve_engine_setup(c, model, kRam);
  ASSERT_TRUE(setup.ok()) << setup.error().message;
  EXPECT_EQ(setup->kv_layout.num_groups(), 2);
  EXPECT_EQ(setup->kv_layout.num_layers, 1);
  EXPECT_EQ(setup->kv_layout.group(1).sliding_window, 8);
  EXPECT_EQ(setup->kv_grouping.layer_group, (std::vector<int32_t>{1, 0}));
  EXPECT_EQ(setup->num_kv_pages, 128);
  // The sliding group holds at most ceil((8 - 1 + 8 + 3) / 4) = 5 pages; group 0 the other 123.
  EXPECT_EQ(setup->kv_tokens, 123 * 4);
  EXPECT_EQ(setup->max_model_len, 256);  // the model's, no longer the cache's 256 tokens
  // Without KV groups: one group, the 64 pages of before.
  c.kv.hybrid = false;
  setup = resolve_engine_setup(c, model, kRam);
  ASSERT_TRUE(setup.ok());
  EXPECT_EQ(setup->kv_layout.num_groups(), 1);
  EXPECT_EQ(setup->num_kv_pages, 64);
  EXPECT_EQ(setup->kv_tokens, 64 * 4);
  model.layer_windows = {8};
  EXPECT_NE(error_of(c, model).find("model.layer_windows"), std::string::npos);
}

TEST(EngineConfig, MaxModelLenDefaultsToTrainedContextCappedByTheLimit) {
  EngineConfig c = small_config();
  c.max_model_len.reset();
  c.scheduler.max_num_batched_tokens = 64;
  c.max_model_len_limit = 100;
  ModelFacts model = fake_model_facts();  // trained on 256
  EXPECT_EQ(resolve_engine_setup(c, model, kRam)->max_model_len, 100);
  c.max_model_len_limit = 4096;
  EXPECT_EQ(resolve_engine_setup(c, model, kRam)->max_model_len, 256);
}

TEST(EngineConfig, MaxModelLenDefaultsToTheModelsContextCappedByTheKvCache) {
  EngineConfig c = small_config();
  c.max_model_len.reset();
  c.scheduler.max_num_batched_tokens = 64;
  ModelFacts model = fake_model_facts();  // trained on 256; the cache holds 64 pages of 4 tokens
  Expected<EngineSetup> setup = resolve_engine_setup(c, model, kRam);
  EXPECT_EQ(setup->max_model_len, 256);
  EXPECT_EQ(setup->max_model_len_bound, ContextBound::kModel);
  c.kv.budget = KVMemoryBudget::of_bytes(512 * 40);  // 40 pages of 4 tokens
  setup = resolve_engine_setup(c, model, kRam);
  EXPECT_EQ(setup->max_model_len, 160);
  EXPECT_EQ(setup->max_model_len_bound, ContextBound::kKvCache);
  c.max_model_len = 200;  // set: not capped (admission refuses what can never fit)
  EXPECT_EQ(resolve_engine_setup(c, model, kRam)->max_model_len_bound, ContextBound::kConfigured);
}

TEST(EngineConfig, KvBudgetAsRamFractionSizesThePages) {
  EngineConfig c = small_config();
  c.kv.budget = KVMemoryBudget::of_ram_fraction(0.5);
  // 512 bytes per page of 4 tokens.
  EXPECT_EQ(resolve_engine_setup(c, fake_model_facts(), 1 << 20)->num_kv_pages, 1024);
}

TEST(EngineConfig, EachInvalidFieldIsNamed) {
  struct Case {
    const char* field;
    std::function<void(EngineConfig&)> spoil;
  };
  const Case cases[] = {
      {"kv.dtype", [](EngineConfig& c) { c.kv.dtype = KVDtype::kInt4; }},  // head dim 8
      {"kv.page_size", [](EngineConfig& c) { c.kv.page_size = 0; }},
      {"kv.budget", [](EngineConfig& c) { c.kv.budget = KVMemoryBudget::of_bytes(100); }},
      {"kv.budget", [](EngineConfig& c) { c.kv.budget = KVMemoryBudget::of_ram_fraction(1.5); }},
      {"kv.budget", [](EngineConfig& c) { c.kv.budget = KVMemoryBudget{}; }},
      {"max_model_len", [](EngineConfig& c) { c.max_model_len = 1; }},
      {"max_model_len", [](EngineConfig& c) { c.max_model_len = 257; }},
      {"max_model_len_limit", [](EngineConfig& c) { c.max_model_len_limit = 0; }},
      {"default_max_tokens", [](EngineConfig& c) { c.default_max_tokens = 0; }},
      {"max_queued_requests", [](EngineConfig& c) { c.max_queued_requests = 0; }},
      {"threads", [](EngineConfig& c) { c.threads = 0; }},
      {"scheduler.max_num_seqs", [](EngineConfig& c) { c.scheduler.max_num_seqs = 0; }},
      {"scheduler.max_num_batched_tokens",
       [](EngineConfig& c) { c.scheduler.max_num_batched_tokens = 0; }},
      {"scheduler.max_num_partial_prefills",
       [](EngineConfig& c) { c.scheduler.max_num_partial_prefills = 0; }},
      {"scheduler.long_prefill_token_threshold",
       [](EngineConfig& c) { c.scheduler.long_prefill_token_threshold = 0; }},
      {"scheduler.small_first_tokens_per_step",
       [](EngineConfig& c) { c.scheduler.small_first_tokens_per_step = -1; }},
      {"kv.disk_dir", [](EngineConfig& c) { c.kv.disk_dir = ""; }},
      {"kv.disk_dir",
       [](EngineConfig& c) {
         c.kv.disk_dir = "/tmp/unused";
         c.kv.enable_prefix_caching = false;
       }},
      {"kv.disk_gib",
       [](EngineConfig& c) {
         c.kv.disk_dir = "/tmp/unused";
         c.kv.disk_gib = 0;
       }},
      // Without chunked prefill a whole prompt must fit in one step.
      {"scheduler.max_num_batched_tokens",
       [](EngineConfig& c) { c.scheduler.enable_chunked_prefill = false; }},
  };
  for (const Case& k : cases) {
    EngineConfig c = small_config();
    k.spoil(c);
    std::string error = error_of(c);
    EXPECT_EQ(error.rfind(k.field, 0), 0u) << "field " << k.field << ": got \"" << error << "\"";
  }
}

TEST(EngineConfig, ModelFactsAreChecked) {
  ModelFacts model = fake_model_facts();
  model.eog_token_ids = {5000};
  EXPECT_NE(error_of(small_config(), model).find("model.eog_token_ids"), std::string::npos);
  model = fake_model_facts();
  model.num_layers = 0;
  EXPECT_NE(error_of(small_config(), model).find("num_layers"), std::string::npos);
}

TEST(EngineConfig, EngineCreateReportsTheField) {
  EngineConfig c = small_config();
  c.kv.dtype = KVDtype::kInt4;  // the fake model's head dim 8 is not whole int4 groups
  auto factory = [](const EngineSetup&) -> Expected<std::unique_ptr<Executor>> {
    ADD_FAILURE() << "no executor should be built for an invalid config";
    return make_error("unreachable");
  };
  auto engine =
      Engine::create(c, fake_model_facts(), std::make_shared<testing::FakeCodec>(), factory);
  ASSERT_FALSE(engine.ok());
  EXPECT_TRUE(engine.error().message.starts_with(
      "kv.dtype: int4 needs a head dimension that is a multiple of 32"))
      << engine.error().message;
}

}  // namespace
}  // namespace drift
