// KV-Compress's policies: how many entries a head keeps, and exactly which.
#include "kv/kv_eviction.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

namespace drift {
namespace {

KvCompressConfig config(double keep, KvEvictPolicy policy) {
  KvCompressConfig c;
  c.keep = keep;
  c.policy = policy;
  c.min_tokens = 16;
  c.sink_tokens = 2;
  c.recent_tokens = 4;
  c.metric_window = 4;
  return c;
}

std::vector<int32_t> iota(int32_t n, int32_t from = 0) {
  std::vector<int32_t> v(n);
  std::iota(v.begin(), v.end(), from);
  return v;
}

TEST(KvEviction, TargetIsTheKeptFractionAboveTheMinimumLength) {
  const KvCompressConfig c = config(0.5, KvEvictPolicy::kAttention);
  EXPECT_EQ(kv_keep_target(c, 16), 16);  // not longer than min_tokens: untouched
  EXPECT_EQ(kv_keep_target(c, 17), 8);   // floor(0.5 * 17)
  EXPECT_EQ(kv_keep_target(c, 100), 50);
  EXPECT_EQ(kv_keep_target(config(0.1, KvEvictPolicy::kWindow), 20), 6);  // sinks + recent
  EXPECT_EQ(kv_keep_target(config(1.0, KvEvictPolicy::kWindow), 1000), 1000);
}

TEST(KvEviction, WindowKeepsTheSinksAndTheMostRecent) {
  const KvCompressConfig c = config(0.5, KvEvictPolicy::kWindow);
  std::vector<int32_t> kept;
  const std::vector<int32_t> positions = iota(20);
  select_kept_entries(c, 20, 0, positions, std::vector<float>(20, 0.0f), 10, kept);
  EXPECT_EQ(kept, (std::vector<int32_t>{0, 1, 12, 13, 14, 15, 16, 17, 18, 19}));
}

TEST(KvEviction, AttentionKeepsTheSinksTheRecentAndTheMostAttended) {
  const KvCompressConfig c = config(0.5, KvEvictPolicy::kAttention);
  // Slots hold positions 0..19 but 5 and 9 were evicted earlier: 18 entries.
  std::vector<int32_t> positions = iota(20);
  positions.erase(positions.begin() + 9);
  positions.erase(positions.begin() + 5);
  std::vector<float> metric(positions.size(), 0.0f);
  metric[0] = 0.0f;    // position 0: a sink, kept whatever its metric
  metric[3] = 0.9f;    // position 3
  metric[6] = 0.5f;    // position 7
  metric[7] = 0.5f;    // position 8: ties with 7, the later wins
  metric[10] = 0.7f;   // position 12
  metric[15] = 0.01f;  // position 17: recent, kept anyway
  std::vector<int32_t> kept;
  // Target 8: 2 sinks + 4 recent (positions 16-19) + the 2 best others: positions 3 and 12.
  select_kept_entries(c, 20, 0, positions, metric, 8, kept);
  EXPECT_EQ(kept, (std::vector<int32_t>{0, 1, 3, 10, 14, 15, 16, 17}));
  // Target 9: position 8 (slot 7) next, before position 7.
  select_kept_entries(c, 20, 0, positions, metric, 9, kept);
  EXPECT_EQ(kept, (std::vector<int32_t>{0, 1, 3, 7, 10, 14, 15, 16, 17}));
}

TEST(KvEviction, PositionsBelowKeepFromStayAsTheyAre) {
  // The first 8 positions are a shared prefix: kept whatever the policy; the target covers them
  // and the recent window.
  const KvCompressConfig c = config(0.25, KvEvictPolicy::kWindow);
  EXPECT_EQ(kv_keep_target(c, 40, 8), 12);  // 8 + 4 recent > floor(0.25 * 40)
  EXPECT_EQ(kv_keep_target(c, 100, 8), 25);
  EXPECT_EQ(kv_keep_target(c, 12, 8), 12);  // not longer than min_tokens
  std::vector<int32_t> kept;
  select_kept_entries(c, 40, 8, iota(40), std::vector<float>(40, 0.0f), 14, kept);
  EXPECT_EQ(kept, (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6, 7, 34, 35, 36, 37, 38, 39}));
}

TEST(KvEviction, AHeadWithinItsTargetKeepsEverything) {
  std::vector<int32_t> kept;
  select_kept_entries(config(0.5, KvEvictPolicy::kAttention), 40, 0, iota(10, 30),
                      std::vector<float>(10, 0.0f), 10, kept);
  EXPECT_EQ(kept, iota(10));
}

TEST(KvEviction, ConfigOutOfRangeNamesTheField) {
  KvCompressConfig c;
  c.keep = 0.0;
  EXPECT_NE(c.validate().error().message.find("kv_keep"), std::string::npos);
  c.keep = 1.5;
  EXPECT_FALSE(c.validate().ok());
  c.keep = 0.5;
  EXPECT_TRUE(c.validate().ok());
  c.metric_window = c.recent_tokens + 1;
  EXPECT_NE(c.validate().error().message.find("window"), std::string::npos);
  EXPECT_EQ(parse_kv_evict_policy("window"), KvEvictPolicy::kWindow);
  EXPECT_EQ(parse_kv_evict_policy("h2o"), std::nullopt);
}

}  // namespace
}  // namespace drift
