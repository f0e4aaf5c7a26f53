// The disk tier on SmolLM2: a long prompt asked again after its pages left RAM for the disk, and
// again after the engine restarted on the same directory, gets the same greedy tokens with
// bitwise the same top-5 logprobs as when it was computed, and the tier was hit (pages read back,
// tokens not prefilled again). A corrupt directory changes no answer either.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <vector>

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

// A pool of 48 pages of 16 tokens (`page_bytes` each: bf16's by default): one document and its
// answer fit, three do not.
EngineConfig config(const std::optional<fs::path>& dir, KVDtype dtype = KVDtype::kBF16,
                    uint64_t page_bytes = 368640) {
  EngineConfig c;
  c.threads = 1;
  c.max_model_len = 768;
  c.kv.dtype = dtype;
  c.kv.budget = KVMemoryBudget::of_bytes(uint64_t{48} * page_bytes);
  if (dir) c.kv.disk_dir = dir->string();
  c.kv.disk_gib = 1;
  return c;
}

std::unique_ptr<Engine> start(const std::optional<fs::path>& dir, KVDtype dtype = KVDtype::kBF16,
                              uint64_t page_bytes = 368640) {
  const auto path = test::model_path(test::kSmolLm2File);
  EXPECT_TRUE(test::model_available(path));
  auto engine = load_engine(path.string(), config(dir, dtype, page_bytes));
  EXPECT_TRUE(engine.ok()) << (engine.ok() ? "" : engine.error().message);
  return engine.ok() ? std::move(engine).value() : nullptr;
}

TEST(EngineDiskTier, ALongPromptReadBackFromDiskAnswersBitForBitAsComputed) {
  const std::string doc = document("the harbour bridge");
  const std::string other1 = document("a mountain railway");
  const std::string other2 = document("the river dams");

  // Without a tier: computed, then answered from RAM's prefix cache.
  Answer computed, from_ram;
  {
    auto engine = start(std::nullopt);
    ASSERT_TRUE(engine);
    ASSERT_EQ(engine->setup().num_kv_pages, 48);
    computed = ask(*engine, doc);
    from_ram = ask(*engine, doc);
    EXPECT_GT(engine->metrics().prefix_cache.hit_tokens, 300u);
  }
  expect_same(from_ram, computed, "a prefix hit in RAM");

  TempDir dir;
  {
    auto engine = start(dir.path);
    ASSERT_TRUE(engine);
    expect_same(ask(*engine, doc), computed, "with the tier, computed");
    ask(*engine, other1);  // the document's pages leave RAM for the disk
    ask(*engine, other2);
    const EngineMetrics before = engine->metrics();
    EXPECT_GE(disk(before).tier.pages_spilled, 20u);
    // A step's evictions beyond the store's staging slots were dropped, the chain's first pages
    // among them (the pool frees a sequence's last page first); pages written ahead are not.
    EXPECT_EQ(disk(before).store.writes_dropped, 0u);
    const Answer read_back = ask(*engine, doc);
    expect_same(read_back, computed, "read back from disk");
    const EngineMetrics after = engine->metrics();
    EXPECT_GE(disk(after).tier.pages_loaded - disk(before).tier.pages_loaded, 20u);
    EXPECT_EQ(disk(after).tier.pages_load_failed, 0u);
    EXPECT_GE(after.prefix_cache.hit_tokens - before.prefix_cache.hit_tokens, 320u);
    EXPECT_GT(disk(after).store.bytes_read, 0u);
  }
  {
    auto engine = start(dir.path);  // a restart: RAM is empty, the directory is not
    ASSERT_TRUE(engine);
    EXPECT_GE(disk(engine->metrics()).store.pages_indexed_at_start, 20u);
    expect_same(ask(*engine, doc), computed, "after a restart");
    const EngineMetrics m = engine->metrics();
    EXPECT_GE(disk(m).tier.pages_loaded, 20u);
    EXPECT_GE(m.prefix_cache.hit_tokens, 320u);
  }
  // Every page file damaged: the answer is computed again, the same.
  test::damage_every_page_file(dir.path);
  {
    auto engine = start(dir.path);
    ASSERT_TRUE(engine);
    expect_same(ask(*engine, doc), computed, "over a corrupt directory");
    EXPECT_EQ(disk(engine->metrics()).tier.pages_loaded, 0u);
    EXPECT_GE(disk(engine->metrics()).store.read_failures, 1u);
  }
}

// Quantized pages (--kv-cache-dtype int8, int4) keep their scales inside the page
// (kernels/kv_format.h), so the page's bytes are all a read back needs: the answer from disk is
// bitwise the computed one, and the files are the quantized pages, smaller than bf16's.
class EngineDiskTierQuantized : public ::testing::TestWithParam<KVDtype> {};

TEST_P(EngineDiskTierQuantized, PagesReadBackBitForBit) {
  const KVDtype dtype = GetParam();
  const std::string doc = document("the harbour bridge");
  Answer computed;
  uint64_t page_bytes = 0;
  {
    auto engine = start(std::nullopt, dtype);
    ASSERT_TRUE(engine);
    computed = ask(*engine, doc);
    page_bytes = engine->metrics().kv_page_bytes;
  }
  ASSERT_GT(page_bytes, 0u);
  EXPECT_LT(page_bytes, 368640u) << "a quantized page is smaller than a bf16 one";
  TempDir dir;
  auto engine = start(dir.path, dtype, page_bytes);
  ASSERT_TRUE(engine);
  ASSERT_EQ(engine->setup().num_kv_pages, 48);
  expect_same(ask(*engine, doc), computed, "with the tier, computed");
  ask(*engine, document("a mountain railway"));  // the document's pages leave RAM for the disk
  ask(*engine, document("the river dams"));
  const EngineMetrics before = engine->metrics();
  expect_same(ask(*engine, doc), computed, "read back from disk");
  const EngineMetrics after = engine->metrics();
  EXPECT_GE(disk(after).tier.pages_loaded - disk(before).tier.pages_loaded, 20u);
  EXPECT_EQ(disk(after).tier.pages_load_failed, 0u);
  EXPECT_EQ(disk(after).store.bytes_read, page_bytes * (disk(after).store.pages_read))
      << "a read is one page's bytes";
}

INSTANTIATE_TEST_SUITE_P(Dtypes, EngineDiskTierQuantized,
                         ::testing::Values(KVDtype::kInt8, KVDtype::kInt4), [](const auto& info) {
                           return info.param == KVDtype::kInt8 ? "int8" : "int4";
                         });

TEST(EngineDiskTier, ASecondEngineOnTheDirectoryIsRefused) {
  TempDir dir;
  auto first = start(dir.path);
  ASSERT_TRUE(first);
  const auto path = test::model_path(test::kSmolLm2File);
  auto second = load_engine(path.string(), config(dir.path));
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.error().message.find("in use by another drift process"), std::string::npos)
      << second.error().message;
}

}  // namespace
}  // namespace drift
