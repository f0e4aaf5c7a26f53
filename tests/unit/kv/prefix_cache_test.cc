// The prefix cache over a small KV cache: exact matches only (also under forced hash
// collisions), LRU eviction order pinned, chains broken by a reused parent, flush to all-free.
#include "kv/prefix_cache.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "kv/kv_cache_manager.h"

namespace drift {
namespace {

using Pages = std::vector<PageId>;
using Tokens = std::vector<TokenId>;

constexpr int32_t kPageSize = 4;

KVCacheManager make_kv(int32_t num_pages) {
  KVLayout layout{.num_layers = 1, .num_kv_heads = 1, .head_dim = 4, .page_size = kPageSize};
  auto kv = KVCacheManager::create(layout, num_pages);
  EXPECT_TRUE(kv.ok());
  return std::move(kv).value();
}

#define EXPECT_BOTH_INVARIANTS(kv, cache)   \
  do {                                      \
    Status s1 = (kv).check_invariants();    \
    EXPECT_TRUE(s1.ok()) << s1.message();   \
    Status s2 = (cache).check_invariants(); \
    EXPECT_TRUE(s2.ok()) << s2.message();   \
  } while (0)

// Every tokens.size() / kPageSize full page: 0, 1, 2, ...
Tokens tokens_for(std::initializer_list<TokenId> page_starts) {
  Tokens t;
  for (TokenId s : page_starts)
    for (int32_t i = 0; i < kPageSize; ++i) t.push_back(s + i);
  return t;
}

// Opens `seq`, writes `tokens` (page aligned) into fresh pages, registers every full page.
PrefixCursor write_and_register(KVCacheManager& kv, PrefixCache& cache, SeqId seq,
                                const Tokens& tokens, uint64_t ns = 0) {
  EXPECT_TRUE(kv.open(seq, int64_t(tokens.size())).ok());
  EXPECT_TRUE(kv.append(seq, int32_t(tokens.size())));
  PrefixCursor c = cache.root(ns);
  std::span<const PageId> pages = kv.pages(seq);
  for (size_t i = 0; i + kPageSize <= tokens.size(); i += kPageSize)
    c = cache.insert(c, std::span(tokens).subspan(i, kPageSize), pages[i / kPageSize]);
  return c;
}

Pages match_all(const PrefixCache& cache, const Tokens& tokens, uint64_t ns = 0) {
  Pages out;
  cache.match(cache.root(ns), tokens, int32_t(tokens.size() / kPageSize), out);
  return out;
}

TEST(PrefixCache, MatchesTheLongestVerifiedRunOfFullPages) {
  KVCacheManager kv = make_kv(8);
  PrefixCache cache(kv);
  Tokens a = tokens_for({10, 20, 30});
  PrefixCursor c = write_and_register(kv, cache, 1, a);  // pages 0, 1, 2
  EXPECT_EQ(c.num_pages, 3);
  EXPECT_EQ(c.page, 2);
  EXPECT_EQ(cache.num_registered(), 3);
  EXPECT_EQ(match_all(cache, a), (Pages{0, 1, 2})) << "live pages are shared too";
  EXPECT_EQ(match_all(cache, tokens_for({10, 20, 99})), (Pages{0, 1}));
  EXPECT_EQ(match_all(cache, tokens_for({99, 20, 30})), (Pages{})) << "a prefix, not a suffix";
  EXPECT_EQ(match_all(cache, a, /*ns=*/7), (Pages{})) << "another namespace";
  Pages limited;
  PrefixCursor end = cache.match(cache.root(0), a, 2, limited);
  EXPECT_EQ(limited, (Pages{0, 1}));
  EXPECT_EQ(end.page, 1);
  EXPECT_EQ(end.num_pages, 2);
  EXPECT_BOTH_INVARIANTS(kv, cache);

  // Released, the pages stay cached (deepest first in eviction order) and still match.
  ASSERT_TRUE(kv.release(1));
  EXPECT_EQ(kv.cached_pages_in_order(), (Pages{2, 1, 0}));
  EXPECT_EQ(match_all(cache, a), (Pages{0, 1, 2}));
  EXPECT_BOTH_INVARIANTS(kv, cache);
}

TEST(PrefixCache, ADuplicatePageIsNotRegisteredAndTheCursorMovesOntoTheRegisteredOne) {
  KVCacheManager kv = make_kv(8);
  PrefixCache cache(kv);
  Tokens a = tokens_for({10, 20});
  write_and_register(kv, cache, 1, a);  // pages 0, 1
  // Sequence 2 computed the same content itself (it missed while 1 was still prefilling).
  PrefixCursor c = write_and_register(kv, cache, 2, a);  // pages 2, 3: duplicates
  EXPECT_EQ(c.page, 1);
  EXPECT_FALSE(cache.registered(2));
  EXPECT_FALSE(cache.registered(3));
  EXPECT_EQ(cache.num_registered(), 2);
  EXPECT_EQ(cache.stats().pages_inserted, 2u);
  auto r = kv.release(2);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->pages_freed, 2) << "unregistered duplicates go straight back to the free list";
  EXPECT_BOTH_INVARIANTS(kv, cache);
}

// The eviction order of a small case, page by page: free pages first, then cached ones, least
// recently released first, a sequence's deepest page before its shallower ones; a hit takes a
// page out of the order and its next release puts it at the back.
TEST(PrefixCache, EvictsCachedPagesInExactLruOrderOnlyWhenNoFreePageIsLeft) {
  KVCacheManager kv = make_kv(6);
  PrefixCache cache(kv);
  Tokens a = tokens_for({10, 20});  // pages 0, 1
  Tokens b = tokens_for({30, 40});  // pages 2, 3
  write_and_register(kv, cache, 1, a);
  write_and_register(kv, cache, 2, b);
  ASSERT_TRUE(kv.release(2));
  ASSERT_TRUE(kv.release(1));
  EXPECT_EQ(kv.cached_pages_in_order(), (Pages{3, 2, 1, 0}));
  EXPECT_EQ(kv.free_pages_in_order(), (Pages{4, 5}));

  // A hit on b's first page takes page 2 out of the order; it returns at the back.
  ASSERT_TRUE(kv.open(3, 8).ok());
  ASSERT_TRUE(kv.share_page(3, 2).ok());
  EXPECT_EQ(kv.cached_pages_in_order(), (Pages{3, 1, 0}));
  ASSERT_TRUE(kv.release(3));
  EXPECT_EQ(kv.cached_pages_in_order(), (Pages{3, 1, 0, 2}));
  EXPECT_BOTH_INVARIANTS(kv, cache);

  // 20 tokens need 5 pages: the 2 free ones, then 3, 1 and 0 are evicted, in that order.
  ASSERT_TRUE(kv.open(4, 20).ok());
  ASSERT_TRUE(kv.append(4, 8));
  EXPECT_EQ(cache.stats().evictions, 0u) << "free pages are used before any eviction";
  ASSERT_TRUE(kv.append(4, 12));
  EXPECT_EQ(kv.pages(4)[2], 3);
  EXPECT_EQ(kv.pages(4)[3], 1);
  EXPECT_EQ(kv.pages(4)[4], 0);
  EXPECT_EQ(cache.stats().evictions, 3u);
  EXPECT_EQ(cache.stats().evicted_bytes, 3 * kv.layout().bytes_per_page());
  EXPECT_EQ(kv.cached_pages_in_order(), (Pages{2}));
  EXPECT_EQ(match_all(cache, b), (Pages{2})) << "page 3 was evicted; its parent 2 survives";
  EXPECT_EQ(match_all(cache, a), (Pages{})) << "both of a's pages were evicted";
  EXPECT_BOTH_INVARIANTS(kv, cache);
}

// A hash that makes every page collide: only the exact verification tells them apart.
uint64_t colliding_hash(uint64_t, std::span<const TokenId>) { return 42; }

TEST(PrefixCache, AForcedHashCollisionNeverMatchesWrongContent) {
  KVCacheManager kv = make_kv(8);
  PrefixCache cache(kv, colliding_hash);
  write_and_register(kv, cache, 1, tokens_for({10, 20}));  // pages 0, 1
  write_and_register(kv, cache, 2, tokens_for({30, 20}));  // pages 2, 3: same 2nd page tokens
  EXPECT_EQ(cache.num_registered(), 4) << "colliding pages are all kept";
  EXPECT_EQ(match_all(cache, tokens_for({10, 20})), (Pages{0, 1}));
  EXPECT_EQ(match_all(cache, tokens_for({30, 20})), (Pages{2, 3}))
      << "page 1 has the same hash and tokens, but another parent";
  EXPECT_EQ(match_all(cache, tokens_for({50, 20})), (Pages{}));
  EXPECT_EQ(match_all(cache, tokens_for({10, 21})), (Pages{0}));
  EXPECT_EQ(match_all(cache, tokens_for({10, 20}), /*ns=*/1), (Pages{}));
  EXPECT_BOTH_INVARIANTS(kv, cache);
}

TEST(PrefixCache, ARegisteredParentThatIsEvictedBreaksTheChainForGood) {
  // Pages registered out of a live sequence's order, built directly through the cursors: the
  // parent is cached and evicted while the child is held, then the parent's id is registered
  // again with other content; the child, still registered, is not reachable through it.
  KVCacheManager kv = make_kv(3);
  PrefixCache cache(kv, colliding_hash);
  Tokens a = tokens_for({10, 20});
  ASSERT_TRUE(kv.open(1, 4).ok());
  ASSERT_TRUE(kv.append(1, 4));  // page 0: parent
  ASSERT_TRUE(kv.open(2, 4).ok());
  ASSERT_TRUE(kv.append(2, 4));  // page 1: child, held by sequence 2
  PrefixCursor parent = cache.insert(cache.root(0), std::span(a).first(4), 0);
  cache.insert(parent, std::span(a).subspan(4, 4), 1);
  EXPECT_EQ(match_all(cache, a), (Pages{0, 1}));
  ASSERT_TRUE(kv.release(1));  // parent cached
  ASSERT_TRUE(kv.open(3, 8).ok());
  ASSERT_TRUE(kv.append(3, 8));  // free page 2, then evicts the parent (page 0)
  EXPECT_EQ(kv.pages(3)[1], 0);
  EXPECT_FALSE(cache.registered(0));
  EXPECT_TRUE(cache.registered(1)) << "held by sequence 2";
  // Page 0 registered again with the same tokens (so same hash, same page id, same parent):
  // only its new epoch tells the old child apart.
  ASSERT_TRUE(kv.release(3));
  ASSERT_TRUE(kv.open(4, 4).ok());
  ASSERT_TRUE(kv.append(4, 4));
  ASSERT_EQ(kv.pages(4)[0], 0) << "the freed page 0 is at the front of the free list";
  cache.insert(cache.root(0), std::span(a).first(4), 0);
  EXPECT_EQ(match_all(cache, a), (Pages{0})) << "the old child hangs off a parent that is gone";
  EXPECT_BOTH_INVARIANTS(kv, cache);
}

TEST(PrefixCache, FlushLeavesEveryPageFreeWithRefcountZero) {
  KVCacheManager kv = make_kv(8);
  PrefixCache cache(kv);
  write_and_register(kv, cache, 1, tokens_for({10, 20, 30}));
  write_and_register(kv, cache, 2, tokens_for({10, 20, 40}));  // shares nothing: own pages
  ASSERT_TRUE(kv.release(1));
  EXPECT_EQ(cache.flush(), 3) << "only cached pages; sequence 2 still holds its own";
  EXPECT_EQ(cache.num_registered(), 1) << "2's third page; its first two were duplicates";
  ASSERT_TRUE(kv.release(2));
  EXPECT_EQ(cache.flush(), 1);
  EXPECT_EQ(cache.num_registered(), 0);
  EXPECT_EQ(kv.num_free_pages(), kv.num_pages());
  for (PageId p = 0; p < kv.num_pages(); ++p) EXPECT_EQ(kv.refcount(p), 0);
  EXPECT_BOTH_INVARIANTS(kv, cache);
}

TEST(PrefixCache, RecordsQueriesInTokensLikeVllm) {
  KVCacheManager kv = make_kv(2);
  PrefixCache cache(kv);
  cache.record_query(100, 64);
  cache.record_query(10, 0);
  EXPECT_EQ(cache.stats().queries, 2u);
  EXPECT_EQ(cache.stats().hits, 1u);
  EXPECT_EQ(cache.stats().misses, 1u);
  EXPECT_EQ(cache.stats().queried_tokens, 110u);
  EXPECT_EQ(cache.stats().hit_tokens, 64u);
}

// Random registrations, hits, releases and evictions under a hash with few values (long probe
// runs, many deletions from the middle of them), checked after every operation: the table stays
// consistent, and every match returns pages whose recorded content is exactly the query's.
TEST(PrefixCache, RandomWorkloadKeepsTheTableExact) {
  static uint64_t (*few_values)(uint64_t, std::span<const TokenId>) =
      [](uint64_t parent, std::span<const TokenId> t) -> uint64_t {
    return default_prefix_hash(parent, t) % 5;
  };
  for (uint32_t seed = 1; seed <= 6; ++seed) {
    std::mt19937 rng(seed);
    KVCacheManager kv = make_kv(20);
    PrefixCache cache(kv, few_values);
    std::vector<std::pair<SeqId, Tokens>> live;
    std::vector<Tokens> content(20);  // page -> the whole prefix it was registered for
    SeqId next = 1;
    size_t pages_hit = 0;
    for (int op = 0; op < 400; ++op) {
      if (live.size() < 4 && rng() % 2) {
        // 1-4 pages from an alphabet of 3 page contents: many shared prefixes.
        Tokens t;
        int32_t n = 1 + int32_t(rng() % 4);
        for (int32_t i = 0; i < n; ++i) {
          TokenId start = TokenId(rng() % 3) * 10;
          for (int32_t k = 0; k < kPageSize; ++k) t.push_back(start + k);
        }
        Pages hit;
        PrefixCursor c = cache.match(cache.root(0), t, n, hit);
        pages_hit += hit.size();
        for (size_t i = 0; i < hit.size(); ++i)  // exactly the query's leading pages
          ASSERT_EQ(content[size_t(hit[i])], Tokens(t.begin(), t.begin() + (i + 1) * kPageSize));
        const SeqId seq = next++;
        ASSERT_TRUE(kv.open(seq, int64_t(t.size())).ok());
        bool ok = true;
        for (PageId p : hit) ok = ok && kv.share_page(seq, p).ok();
        ASSERT_TRUE(ok);
        int32_t rest = int32_t(t.size()) - int32_t(hit.size()) * kPageSize;
        if (int64_t(kv.num_available_pages()) * kPageSize < rest) {
          ASSERT_TRUE(kv.release(seq));
          continue;
        }
        ASSERT_TRUE(kv.append(seq, rest));
        std::span<const PageId> pages = kv.pages(seq);
        for (size_t i = hit.size(); i < pages.size(); ++i) {
          c = cache.insert(c, std::span(t).subspan(i * kPageSize, kPageSize), pages[i]);
          if (c.page == pages[i])
            content[size_t(pages[i])] = Tokens(t.begin(), t.begin() + (i + 1) * kPageSize);
        }
        live.emplace_back(seq, t);
      } else if (!live.empty()) {
        size_t i = rng() % live.size();
        ASSERT_TRUE(kv.release(live[i].first));
        live.erase(live.begin() + std::ptrdiff_t(i));
      }
      EXPECT_BOTH_INVARIANTS(kv, cache);
    }
    EXPECT_GT(pages_hit, 50u);
    EXPECT_GT(cache.stats().evictions, 10u);
    for (auto& [seq, t] : live) ASSERT_TRUE(kv.release(seq));
    cache.flush();
    EXPECT_EQ(kv.num_free_pages(), kv.num_pages());
    EXPECT_EQ(cache.num_registered(), 0);
    EXPECT_BOTH_INVARIANTS(kv, cache);
  }
}

}  // namespace
}  // namespace drift
