// KV-Compress in the scheduler, on the fake executor (whose attention is known): when compressions
// are planned, exactly which positions a sequence keeps, the pages it gives back, that pages
// shared with the prefix cache are never written nor a compressed sequence's pages registered, and
// that guaranteed admission runs more compressed sequences in the same pages. The fake executor
// checks every read of a compressed sequence against the positions its slots hold.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "fake_executor.h"
#include "scheduler/engine_scheduler.h"

namespace drift {
namespace {

using testing::Driver;
using testing::known_attention;
using testing::make_request;

SchedulerConfig config(KvEvictPolicy policy, double keep = 1.0) {
  SchedulerConfig c;
  c.max_num_batched_tokens = 8;  // prompts in chunks of 8
  c.max_num_seqs = 4;
  c.max_model_len = 64;
  c.kv_compress.keep = keep;
  c.kv_compress.policy = policy;
  c.kv_compress.min_tokens = 16;
  c.kv_compress.sink_tokens = 2;
  c.kv_compress.recent_tokens = 8;
  c.kv_compress.metric_window = 4;
  return c;
}

std::vector<int32_t> range(int32_t from, int32_t to) {  // [from, to)
  std::vector<int32_t> v(size_t(to - from));
  std::iota(v.begin(), v.end(), from);
  return v;
}
std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(KvCompressScheduler, WindowKeepsTheSinksAndTheMostRecentAfterEachStep) {
  Driver d(config(KvEvictPolicy::kWindow), 32, 4);
  SequenceRequest r = make_request(1, 40, 8);
  r.kv_keep = 0.5;
  d.submit(r);
  d.step();  // positions 0-7
  d.step();  // 8-15: 16 positions, not longer than min_tokens
  EXPECT_EQ(d.executor().kv_table(1), range(0, 16));
  StepPlan p = d.step();  // 16-23: 24 slots, target 12: compressed after the step
  ASSERT_EQ(p.kv_compressions, (std::vector<KvCompression>{{0, 24, 0, 12}}));
  EXPECT_EQ(d.executor().kv_table(1), concat({0, 1}, range(14, 24)));
  EXPECT_EQ(d.kv().pages(1).size(), 3u);  // 12 slots of 4
  EXPECT_EQ(d.scheduler().find(1)->kv_evicted, 12);
  p = d.step();  // 24-31: 20 slots, target 16
  EXPECT_EQ(p.items[0].kv_slots, 12);
  EXPECT_EQ(d.executor().kv_table(1), concat({0, 1}, range(18, 32)));
  p = d.step();  // 32-39, the prompt's end: 20 slots, target 20
  EXPECT_EQ(d.executor().kv_table(1), concat({0, 1}, range(22, 40)));
  // Decodes: the excess grows by half a slot a token; compressed again once it is a page.
  ASSERT_TRUE(d.run_to_completion());
  EXPECT_EQ(d.records()[1].generated, d.reference(1)) << "the fake model reads every slot";
  EXPECT_GE(d.executor().compressions_run(), 3);
  d.expect_all_released();
}

TEST(KvCompressScheduler, AttentionKeepsTheMostAttendedPositionsOfTheKnownAttention) {
  Driver d(config(KvEvictPolicy::kAttention), 32, 4);
  SequenceRequest r = make_request(1, 24, 4);
  r.kv_keep = 0.5;
  d.submit(r);
  d.step();
  d.step();
  d.step();  // 24 slots -> 12: sinks 0, 1, the last 8 (16-23), and the 2 most attended of 2-15
  std::vector<int32_t> others = range(2, 16);
  std::sort(others.begin(), others.end(), [](int32_t a, int32_t b) {
    return known_attention(a) != known_attention(b) ? known_attention(a) > known_attention(b)
                                                    : a > b;
  });
  std::vector<int32_t> want = {0, 1, others[0], others[1]};
  want = concat(want, range(16, 24));
  std::sort(want.begin(), want.end());
  EXPECT_EQ(d.executor().kv_table(1), want);
  ASSERT_TRUE(d.run_to_completion());
  EXPECT_EQ(d.records()[1].generated, d.reference(1));
  d.expect_all_released();
}

TEST(KvCompressScheduler, KeepOneNeverCompresses) {
  Driver d(config(KvEvictPolicy::kAttention), 32, 4);
  d.submit(make_request(1, 40, 8));
  while (d.scheduler().has_unfinished()) EXPECT_TRUE(d.step().kv_compressions.empty());
  EXPECT_EQ(d.executor().compressions_run(), 0);
  EXPECT_EQ(d.records()[1].generated, d.reference(1));
}

TEST(KvCompressScheduler, SharedPrefixPagesAreNeverWrittenNorCompressedPagesRegistered) {
  Driver d(config(KvEvictPolicy::kAttention), 40, 4, {}, {0}, default_prefix_hash);
  // A: 16 tokens of a shared prefix, uncompressed: its 4 full pages are registered.
  SequenceRequest a = make_request(1, 16, 2);
  d.submit(a);
  ASSERT_TRUE(d.run_to_completion());
  const int32_t registered = d.prefix_cache()->num_registered();
  ASSERT_EQ(registered, 4);
  // B: the same 16 tokens then 24 of its own, compressed: starts at 16 on A's pages, keeps them
  // as they are (kv_keep_from), compacts only its own, registers none of them.
  SequenceRequest b = make_request(2, 40, 8);
  std::copy(a.prompt.begin(), a.prompt.end(), b.prompt.begin());
  b.kv_keep = 0.5;
  d.submit(b);
  const std::vector<PageId> shared(d.kv().cached_pages_in_order());
  int compressions = 0;
  while (d.scheduler().has_unfinished()) {
    StepPlan p = d.step();
    for (const KvCompression& c : p.kv_compressions) {
      EXPECT_EQ(c.keep_from, 16);
      ++compressions;
    }
    if (d.scheduler().find(2)) EXPECT_EQ(d.scheduler().find(2)->kv_keep_from, 16);
    EXPECT_EQ(d.prefix_cache()->num_registered(), registered);
  }
  EXPECT_GT(compressions, 0);
  const std::vector<int32_t> table = d.executor().kv_table(2);
  ASSERT_GE(table.size(), 16u);
  EXPECT_EQ(std::vector<int32_t>(table.begin(), table.begin() + 16), range(0, 16));
  EXPECT_EQ(d.records()[2].generated, d.reference(2));
  d.expect_all_released();
}

// Guaranteed admission reserves what a sequence ever holds: 40 + 8 tokens are 12 pages
// uncompressed; with kv_keep 0.5 at most target(48) 24 + a page 3 + a chunk 8 = 35 tokens, 9
// pages. Four prompts prefill side by side in chunks of 8.
TEST(KvCompressScheduler, GuaranteedAdmissionRunsMoreCompressedSequencesInTheSamePages) {
  SchedulerConfig c = config(KvEvictPolicy::kWindow);
  c.max_num_batched_tokens = 32;
  c.long_prefill_token_threshold = 8;
  c.max_num_partial_prefills = 4;
  for (double keep : {1.0, 0.5}) {
    Driver d(c, 36, 4);
    for (SeqId id = 1; id <= 8; ++id) {
      SequenceRequest r = make_request(id, 40, 8);
      r.kv_keep = keep;
      r.sampling.ignore_eos = true;
      d.submit(r);
    }
    int32_t most_running = 0;
    while (d.scheduler().has_unfinished()) {
      d.step();
      most_running = std::max(most_running, d.scheduler().num_running());
    }
    EXPECT_EQ(most_running, keep < 1.0 ? 4 : 3) << "kv_keep " << keep;
    for (SeqId id = 1; id <= 8; ++id) EXPECT_EQ(d.records()[id].generated, d.reference(id));
    d.expect_all_released();
  }
}

}  // namespace
}  // namespace drift
