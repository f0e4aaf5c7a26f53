// The live view's snapshots: taken at step boundaries while someone reads them, always when the
// engine goes idle, and consistent with the KV cache and the metrics they sit beside.
#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

#include "engine/engine.h"
#include "engine/snapshot_board.h"
#include "engine_fakes.h"

namespace drift {
namespace {

using namespace testing;
using std::chrono::milliseconds;

int64_t count_marks(const EngineSnapshot& s, PageMark mark) {
  return std::count(s.page_map.begin(), s.page_map.end(), char(mark));
}

TEST(SnapshotBoard, DueOnlyWhileReadOrWhenIdle) {
  SnapshotBoard board;
  const auto now = SnapshotBoard::Clock::now();
  EXPECT_FALSE(board.due(now, /*idle=*/false)) << "nobody reads: no snapshot mid-run";
  EXPECT_TRUE(board.due(now, /*idle=*/true));
  EXPECT_EQ(board.read().version, 0u);  // a reader asks for snapshots from now on
  EXPECT_TRUE(board.due(SnapshotBoard::Clock::now(), false));
  EngineSnapshot filled;
  filled.steps = 7;
  ASSERT_TRUE(board.try_publish(filled, now));
  EXPECT_EQ(filled.version, 0u) << "the worker gets the older snapshot back, to refill";
  EXPECT_FALSE(board.due(now + milliseconds(10), false)) << "at most one per interval";
  EXPECT_TRUE(board.due(now + SnapshotBoard::kInterval, false));
  EXPECT_FALSE(board.due(now + SnapshotBoard::kInterest + milliseconds(500), false))
      << "interest lapses when nobody reads";
  const EngineSnapshot read = board.read();
  EXPECT_EQ(read.version, 1u);
  EXPECT_EQ(read.steps, 7u);
}

TEST(EngineSnapshot, IdleEngineMatchesItsMetrics) {
  FakeEngine fake = make_fake_engine(small_config(/*kv_pages=*/64));
  const EngineSnapshot first = fake.engine->snapshot();
  EXPECT_GE(first.version, 1u) << "published when the worker started";
  EXPECT_EQ(first.page_map, std::string(64, 'f'));
  std::vector<RequestHandle> handles;
  for (RequestId id = 1; id <= 3; ++id)
    handles.push_back(fake.engine->submit(token_request(id, 9, 6)));
  for (RequestHandle& h : handles) EXPECT_EQ(finish_within(h).finish.reason, FinishReason::kLength);
  // The last boundary (idle) published a snapshot before the events went out.
  const EngineSnapshot s = fake.engine->snapshot();
  const EngineMetrics m = fake.engine->metrics();
  EXPECT_TRUE(s.sequences.empty());
  EXPECT_EQ(s.steps, m.steps);
  ASSERT_EQ(s.page_map.size(), 64u);
  EXPECT_EQ(count_marks(s, PageMark::kUsed) + count_marks(s, PageMark::kShared), 0);
  EXPECT_EQ(count_marks(s, PageMark::kCached), m.kv_pages_cached);
  EXPECT_EQ(count_marks(s, PageMark::kFree), m.kv_pages_free);
  // Fewer steps than the history holds: every step is there, oldest first.
  ASSERT_EQ(s.recent_steps.size(), m.steps);
  uint64_t prefill = 0, decode = 0;
  for (size_t i = 0; i < s.recent_steps.size(); ++i) {
    EXPECT_EQ(s.recent_steps[i].step, i + 1);
    prefill += uint64_t(s.recent_steps[i].prefill_tokens);
    decode += uint64_t(s.recent_steps[i].decode_tokens);
  }
  EXPECT_EQ(prefill, m.prefill_tokens_total);
  EXPECT_EQ(decode, m.decode_tokens_total);
  EXPECT_EQ(prefill, 3u * 9u);
}

TEST(EngineSnapshot, ShowsRunningRequestsAndTheirPages) {
  // Request 2 arrives while the engine holds request 1's first step, so that every boundary from
  // then on has both; the view is paused once both decode. Each step takes 30 ms, so some of
  // those boundaries are an interval apart and publish.
  StepGate first([](const StepPlan& plan) { return plan_has(plan, 1); });
  StepGate both_decoding([](const StepPlan& plan) {
    return plan_has(plan, 1, StepItemKind::kDecode, 16) && plan_has(plan, 2, StepItemKind::kDecode);
  });
  FakeHooks hooks;
  hooks.before_step = [&](const StepPlan& plan) {
    first.on_step(plan);
    std::this_thread::sleep_for(milliseconds(30));
    both_decoding.on_step(plan);
  };
  FakeEngine fake = make_fake_engine(small_config(/*kv_pages=*/64), {}, hooks);
  (void)fake.engine->snapshot();  // the view is open
  RequestHandle a = fake.engine->submit(token_request(1, 10, 40));
  ASSERT_TRUE(first.wait_paused());
  RequestHandle b = fake.engine->submit(token_request(2, 6, 40));
  first.open();
  ASSERT_TRUE(both_decoding.wait_paused());
  const EngineSnapshot s = fake.engine->snapshot();
  both_decoding.open();
  ASSERT_EQ(s.sequences.size(), 2u) << "a snapshot from a boundary while both ran";
  int64_t pages = 0;
  for (const SequenceView& v : s.sequences) {
    EXPECT_EQ(v.phase, SequencePhase::kDecode);
    EXPECT_EQ(v.prefilled_tokens, v.prompt_tokens);
    EXPECT_EQ(v.max_new_tokens, 40);
    EXPECT_GE(v.generated_tokens, 1);
    // K/V for the prompt and every generated token but the last (not fed back yet), 4 a page.
    EXPECT_EQ(v.pages, (v.prompt_tokens + v.generated_tokens - 1 + 3) / 4) << v.id;
    pages += v.pages;
  }
  EXPECT_EQ(s.sequences[0].prompt_tokens + s.sequences[1].prompt_tokens, 16);
  EXPECT_EQ(count_marks(s, PageMark::kUsed), pages) << "distinct prompts share no page";
  EXPECT_FALSE(s.recent_steps.empty());
  EXPECT_EQ(s.recent_steps.back().step, s.steps);
  a.cancel();
  b.cancel();
  finish_within(a);
  finish_within(b);
}

}  // namespace
}  // namespace drift
