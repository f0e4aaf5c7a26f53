// After warm-up, the scheduler's side of a decode step — schedule_step and on_step_executed —
// performs no heap allocation. Proved with a counting global operator new in this test binary.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <new>

#include "counting_allocator.h"
#include "fake_executor.h"
#include "scheduler/engine_scheduler.h"

namespace drift {
namespace {

using testing::FakeExecutor;
using testing::FakeModel;
using testing::make_request;

// Counts allocations made by `f`.
template <typename F>
uint64_t allocations_in(F&& f) {
  uint64_t before = g_allocations.load();
  g_counting.store(true);
  f();
  g_counting.store(false);
  return g_allocations.load() - before;
}

TEST(NoAllocation, CountingAllocatorSeesAllocations) {
  uint64_t n = allocations_in([] {
    auto* v = new std::vector<int>(100);
    escape(v);
    escape(v->data());
    delete v;
  });
  EXPECT_EQ(n, 2u);
}

// With the prefix cache, decode steps that fill a page register it, and finishing sequences
// leave their pages cached: neither may allocate.
// With sliding-window KV groups, decode steps also free the pages that leave the window.
void steady_decode_allocates_nothing(AdmissionMode mode, bool prefix_caching,
                                     std::vector<KVGroup> groups = {}) {
  SCOPED_TRACE(std::string(admission_mode_name(mode)) + (prefix_caching ? " + prefix cache" : "") +
               (groups.empty() ? "" : " + sliding groups"));
  SchedulerConfig c;
  c.admission = mode;
  c.max_num_seqs = 16;
  c.max_num_batched_tokens = 256;
  c.max_model_len = 512;
  KVLayout layout{2, 2, 8, 4};
  layout.groups = groups;
  auto kv = KVCacheManager::create(layout, 1024 * layout.num_groups());
  ASSERT_TRUE(kv.ok());
  ProgressLog log;
  std::unique_ptr<PrefixCache> cache =
      prefix_caching ? std::make_unique<PrefixCache>(*kv) : nullptr;
  auto scheduler = EngineScheduler::create(c, {0}, *kv, log, cache.get());
  ASSERT_TRUE(scheduler.ok());
  EngineScheduler& s = **scheduler;
  FakeModel model;  // never samples EOS
  FakeExecutor executor(*kv, model);
  ExecutionResult result;
  // 16 sequences with different lengths, so that page boundaries are crossed and sequences
  // finish inside the measured window.
  for (SeqId id = 1; id <= 16; ++id)
    s.add(testing::admitted(make_request(id, 10 + int32_t(id), 60 + 2 * int32_t(id))));

  auto run_step = [&](uint64_t* counted) {
    const StepPlan* plan = nullptr;
    *counted += allocations_in([&] { plan = &s.schedule_step(); });
    if (plan->empty()) return;
    ASSERT_TRUE(executor.run(*plan, result).ok());
    std::span<const SequenceOutcome> outcomes;
    *counted += allocations_in([&] { outcomes = s.on_step_executed(result); });
    for (const SequenceOutcome& o : outcomes) EXPECT_NE(o.finish, FinishReason::kError);
  };

  // Warm-up: admission and prefill (these allocate: queues, page lists, map nodes).
  uint64_t warmup = 0;
  for (int i = 0; i < 4; ++i) run_step(&warmup);
  for (SeqId id = 1; id <= 16; ++id)
    ASSERT_EQ(s.find(id)->phase, SequencePhase::kDecode) << "warm-up should finish prefill";

  // Steady decode, until every sequence has finished (and released its pages).
  uint64_t steady = 0;
  int steps = 0;
  while (s.has_unfinished()) {
    run_step(&steady);
    ++steps;
    ASSERT_LT(steps, 1000);
  }
  EXPECT_EQ(steady, 0u) << "allocations in " << steps << " steady decode steps";
  EXPECT_GT(steps, 60);
  if (cache) {
    EXPECT_GT(cache->stats().pages_inserted, 16u * 10) << "decode steps must register pages";
    EXPECT_GT(kv->num_cached_pages(), 0);
    cache->flush();
  }
  EXPECT_EQ(kv->num_free_pages(), kv->num_pages());
  EXPECT_TRUE(s.check_invariants().ok());
}

TEST(NoAllocation, SteadyDecodeStepsAllocateNothingInGuaranteedMode) {
  steady_decode_allocates_nothing(AdmissionMode::kGuaranteed, false);
  steady_decode_allocates_nothing(AdmissionMode::kGuaranteed, true);
}

TEST(NoAllocation, SteadyDecodeStepsAllocateNothingInOptimisticMode) {
  steady_decode_allocates_nothing(AdmissionMode::kOptimistic, false);
  steady_decode_allocates_nothing(AdmissionMode::kOptimistic, true);
}

TEST(NoAllocation, SteadyDecodeStepsAllocateNothingWithSlidingWindowGroups) {
  for (AdmissionMode mode : {AdmissionMode::kGuaranteed, AdmissionMode::kOptimistic}) {
    steady_decode_allocates_nothing(mode, false, {{0}, {8}, {8}});
    steady_decode_allocates_nothing(mode, true, {{0}, {8}, {8}});
  }
}

}  // namespace
}  // namespace drift
