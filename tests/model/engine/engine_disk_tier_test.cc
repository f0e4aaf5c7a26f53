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

#include "engine/engine.h"
#include "runtime/load_engine.h"
#include "test_models.h"

namespace drift {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  fs::path path;
  TempDir() {
    char pattern[] = "/tmp/drift-model-kv-tier-XXXXXX";
    path = mkdtemp(pattern);
  }
  ~TempDir() { fs::remove_all(path); }
};

// About 620 tokens (39 pages of 16) of text of its own per `topic`.
std::string document(const std::string& topic) {
  std::string text = "Notes on " + topic + ".\n";
  const char* lines[] = {
      "The first chapter describes how the work began and who took part in it.",
      "Several teams met every week to compare their measurements and plans.",
      "A later section lists the tools, the materials and what each one cost.",
      "The appendix gives the dates of every meeting and the decisions taken.",
      "Readers who want the details should start with the second chapter.",
  };
  for (int round = 0; round < 6; ++round)
    for (const char* line : lines)
      text += topic + " (" + std::to_string(round) + "): " + line + "\n";
  return text + "Summary of " + topic + ":";
}

struct Answer {
  std::vector<TokenId> tokens;
  std::vector<TokenLogprobs> logprobs;
};

Answer ask(Engine& engine, const std::string& prompt) {
  Request r;
  r.prompt = TextPrompt{prompt, true, false};
  r.max_tokens = 8;
  r.sampling.temperature = 0;
  r.sampling.ignore_eos = true;
  r.sampling.logprobs = 5;
  Answer answer;
  std::mutex mutex;
  std::condition_variable done;
  bool finished = false;
  RequestHandle handle = engine.submit(std::move(r), [&](TokenEvent e) {
    std::lock_guard lock(mutex);
    if (e.token) answer.tokens.push_back(*e.token);
    if (e.logprobs) answer.logprobs.push_back(*e.logprobs);
    if (e.finish) {
      EXPECT_EQ(e.finish->reason, FinishReason::kLength) << e.finish->message;
      finished = true;
      done.notify_one();
    }
  });
  std::unique_lock lock(mutex);
  done.wait(lock, [&] { return finished; });
  return answer;
}

void expect_same(const Answer& got, const Answer& want, const char* what) {
  EXPECT_EQ(got.tokens, want.tokens) << what;
  ASSERT_EQ(got.logprobs.size(), want.logprobs.size()) << what;
  for (size_t k = 0; k < want.logprobs.size(); ++k)
    EXPECT_EQ(std::memcmp(&got.logprobs[k], &want.logprobs[k], sizeof(TokenLogprobs)), 0)
        << what << ": logprobs of token " << k << " differ";
}

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

const KVDiskMetrics& disk(const EngineMetrics& m) {
  EXPECT_TRUE(m.kv_disk.has_value());
  static const KVDiskMetrics none;
  return m.kv_disk ? *m.kv_disk : none;
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
  for (const auto& folder : fs::directory_iterator(dir.path)) {
    if (!folder.is_directory()) continue;
    for (const auto& file : fs::directory_iterator(folder.path())) {
      std::fstream f(file.path(), std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(-100, std::ios::end);
      f.put('\x55');
    }
  }
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
