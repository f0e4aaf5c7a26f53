// The disk tier on Gemma 3 with its default hybrid KV (one full-attention group, five sliding
// groups over 512 positions, whose pages leave the pool as they leave the window): a ~600-token
// document asked again after its page rows left RAM for the disk, and again after a restart on the
// same directory, gets the same greedy tokens with bitwise the same top-5 logprobs as when it was
// computed without a tier, and the tier was hit (its group-0 rows and its last window's sliding
// pages read back). A damaged directory changes no answer either.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "disk_tier_runs.h"
#include "engine/engine.h"
#include "runtime/load_engine.h"
#include "test_models.h"

namespace drift {
namespace {

using test::Answer;
using test::ask;
using test::disk;
using test::document;
using test::expect_same;
using test::TempDir;
namespace fs = std::filesystem;

// 300 pages of 16 tokens of 3 layers: one document's rows (every group's pages of its ~40 rows
// while it runs) fit, three documents' do not.
constexpr int64_t kPoolPages = 300;

std::unique_ptr<Engine> start(const std::optional<fs::path>& dir, uint64_t page_bytes) {
  const auto path = test::model_path(test::kGemma3File);
  EXPECT_TRUE(test::model_available(path));
  EngineConfig c;
  c.threads = 2;
  c.max_model_len = 768;
  c.kv.budget = KVMemoryBudget::of_bytes(uint64_t(kPoolPages) * page_bytes);
  if (dir) c.kv.disk_dir = dir->string();
  c.kv.disk_gib = 1;
  auto engine = load_engine(path.string(), c);
  EXPECT_TRUE(engine.ok()) << (engine.ok() ? "" : engine.error().message);
  if (!engine.ok()) return nullptr;
  EXPECT_EQ((*engine)->setup().kv_layout.num_groups(), 6) << "hybrid KV by default";
  return std::move(engine).value();
}

TEST(EngineDiskTierHybrid, GemmaReadsItsRowsBackFromDiskBitForBitAsComputed) {
  const std::string doc = document("the harbour bridge");
  // Computed without a tier (hybrid KV, as the tier runs), to learn the page size too.
  Answer computed;
  uint64_t page_bytes = 0;
  {
    auto engine = start(std::nullopt, 49152);
    ASSERT_TRUE(engine);
    computed = ask(*engine, doc);
    page_bytes = engine->metrics().kv_page_bytes;
  }
  ASSERT_GT(page_bytes, 0u);

  TempDir dir;
  {
    auto engine = start(dir.path, page_bytes);
    ASSERT_TRUE(engine);
    ASSERT_EQ(engine->setup().num_kv_pages, kPoolPages);
    expect_same(ask(*engine, doc), computed, "with the tier, computed");
    ask(*engine, document("a mountain railway"));  // the document's rows leave RAM for the disk
    ask(*engine, document("the river dams"));
    const EngineMetrics before = engine->metrics();
    EXPECT_GE(disk(before).tier.pages_spilled, 60u);
    EXPECT_EQ(disk(before).store.writes_dropped, 0u);
    const Answer read_back = ask(*engine, doc);
    expect_same(read_back, computed, "read back from disk");
    const EngineMetrics after = engine->metrics();
    // More pages than rows: the sliding groups' window pages came back with group 0's.
    const uint64_t hit_rows = (after.prefix_cache.hit_tokens - before.prefix_cache.hit_tokens) / 16;
    EXPECT_GE(hit_rows, 20u);
    EXPECT_GT(disk(after).tier.pages_loaded - disk(before).tier.pages_loaded, hit_rows);
    EXPECT_EQ(disk(after).tier.pages_load_failed, 0u);
  }
  {
    auto engine = start(dir.path, page_bytes);  // a restart: RAM is empty, the directory is not
    ASSERT_TRUE(engine);
    EXPECT_GE(disk(engine->metrics()).store.pages_indexed_at_start, 60u);
    expect_same(ask(*engine, doc), computed, "after a restart");
    const EngineMetrics m = engine->metrics();
    EXPECT_GE(m.prefix_cache.hit_tokens, 320u);
    EXPECT_GT(disk(m).tier.pages_loaded, m.prefix_cache.hit_tokens / 16);
  }
  // Every page file damaged: the answer is computed again, the same.
  test::damage_every_page_file(dir.path);
  {
    auto engine = start(dir.path, page_bytes);
    ASSERT_TRUE(engine);
    expect_same(ask(*engine, doc), computed, "over a corrupt directory");
    EXPECT_EQ(engine->metrics().prefix_cache.hit_tokens, 0u);
    EXPECT_GE(disk(engine->metrics()).store.read_failures, 1u);
  }
}

}  // namespace
}  // namespace drift
