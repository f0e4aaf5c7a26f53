// Tiered preemption on SmolLM2 (scheduler/preemption_cost.h): two greedy requests that together
// need more KV pages than a tiny pool holds, so the later one is preempted mid-decode. Swapped to
// the disk tier (its partial last page too), recomputed, or as the cost model chooses, each
// answers with the tokens it gives alone, and the choice shows in the metrics.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <string>
#include <vector>

#include "disk_tier_runs.h"
#include "engine/engine.h"
#include "runtime/load_engine.h"
#include "test_models.h"

namespace drift {
namespace {

namespace fs = std::filesystem;
using test::TempDir;

// The first (admitted first, so never the victim) is the longer by less than a page: it crosses
// each page boundary first, so when the pool runs out it preempts the second mid-page, leaving a
// partial last page to swap.
const char* const kPrompts[] = {
    "Explain to a child how rain forms, step by step, with an example from everyday life, and "
    "say why it matters.",
    "Write a short story about a lighthouse keeper who finds a message in a bottle.",
};
constexpr int32_t kMaxTokens = 100;

// Runs every prompt at once (greedy, to its token limit); returns each one's tokens.
std::vector<std::vector<TokenId>> ask_together(Engine& engine,
                                               std::span<const char* const> prompts) {
  std::vector<std::vector<TokenId>> tokens(prompts.size());
  std::mutex mutex;
  std::condition_variable done;
  size_t finished = 0;
  std::vector<RequestHandle> handles;
  for (size_t i = 0; i < prompts.size(); ++i) {
    Request r;
    r.prompt = TextPrompt{prompts[i], true, false};
    r.max_tokens = kMaxTokens;
    r.sampling.temperature = 0;
    r.sampling.ignore_eos = true;
    handles.push_back(engine.submit(std::move(r), [&, i](TokenEvent e) {
      std::lock_guard lock(mutex);
      if (e.token) tokens[i].push_back(*e.token);
      if (e.finish) {
        EXPECT_EQ(e.finish->reason, FinishReason::kLength) << e.finish->message;
        ++finished;
        done.notify_one();
      }
    }));
  }
  std::unique_lock lock(mutex);
  done.wait(lock, [&] { return finished == prompts.size(); });
  return tokens;
}

// 10 pages of 16 tokens: each request (18 or 24 prompt tokens + 100) takes 8, both together 16.
std::unique_ptr<Engine> start(const std::optional<fs::path>& dir, PreemptionPolicy policy) {
  EngineConfig c;
  c.threads = 1;
  c.max_model_len = 192;
  c.kv.budget = KVMemoryBudget::of_bytes(uint64_t{10} * 368640);
  c.scheduler.admission = AdmissionMode::kOptimistic;
  c.scheduler.preemption = policy;
  if (dir) c.kv.disk_dir = dir->string();
  c.kv.disk_gib = 1;
  const auto path = test::model_path(test::kSmolLm2File);
  EXPECT_TRUE(test::model_available(path));
  auto engine = load_engine(path.string(), c);
  EXPECT_TRUE(engine.ok()) << (engine.ok() ? "" : engine.error().message);
  return engine.ok() ? std::move(engine).value() : nullptr;
}

TEST(EngineSwapPreemption, APreemptedRequestAnswersAsAloneSwappedOrRecomputed) {
  std::vector<std::vector<TokenId>> alone;
  {
    auto engine = start(std::nullopt, PreemptionPolicy::kRecompute);
    ASSERT_TRUE(engine);
    ASSERT_EQ(engine->setup().num_kv_pages, 10);
    for (const char* prompt : kPrompts) alone.push_back(ask_together(*engine, {&prompt, 1})[0]);
    EXPECT_EQ(engine->metrics().preemptions, 0u) << "one at a time fits";
  }
  for (PreemptionPolicy policy :
       {PreemptionPolicy::kSwap, PreemptionPolicy::kRecompute, PreemptionPolicy::kAuto}) {
    SCOPED_TRACE(std::string(preemption_policy_name(policy)));
    TempDir dir;
    auto engine = start(dir.path, policy);
    ASSERT_TRUE(engine);
    EXPECT_EQ(ask_together(*engine, kPrompts), alone);
    const EngineMetrics m = engine->metrics();
    ASSERT_GE(m.preemptions, 1u);
    ASSERT_TRUE(m.kv_disk.has_value());
    const PreemptionMetrics& p = m.kv_disk->preemption;
    EXPECT_EQ(p.swapped + p.recomputed, m.preemptions);
    // The engine's step cost model priced recomputing (auto's choice depends on the machine).
    EXPECT_GT(p.predicted_recompute_seconds, 0);
    if (policy == PreemptionPolicy::kSwap) {
      EXPECT_EQ(p.swapped, m.preemptions);
      EXPECT_GT(m.kv_disk->tier.pages_swapped_out, 0u);
      EXPECT_GT(p.predicted_swap_seconds, 0);
      EXPECT_EQ(m.kv_disk->tier.pages_load_failed, 0u);
      // Preempted mid-page: its partial last page was read back, not recomputed.
      EXPECT_EQ(p.tails_restored, p.swapped);
    } else if (policy == PreemptionPolicy::kRecompute) {
      EXPECT_EQ(p.recomputed, m.preemptions);
      EXPECT_EQ(m.kv_disk->tier.swaps, 0u);
    }
  }
}

}  // namespace
}  // namespace drift
