// A scheduler over a prefix cache with a disk tier on a temporary directory, driven over the
// fake executor whose pages are its shadow slots (fake_executor.h): a page read back from disk
// must hold exactly what the reader's own history computes, or the fake's read check fails.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <vector>

#include "fake_executor.h"
#include "kv/kv_disk_store.h"
#include "kv/prefix_disk_tier.h"
#include "scheduler/engine_scheduler.h"

namespace drift::testing {

namespace fs = std::filesystem;

inline constexpr int32_t kPageSize = 4;
inline constexpr int32_t kPages = 16;

struct TempDir {
  fs::path path;
  TempDir() {
    char pattern[] = "/tmp/drift-kv-tier-XXXXXX";
    path = mkdtemp(pattern);
  }
  ~TempDir() { fs::remove_all(path); }
};

inline SchedulerConfig config() {
  SchedulerConfig c;
  c.max_num_batched_tokens = 16;
  c.max_num_seqs = 2;
  c.max_model_len = 48;
  return c;
}

// The pieces of an engine in the order they depend on each other: KV pool, prefix cache,
// executor (the page memory), store, tier, scheduler. One instance is one process's life.
// `groups`: the KV groups' windows (empty: one group), over `num_pages` pages.
class TieredDriver {
 public:
  TieredDriver(const fs::path& dir, KVDigest fingerprint = {11, 22}, uint64_t budget = 1 << 20,
               int32_t staging_pages = 16, const SchedulerConfig& scheduler_config = config(),
               std::vector<KVGroup> groups = {}, int32_t num_pages = kPages)
      : kv_(make_kv(std::move(groups), num_pages)), prefix_(kv_), executor_(kv_, FakeModel{}) {
    KVDiskStoreConfig c;
    c.dir = dir.string();
    c.budget_bytes = budget;
    c.fingerprint = fingerprint;
    c.page_size = kPageSize;
    c.page_bytes = executor_.page_bytes();
    c.staging_pages = staging_pages;
    auto store = KVDiskStore::open(c);
    EXPECT_TRUE(store.ok()) << (store.ok() ? "" : store.error().message);
    store_ = std::move(store).value();
    auto tier = PrefixDiskTier::create(kv_, prefix_, *store_, executor_);
    EXPECT_TRUE(tier.ok()) << (tier.ok() ? "" : tier.error().message);
    tier_ = std::move(tier).value();
    auto scheduler =
        EngineScheduler::create(scheduler_config, {0}, kv_, log_, &prefix_, tier_.get());
    EXPECT_TRUE(scheduler.ok());
    scheduler_ = std::move(scheduler).value();
  }

  // Runs `prompt` as request `id` to its end alone; returns its tokens.
  std::vector<TokenId> ask(SeqId id, const std::vector<TokenId>& prompt, int32_t max_new = 3) {
    SequenceRequest r;
    r.id = id;
    r.prompt = prompt;
    r.max_new_tokens = max_new;
    scheduler_->add(admitted(std::move(r)));
    std::vector<TokenId> out;
    for (int i = 0; i < 1000 && scheduler_->has_unfinished(); ++i) {
      store_->drain();  // deterministic: every read has finished before the next step
      const StepPlan& plan = scheduler_->schedule_step();
      if (!plan.empty()) {
        EXPECT_TRUE(executor_.run(plan, result_).ok());
        for (const SequenceOutcome& o : scheduler_->on_step_executed(result_))
          if (o.token) out.push_back(*o.token);
      }
      Status s = scheduler_->check_invariants();
      EXPECT_TRUE(s.ok()) << s.message();
    }
    EXPECT_FALSE(scheduler_->has_unfinished());
    return out;
  }

  // Runs `requests` together to their ends; returns each one's tokens by id.
  std::map<SeqId, std::vector<TokenId>> run_together(std::vector<SequenceRequest> requests) {
    for (SequenceRequest& r : requests) scheduler_->add(admitted(std::move(r)));
    for (int i = 0; i < 1000 && scheduler_->has_unfinished(); ++i) step();
    EXPECT_FALSE(scheduler_->has_unfinished());
    return std::move(generated_);
  }
  // One step of the worker loop (after every read has finished), its tokens kept by id; the
  // scheduler's invariants checked after it unless the test holds pages of its own in the pool.
  void step(bool check_invariants = true) {
    store_->drain();  // deterministic: every read has finished before the next step
    const StepPlan& plan = scheduler_->schedule_step();
    if (!plan.empty()) {
      EXPECT_TRUE(executor_.run(plan, result_).ok());
      for (const SequenceOutcome& o : scheduler_->on_step_executed(result_))
        if (o.token) generated_[o.id].push_back(*o.token);
      if (step_seconds_ > 0) scheduler_->observe_step_seconds(step_seconds_);
    }
    if (!check_invariants) return;
    Status s = scheduler_->check_invariants();
    EXPECT_TRUE(s.ok()) << s.message();
  }

  std::vector<TokenId> reference(SeqId id, const std::vector<TokenId>& prompt,
                                 int32_t max_new = 3) {
    return FakeModel{}.reference(id, prompt, max_new);
  }

  KVCacheManager& kv() { return kv_; }
  PrefixCache& prefix() { return prefix_; }
  PrefixDiskTier& tier() { return *tier_; }
  KVDiskStore& store() { return *store_; }
  EngineScheduler& scheduler() { return *scheduler_; }
  // The wall time step() (and so run_together) reports for each step it runs; 0: none.
  void set_step_seconds(double seconds) { step_seconds_ = seconds; }
  // The tokens step() has seen request `id` generate.
  const std::vector<TokenId>& generated(SeqId id) { return generated_[id]; }

 private:
  static KVCacheManager make_kv(std::vector<KVGroup> groups, int32_t num_pages) {
    KVLayout layout{.num_layers = 2, .num_kv_heads = 2, .head_dim = 8, .page_size = kPageSize};
    layout.groups = std::move(groups);
    return std::move(KVCacheManager::create(layout, num_pages)).value();
  }

  KVCacheManager kv_;
  ProgressLog log_;
  PrefixCache prefix_;
  FakeExecutor executor_;
  std::unique_ptr<KVDiskStore> store_;
  std::unique_ptr<PrefixDiskTier> tier_;
  std::unique_ptr<EngineScheduler> scheduler_;
  ExecutionResult result_;
  std::map<SeqId, std::vector<TokenId>> generated_;  // run_together's and step's tokens
  double step_seconds_ = 0;
};

// Flips a bit of the last byte of a page file's K/V (its payload checksum then fails).
inline void flip_last_byte(const fs::path& file) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(-1, std::ios::end);
  const char c = char(f.get());
  f.seekp(-1, std::ios::end);
  f.put(char(c ^ 0x40));
}

inline std::vector<TokenId> prompt_of(int n, TokenId first) {
  std::vector<TokenId> p;
  for (int i = 0; i < n; ++i) p.push_back(first + i);
  return p;
}

}  // namespace drift::testing
