// KVCacheManager::compress, the page side of KV-Compress: a compressed sequence keeps the pages
// its remaining slots need and drops the rest; pages shared with another sequence or kept for the
// prefix cache are never written (a compression that would write one is refused, nothing
// changes); a guaranteed sequence keeps its promise; and every invariant holds after thousands of
// random compress / share / fork / cache / free operations.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "kv/kv_cache_manager.h"

namespace drift {
namespace {

KVCacheManager make(int32_t num_pages, int32_t page_size) {
  auto kv = KVCacheManager::create(
      KVLayout{.num_layers = 1, .num_kv_heads = 1, .head_dim = 4, .page_size = page_size},
      num_pages);
  EXPECT_TRUE(kv.ok());
  return std::move(kv).value();
}

std::vector<PageId> pages_of(const KVCacheManager& kv, SeqId seq) {
  auto span = kv.pages(seq);
  return {span.begin(), span.end()};
}

TEST(KVCompressPages, DropsThePagesPastTheKeptSlotsFromTheBack) {
  KVCacheManager kv = make(8, 4);
  ASSERT_TRUE(kv.open(1, 32).ok());
  ASSERT_TRUE(kv.append(1, 18));  // pages 0-4, the last partial
  auto r = kv.compress(1, 0, 9, /*keep_promise=*/false);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->references_dropped, 2);
  EXPECT_EQ(r->pages_freed, 2);
  EXPECT_EQ(pages_of(kv, 1), (std::vector<PageId>{0, 1, 2}));
  EXPECT_EQ(kv.num_tokens(1), 9);
  EXPECT_EQ(kv.free_pages_in_order(), (std::vector<PageId>{5, 6, 7, 4, 3}));
  EXPECT_TRUE(kv.check_invariants().ok());
}

TEST(KVCompressPages, AGuaranteedSequenceKeepsItsPromise) {
  KVCacheManager kv = make(8, 4);
  ASSERT_TRUE(kv.open(1, 32).ok());
  ASSERT_TRUE(kv.reserve(1, kv.estimate(16, 8)).ok());  // 6 pages promised
  ASSERT_TRUE(kv.append(1, 16));
  ASSERT_TRUE(kv.compress(1, 0, 8, /*keep_promise=*/true).ok());
  EXPECT_EQ(pages_of(kv, 1).size(), 2u);
  EXPECT_EQ(kv.reserved_pages(1), 4);  // held + reserved: still 6
  EXPECT_EQ(kv.num_available_pages(), 2);
  // It can grow to its estimate again whatever the others take.
  ASSERT_TRUE(kv.open(2, 32).ok());
  ASSERT_TRUE(kv.append(2, int32_t(kv.appendable_tokens(2))));
  EXPECT_TRUE(kv.append(1, 16));
  EXPECT_TRUE(kv.check_invariants().ok());
}

TEST(KVCompressPages, NeverWritesASharedOrCachedPage) {
  KVCacheManager kv = make(12, 4);
  ASSERT_TRUE(kv.open(1, 32).ok());
  ASSERT_TRUE(kv.append(1, 8));
  ASSERT_TRUE(kv.mark_cacheable(0).ok());  // registered in the prefix cache
  ASSERT_TRUE(kv.open(2, 32).ok());
  ASSERT_TRUE(kv.share_page(2, 0).ok());  // a prefix hit: page 0 shared
  ASSERT_TRUE(kv.append(2, 12));          // pages 2, 3, 4
  const auto before = pages_of(kv, 2);
  auto refused = kv.compress(2, 0, 8, false);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("shared page"), std::string::npos);
  EXPECT_EQ(pages_of(kv, 2), before);
  EXPECT_EQ(kv.num_tokens(2), 16);
  // Keeping the shared page's slots as they are, the rest may be compacted.
  EXPECT_FALSE(kv.writes_shared_page(2, 4));
  ASSERT_TRUE(kv.compress(2, 4, 8, false).ok());
  EXPECT_EQ(pages_of(kv, 2), (std::vector<PageId>{0, 2}));
  EXPECT_EQ(kv.refcount(0), 2);
  // A forked sequence's pages are shared until written.
  ASSERT_TRUE(kv.fork(1, 3).ok());
  EXPECT_TRUE(kv.writes_shared_page(3, 4));
  EXPECT_FALSE(kv.compress(3, 4, 5, false).ok());
  EXPECT_TRUE(kv.check_invariants().ok());
}

