// The prefix cache over KV groups: a sliding group's pages register anchored to group 0's page of
// the same index, a lookup asks every full group for every page and a sliding group only for the
// pages its window needs after the hit (kNoPage below), trims the hit to what every group can
// share, and reports group 0's pages only.
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "kv/kv_cache_manager.h"
#include "kv/kv_event_sink.h"
#include "kv/prefix_cache.h"

namespace drift {
namespace {

using Tokens = std::vector<TokenId>;
using Pages = std::vector<PageId>;
constexpr PageId X = kNoPage;
constexpr int32_t kPageSize = 4;
constexpr int32_t kWindow = 8;  // a query at p sees p-7 .. p: the 2 or 3 pages before it

KVCacheManager make_kv(int32_t num_pages, std::vector<KVGroup> groups = {{0}, {kWindow}}) {
  KVLayout layout{.num_layers = 1, .num_kv_heads = 1, .head_dim = 4, .page_size = kPageSize};
  layout.groups = std::move(groups);
  auto kv = KVCacheManager::create(layout, num_pages);
  EXPECT_TRUE(kv.ok());
  return std::move(kv).value();
}

Tokens tokens(int32_t n, TokenId first = 100) {
  Tokens t;
  for (int32_t i = 0; i < n; ++i) t.push_back(first + i);
  return t;
}

// Runs `seq` over `t` (whole pages) as the scheduler does: append, register every page of every
// group, free what left the window.
void run_and_register(KVCacheManager& kv, PrefixCache& cache, SeqId seq, const Tokens& t) {
  ASSERT_TRUE(kv.open(seq, int64_t(t.size())).ok());
  ASSERT_TRUE(kv.append(seq, int32_t(t.size())));
  PrefixCursor c = cache.root(0);
  for (size_t i = 0; i * kPageSize < t.size(); ++i) {
    Pages row;
    for (int32_t g = 0; g < kv.layout().num_groups(); ++g) row.push_back(kv.pages(seq, g)[i]);
    c = cache.insert(c, std::span<const TokenId>(t).subspan(i * kPageSize, kPageSize), row);
    ASSERT_FALSE(c.broken);
  }
  (void)kv.free_outside_window(seq, int64_t(t.size()));
}

struct Lookup {
  int32_t num_pages;
  Pages rows;  // [num_pages][groups]
};
Lookup lookup(const PrefixCache& cache, const Tokens& t, int32_t max_pages) {
  Pages rows;
  PrefixHit hit = cache.lookup(0, t, max_pages, rows);
  EXPECT_EQ(hit.cursor.num_pages, hit.num_pages);
  return {hit.num_pages, rows};
}

TEST(PrefixCacheGroups, AHitSharesEveryFullPageAndOnlyTheWindowOfTheSlidingGroup) {
  KVCacheManager kv = make_kv(32);
  PrefixCache cache(kv);
  const Tokens t = tokens(24);  // 6 pages: group 0 gets 0..5, group 1 6..11
  run_and_register(kv, cache, 1, t);
  EXPECT_EQ(kv.pages(1, 1)[0], X);  // 24 sees 17..24: sliding pages 0-3 (0..15) went
  EXPECT_EQ(kv.pages(1, 1)[4], 10);
  EXPECT_EQ(cache.num_registered(), 12);
  EXPECT_EQ(kv.cached_pages_in_order(), (Pages{6, 7, 8, 9}));  // freed but kept for a hit
  // A request with the same 24 tokens and more: a hit of 5 pages (short of its last token it
  // could take 6; max 5 here). Resuming at 20, it sees 13..20: sliding pages 3 and 4.
  Lookup hit = lookup(cache, tokens(30), 5);
  EXPECT_EQ(hit.num_pages, 5);
  EXPECT_EQ(hit.rows, (Pages{0, X, 1, X, 2, X, 3, 9, 4, 10}));
  EXPECT_TRUE(cache.check_invariants().ok());
}

TEST(PrefixCacheGroups, AHitShrinksToWhereEverySlidingPageItNeedsIsLeft) {
  KVCacheManager kv = make_kv(14);
  PrefixCache cache(kv);
  run_and_register(kv, cache, 1, tokens(24));  // group 0: 0-5, group 1: 6-11; 6-9 cached
  // Another sequence takes four pages: the free 12 and 13, then the least recently released,
  // sliding pages 6 and 7 (indexes 0 and 1).
  ASSERT_TRUE(kv.open(2, 8).ok());
  ASSERT_TRUE(kv.append(2, 8));
  EXPECT_EQ(kv.cached_pages_in_order(), (Pages{8, 9}));
  // 5 pages need sliding indexes 3-4 (9 cached, 10 in use); 4 pages need 2-3 (8, 9) ...
  EXPECT_EQ(lookup(cache, tokens(30), 5).num_pages, 5);
  EXPECT_EQ(lookup(cache, tokens(30), 4).rows, (Pages{0, X, 1, X, 2, 8, 3, 9}));
  // ... 3 pages need 1-2: index 1 is gone, so at most 1 page, which needs index 0 (position 0,
  // gone too): no hit.
  EXPECT_EQ(lookup(cache, tokens(30), 3).num_pages, 0);
  EXPECT_TRUE(cache.check_invariants().ok());
}

TEST(PrefixCacheGroups, AFullGroupBeyondGroup0NeedsEveryPage) {
  KVCacheManager kv = make_kv(32, {{0}, {0}, {kWindow}});
  PrefixCache cache(kv);
  run_and_register(kv, cache, 1, tokens(16));  // groups: 0-3, 4-7, 8-11; 8, 9 freed
  EXPECT_EQ(lookup(cache, tokens(20), 4).rows, (Pages{0, 4, X, 1, 5, X, 2, 6, 10, 3, 7, 11}));
  // A second text whose group-1 pages from index 2 on were never registered: its hits stop
  // there, whatever group 0 has.
  const Tokens other = tokens(16, 500);
  ASSERT_TRUE(kv.open(2, 16).ok());
  ASSERT_TRUE(kv.append(2, 16));
  PrefixCursor c = cache.root(0);
  for (size_t i = 0; i < 4; ++i) {
    const Pages row = {kv.pages(2, 0)[i], i < 2 ? kv.pages(2, 1)[i] : X, kv.pages(2, 2)[i]};
    c = cache.insert(c, std::span<const TokenId>(other).subspan(i * kPageSize, kPageSize), row);
  }
  Tokens longer = other;
  longer.push_back(1);
  const Lookup hit = lookup(cache, longer, 4);
  EXPECT_EQ(hit.num_pages, 2);
  // Two pages need sliding indexes 0 and 1 (2 * 4 - 7 = 1: from index 0).
  EXPECT_EQ(hit.rows, (Pages{kv.pages(2, 0)[0], kv.pages(2, 1)[0], kv.pages(2, 2)[0],
                             kv.pages(2, 0)[1], kv.pages(2, 1)[1], kv.pages(2, 2)[1]}));
  EXPECT_TRUE(cache.check_invariants().ok());
}

class RecordingSink final : public KVEventSink {
 public:
  void block_stored(uint64_t hash, std::optional<uint64_t>, std::span<const TokenId>) override {
    events.push_back("stored " + std::to_string(hash));
  }
  void block_removed(uint64_t hash) override {
    events.push_back("removed " + std::to_string(hash));
  }
  void all_blocks_cleared() override { events.push_back("cleared"); }
  KVEventCounts counts() const override { return {}; }
  std::vector<std::string> events;
};

TEST(PrefixCacheGroups, EventsReportGroup0sPagesOnly) {
  KVCacheManager kv = make_kv(8);
  RecordingSink sink;
  PrefixCache cache(kv, default_prefix_hash, &sink);
  // Group 0: pages 0-3; group 1: 4-7, of which 4 and 5 left the window (cached first).
  run_and_register(kv, cache, 1, tokens(16));
  Tokens expected;
  uint64_t h = cache.root(0).hash;
  std::vector<std::string> stored;
  for (int32_t i = 0; i < 4; ++i) {
    h = default_prefix_hash(h, tokens(4, 100 + 4 * i));
    stored.push_back("stored " + std::to_string(h));
  }
  EXPECT_EQ(sink.events, stored);
  ASSERT_TRUE(kv.release(1));  // cached: 4, 5, then 7, 3, 6, 2, 1, 0
  ASSERT_TRUE(kv.open(2, 32).ok());
  ASSERT_TRUE(kv.append(2, 4));  // reclaims sliding pages 4 and 5: nothing to report
  EXPECT_EQ(sink.events.size(), 4u);
  ASSERT_TRUE(kv.append(2, 4));  // 7 (sliding) and 3 (group 0's last page)
  ASSERT_EQ(sink.events.size(), 5u);
  EXPECT_EQ(sink.events.back(), "removed " + std::to_string(h));
  EXPECT_TRUE(cache.check_invariants().ok());
}

// What the disk tier is told of a sliding page the pool reclaims: its group and its row's
// group-0 digests and tokens, so that the file is named and checked as a reader of that row
// computes it.
TEST(PrefixCacheGroups, AReclaimedSlidingPageIsDescribedByItsRow) {
  struct Recorder : PrefixSpillListener {
    std::vector<EvictedPrefixPage> pages;
    std::vector<Tokens> tokens;
    void on_prefix_page_evicted(const EvictedPrefixPage& page) override {
      pages.push_back(page);
      tokens.emplace_back(page.tokens.begin(), page.tokens.end());
    }
  } spilled;
  KVCacheManager kv = make_kv(6);
  PrefixCache cache(kv);
  cache.set_spill_listener(&spilled);
  const Tokens t = tokens(12);
  run_and_register(kv, cache, 1, t);  // rows 0-2; its sliding page of row 0 left the window
  std::vector<EvictedPrefixPage> rows(3);
  for (int32_t i = 0; i < 3; ++i) rows[size_t(i)] = cache.describe(kv.pages(1, 0)[size_t(i)]);
  ASSERT_TRUE(kv.release(1));
  ASSERT_TRUE(kv.open(2, 24).ok());
  ASSERT_TRUE(kv.append(2, 12));  // takes every cached page
  ASSERT_EQ(spilled.pages.size(), 6u);
  int sliding = 0;
  for (size_t k = 0; k < spilled.pages.size(); ++k) {
    const EvictedPrefixPage& e = spilled.pages[k];
    const auto row =
        size_t(std::find(t.begin(), t.end(), spilled.tokens[k][0]) - t.begin()) / size_t(kPageSize);
    EXPECT_EQ(e.digest, rows[row].digest) << "page " << e.page;
    EXPECT_EQ(e.parent_digest, rows[row].parent_digest) << "page " << e.page;
    EXPECT_EQ(e.hash, rows[row].hash);
    if (e.group == 0) continue;
    ++sliding;
    EXPECT_EQ(e.group, 1);
    EXPECT_FALSE(e.parent_hash.has_value()) << "no KV event names it";
  }
  EXPECT_EQ(sliding, 3);
}

}  // namespace
}  // namespace drift
