// The disk tier through the engine over the fake executor: a prompt whose pages were evicted to
// disk is answered after they are read back on the store's thread while the worker sleeps (a
// finished read wakes it), the counters reach Engine::metrics(), and the cached pages still in
// RAM at shutdown are written back for the next engine on the directory.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>

#include "engine/engine.h"
#include "engine_fakes.h"

namespace drift {
namespace {

using namespace testing;
namespace fs = std::filesystem;

struct TempDir {
  fs::path path;
  TempDir() {
    char pattern[] = "/tmp/drift-engine-kv-tier-XXXXXX";
    path = mkdtemp(pattern);
  }
  ~TempDir() { fs::remove_all(path); }
};

EngineConfig tier_config(const fs::path& dir) {
  EngineConfig c = small_config(16);
  c.kv.disk_dir = dir.string();
  c.kv.disk_gib = 0.01;
  return c;
}

Completion run(Engine& engine, const Request& r) {
  RequestHandle h = engine.submit(r);
  return finish_within(h);
}

TEST(EngineDiskTier, EvictedPagesAreReadBackAndTheSleepingWorkerWakesForThem) {
  TempDir dir;
  FakeModel model;
  FakeEngine fake = make_fake_engine(tier_config(dir.path), model);
  ASSERT_TRUE(fake.engine);
  const Request first = token_request(1, 30, 4);
  const auto& prompt = std::get<std::vector<TokenId>>(first.prompt);
  ASSERT_EQ(run(*fake.engine, first).tokens, model.reference(1, prompt, 4));
  run(*fake.engine, token_request(2, 30, 4));  // 16 pages of 4: the first prompt's pages go
  run(*fake.engine, token_request(3, 30, 4));
  Request again = first;
  again.id = 4;
  const Completion c = run(*fake.engine, again);
  EXPECT_EQ(c.tokens, model.reference(4, prompt, 4));
  const EngineMetrics m = fake.engine->metrics();
  ASSERT_TRUE(m.kv_disk.has_value());
  EXPECT_GE(m.kv_disk->tier.pages_spilled, 7u);
  EXPECT_EQ(m.kv_disk->tier.pages_loaded, 7u) << "(30 - 1) / 4 pages";
  EXPECT_GE(m.kv_disk->admission_waits, 1u);
  EXPECT_EQ(m.kv_disk->loads_in_flight, 0);
  EXPECT_GT(m.kv_disk->store.bytes_read, 0u);
}

TEST(EngineDiskTier, CachedPagesAreWrittenBackAtShutdownForTheNextEngine) {
  TempDir dir;
  FakeModel model;
  const Request first = token_request(1, 30, 4);
  {
    FakeEngine fake = make_fake_engine(tier_config(dir.path), model);
    ASSERT_TRUE(fake.engine);
    run(*fake.engine, first);
    ASSERT_TRUE(fake.engine->metrics().kv_disk.has_value());
    EXPECT_EQ(fake.engine->metrics().kv_disk->tier.pages_spilled, 0u) << "all still in RAM";
  }
  FakeEngine fake = make_fake_engine(tier_config(dir.path), model);
  ASSERT_TRUE(fake.engine);
  ASSERT_TRUE(fake.engine->metrics().kv_disk.has_value()) << "published before the first step";
  EXPECT_EQ(fake.engine->metrics().kv_disk->store.pages_indexed_at_start, 8u)
      << "30 prompt tokens and 3 generated ones fed back fill 8 pages";
  Request again = first;
  again.id = 2;
  EXPECT_EQ(run(*fake.engine, again).tokens,
            model.reference(2, std::get<std::vector<TokenId>>(first.prompt), 4));
  EXPECT_EQ(fake.engine->metrics().kv_disk->tier.pages_loaded, 7u);
}

TEST(EngineDiskTier, ASecondEngineOnTheDirectoryIsRefused) {
  TempDir dir;
  FakeEngine first = make_fake_engine(tier_config(dir.path));
  ASSERT_TRUE(first.engine);
  auto factory = [](const EngineSetup& setup) -> Expected<std::unique_ptr<Executor>> {
    return std::unique_ptr<Executor>(
        std::make_unique<FakeExecutor>(setup, FakeModel{}, FakeHooks{}));
  };
  auto second = Engine::create(tier_config(dir.path), fake_model_facts(),
                               std::make_shared<FakeCodec>(), factory);
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.error().message.find("in use by another drift process"), std::string::npos)
      << second.error().message;
}

}  // namespace
}  // namespace drift

namespace drift {
namespace {

Request session_turn(RequestId id, const std::string& session, std::vector<TokenId> input) {
  Request r;
  r.id = id;
  r.prompt = std::move(input);
  r.max_tokens = 3;
  r.session_id = session;
  return r;
}

TEST(EngineDiskTier, ASessionContinuesAfterARestartWithItsPrefixReadFromDisk) {
  TempDir dir;
  const std::vector<TokenId> first_input = fake_prompt(1, 26);
  std::vector<TokenId> history;
  {
    FakeEngine fake = make_fake_engine(tier_config(dir.path));
    ASSERT_TRUE(fake.engine);
    ASSERT_EQ(run(*fake.engine, session_turn(1, "chat", first_input)).finish.reason,
              FinishReason::kLength);
    history = fake.engine->session_history("chat").value();
    ASSERT_EQ(history.size(), first_input.size() + 3);
  }
  FakeEngine fake = make_fake_engine(tier_config(dir.path));
  ASSERT_TRUE(fake.engine);
  EXPECT_EQ(fake.engine->session_history("chat"), history) << "the history came back";
  const Completion c = run(*fake.engine, session_turn(2, "chat", {7, 8, 9}));
  ASSERT_EQ(c.finish.reason, FinishReason::kLength) << c.finish.message;
  std::vector<TokenId> prompt = history;
  prompt.insert(prompt.end(), {7, 8, 9});
  EXPECT_EQ(c.tokens, FakeModel{}.reference(2, prompt, 3));
  EXPECT_EQ(fake.engine->metrics().kv_disk->tier.pages_loaded, 7u)
      << "the 29 tokens of history fill 7 pages, read back";
}

TEST(EngineDiskTier, ADamagedSessionsFileIsIgnoredNotHalfRead) {
  TempDir dir;
  std::string folder;
  {
    FakeEngine fake = make_fake_engine(tier_config(dir.path));
    ASSERT_TRUE(fake.engine);
    run(*fake.engine, session_turn(1, "chat", fake_prompt(1, 10)));
  }
  for (const auto& entry : fs::directory_iterator(dir.path))
    if (entry.is_directory()) folder = entry.path().string();
  ASSERT_TRUE(fs::exists(folder + "/sessions"));
  fs::resize_file(folder + "/sessions", fs::file_size(folder + "/sessions") - 3);
  FakeEngine fake = make_fake_engine(tier_config(dir.path));
  ASSERT_TRUE(fake.engine);
  EXPECT_FALSE(fake.engine->session_history("chat").has_value());
}

}  // namespace
}  // namespace drift