TEST(KVCompressPages, ArgumentsOutOfRangeChangeNothing) {
  KVCacheManager kv = make(4, 4);
  EXPECT_FALSE(kv.compress(9, 0, 0, false).ok());
  ASSERT_TRUE(kv.open(1, 16).ok());
  ASSERT_TRUE(kv.append(1, 6));
  EXPECT_FALSE(kv.compress(1, 0, 7, false).ok());
  EXPECT_FALSE(kv.compress(1, 5, 4, false).ok());
  EXPECT_EQ(kv.num_tokens(1), 6);
  EXPECT_TRUE(kv.check_invariants().ok());
}

TEST(KVCompressPages, RandomCompressShareForkCacheFreeKeepTheInvariants) {
  for (uint32_t seed = 1; seed <= 6; ++seed) {
    std::mt19937 rng(seed);
    const int32_t page_size = 1 + int32_t(seed % 4);
    KVCacheManager kv = make(32, page_size);
    std::vector<SeqId> open;
    SeqId next = 0;
    int64_t compressed = 0, refused = 0;
    for (int op = 0; op < 4000; ++op) {
      const int kind = int(rng() % 12);
      if (kind == 0 || open.empty()) {
        const SeqId id = next++;
        ASSERT_TRUE(kv.open(id, 64).ok());
        open.push_back(id);
        if (rng() % 2) (void)kv.reserve(id, kv.estimate(int64_t(rng() % 30), int64_t(rng() % 20)));
      } else if (kind <= 4) {
        const SeqId id = open[rng() % open.size()];
        const int32_t n = int32_t(rng() % 9);
        if (kv.appendable_tokens(id) >= n) ASSERT_TRUE(kv.append(id, n));
      } else if (kind <= 7) {
        // Compress: keep a random prefix as is, compact up to a random length.
        const SeqId id = open[rng() % open.size()];
        const int64_t tokens = kv.num_tokens(id);
        const int64_t keep_from = rng() % 2 ? 0 : int64_t(rng() % (tokens + 1));
        const int64_t keep = keep_from + int64_t(rng() % (tokens - keep_from + 1));
        const auto before = pages_of(kv, id);
        const int64_t promised = int64_t(before.size()) + kv.reserved_pages(id);
        // The pages a compaction from keep_from writes: every one it keeps from there on.
        bool writes_shared = false;
        for (size_t i = size_t(keep_from / page_size); i < before.size(); ++i)
          writes_shared |= kv.refcount(before[i]) > 1 || kv.cacheable(before[i]);
        const bool keep_promise = rng() % 2;
        auto r = kv.compress(id, keep_from, keep, keep_promise);
        ASSERT_EQ(r.ok(), !writes_shared) << "seed " << seed << " op " << op;
        if (r.ok()) {
          ++compressed;
          const auto after = pages_of(kv, id);
          ASSERT_EQ(int64_t(after.size()), (keep + page_size - 1) / page_size);
          ASSERT_TRUE(std::equal(after.begin(), after.end(), before.begin()));
          if (keep_promise) ASSERT_EQ(int64_t(after.size()) + kv.reserved_pages(id), promised);
        } else {
          ++refused;
          ASSERT_EQ(pages_of(kv, id), before);
        }
      } else if (kind == 8) {
        const SeqId parent = open[rng() % open.size()];
        const SeqId child = next++;
        ASSERT_TRUE(kv.fork(parent, child).ok());
        open.push_back(child);
      } else if (kind == 9) {
        // A prefix hit: a new sequence shares the full pages of a running one, or they get cached.
        const SeqId from = open[rng() % open.size()];
        const auto pages = pages_of(kv, from);
        const int64_t full = kv.num_tokens(from) / page_size;
        if (full > 0 && rng() % 2) {
          ASSERT_TRUE(kv.mark_cacheable(pages[rng() % full]).ok());
        } else if (full > 0) {
          const SeqId id = next++;
          ASSERT_TRUE(kv.open(id, 64).ok());
          open.push_back(id);
          for (int64_t i = 0; i < full && kv.num_available_pages() > 0; ++i)
            ASSERT_TRUE(kv.share_page(id, pages[i]).ok());
        }
      } else {
        const size_t i = rng() % open.size();
        ASSERT_TRUE(kv.release(open[i]));
        open.erase(open.begin() + std::ptrdiff_t(i));
        if (rng() % 8 == 0) kv.evict_all_cached();
      }
      Status s = kv.check_invariants();
      ASSERT_TRUE(s.ok()) << "seed " << seed << " op " << op << ": " << s.message();
    }
    for (SeqId id : open) ASSERT_TRUE(kv.release(id));
    EXPECT_TRUE(kv.check_invariants().ok());
    EXPECT_EQ(kv.num_used_pages(), 0);
    EXPECT_EQ(kv.num_reserved_pages(), 0);
    EXPECT_GT(compressed, 100);
    EXPECT_GT(refused, 10) << "the test should try to compress shared pages";
  }
}

}  // namespace
}  // namespace drift
