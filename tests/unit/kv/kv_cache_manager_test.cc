#include "kv/kv_cache_manager.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <random>

namespace drift {
namespace {

using Pages = std::vector<PageId>;

KVLayout layout(int32_t page_size = 4) {
  return KVLayout{.num_layers = 1, .num_kv_heads = 1, .head_dim = 4, .page_size = page_size};
}

KVCacheManager make(int32_t num_pages, int32_t page_size = 4) {
  auto kv = KVCacheManager::create(layout(page_size), num_pages);
  EXPECT_TRUE(kv.ok());
  return std::move(kv).value();
}

Pages pages_of(const KVCacheManager& kv, SeqId seq) {
  auto span = kv.pages(seq);
  return Pages(span.begin(), span.end());
}

Pages range(PageId from, PageId to) {  // [from, to)
  Pages p(size_t(to - from));
  std::iota(p.begin(), p.end(), from);
  return p;
}

Pages concat(Pages a, const Pages& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

#define EXPECT_INVARIANTS(kv)             \
  do {                                    \
    Status s_ = (kv).check_invariants();  \
    EXPECT_TRUE(s_.ok()) << s_.message(); \
  } while (0)

TEST(KVCacheManager, CreateValidates) {
  EXPECT_FALSE(KVCacheManager::create(layout(), 0).ok());
  KVLayout bad = layout();
  bad.page_size = 0;
  auto r = KVCacheManager::create(bad, 8);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("page_size"), std::string::npos);
}

TEST(KVCacheManager, FreshCacheIsAllFreeInIdOrder) {
  KVCacheManager kv = make(8);
  EXPECT_EQ(kv.num_pages(), 8);
  EXPECT_EQ(kv.num_free_pages(), 8);
  EXPECT_EQ(kv.num_used_pages(), 0);
  EXPECT_EQ(kv.num_cached_pages(), 0);
  EXPECT_EQ(kv.free_pages_in_order(), range(0, 8));
  EXPECT_INVARIANTS(kv);
}

TEST(KVCacheManager, AppendHandsOutExactPageIdsAndReleaseReturnsThemFromTheBack) {
  KVCacheManager kv = make(8);  // 4 tokens per page
  ASSERT_TRUE(kv.open(1, 32).ok());
  ASSERT_TRUE(kv.open(2, 32).ok());

  auto a = kv.append(1, 5);  // tokens 0..4: pages 0, 1
  ASSERT_TRUE(a);
  EXPECT_EQ(a->num_new_pages, 2);
  EXPECT_FALSE(a->copy_on_write);
  EXPECT_EQ(pages_of(kv, 1), (Pages{0, 1}));
  ASSERT_TRUE(kv.append(2, 1));  // page 2
  EXPECT_EQ(pages_of(kv, 2), (Pages{2}));
  ASSERT_TRUE(kv.append(1, 3));  // tokens 5..7 fit in page 1
  EXPECT_EQ(pages_of(kv, 1), (Pages{0, 1}));
  ASSERT_TRUE(kv.append(1, 1));  // token 8: page 3
  EXPECT_EQ(pages_of(kv, 1), (Pages{0, 1, 3}));
  EXPECT_EQ(kv.num_tokens(1), 9);
  EXPECT_EQ(kv.free_pages_in_order(), range(4, 8));
  EXPECT_EQ(kv.refcount(0), 1);
  EXPECT_EQ(kv.page_state(3), PageState::kUsed);
  EXPECT_INVARIANTS(kv);

  auto released = kv.release(1);
  ASSERT_TRUE(released);
  EXPECT_EQ(released->references_dropped, 3);
  EXPECT_EQ(released->pages_freed, 3);
  EXPECT_EQ(released->pages_cached, 0);
  // Appended at the back, last page first.
  EXPECT_EQ(kv.free_pages_in_order(), concat(range(4, 8), {3, 1, 0}));
  EXPECT_EQ(kv.refcount(0), 0);
  EXPECT_FALSE(kv.release(1)) << "a second release must find nothing to return";
  EXPECT_INVARIANTS(kv);

  ASSERT_TRUE(kv.append(2, 4));  // tokens 1..4: fills page 2, then takes page 4
  EXPECT_EQ(pages_of(kv, 2), (Pages{2, 4}));
  ASSERT_TRUE(kv.release(2));
  EXPECT_EQ(kv.free_pages_in_order(), (Pages{5, 6, 7, 3, 1, 0, 4, 2}));
  EXPECT_EQ(kv.num_free_pages(), 8);
  EXPECT_INVARIANTS(kv);
}

TEST(KVCacheManager, OpenRejectsDuplicatesAndUnknownSequencesGetNothing) {
  KVCacheManager kv = make(4);
  ASSERT_TRUE(kv.open(7, 8).ok());
  EXPECT_FALSE(kv.open(7, 8).ok());
  EXPECT_FALSE(kv.open(8, -1).ok());
  EXPECT_FALSE(kv.append(99, 1));
  EXPECT_EQ(kv.appendable_tokens(99), 0);
  EXPECT_FALSE(kv.reserve(99, kv.estimate(1, 1)).ok());
  EXPECT_TRUE(kv.pages(99).empty());
  EXPECT_INVARIANTS(kv);
}

TEST(KVCacheManager, OutOfPagesIsAValueAndChangesNothing) {
  KVCacheManager kv = make(3);
  ASSERT_TRUE(kv.open(1, 100).ok());
  ASSERT_TRUE(kv.append(1, 10));  // 3 pages, 2 tokens of slack
  EXPECT_EQ(kv.appendable_tokens(1), 2);
  EXPECT_FALSE(kv.append(1, 3));
  EXPECT_EQ(kv.num_tokens(1), 10);
  EXPECT_EQ(pages_of(kv, 1), (Pages{0, 1, 2}));
  EXPECT_TRUE(kv.append(1, 2));
  EXPECT_EQ(kv.appendable_tokens(1), 0);
  EXPECT_INVARIANTS(kv);
}

TEST(KVCacheManager, EstimateCountsPromptPlusMaxNewTokens) {
  KVCacheManager kv = make(16);
  KVUsageEstimate e = kv.estimate(10, 7);
  EXPECT_EQ(e.num_tokens, 17);
  EXPECT_EQ(e.num_pages, 5);
  EXPECT_EQ(e.num_bytes, 5 * kv.layout().bytes_per_page());
}

TEST(KVCacheManager, ReservationHoldsCapacityWithoutBindingPageIds) {
  KVCacheManager kv = make(10);
  ASSERT_TRUE(kv.open(1, 24).ok());
  KVUsageEstimate e = kv.estimate(20, 4);  // 24 tokens: 6 pages
  ASSERT_TRUE(kv.can_reserve(e));
  ASSERT_TRUE(kv.reserve(1, e).ok());
  EXPECT_EQ(kv.reserved_pages(1), 6);
  EXPECT_EQ(kv.num_reserved_pages(), 6);
  EXPECT_EQ(kv.num_free_pages(), 10) << "no page id is bound yet";
  EXPECT_EQ(kv.num_available_pages(), 4);
  EXPECT_FALSE(kv.can_reserve(kv.estimate(17, 0)));  // 5 pages
  EXPECT_TRUE(kv.can_reserve(kv.estimate(16, 0)));   // 4 pages
  ASSERT_TRUE(kv.open(2, 40).ok());
  Status refused = kv.reserve(2, kv.estimate(17, 0));
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("needs 5 more pages, only 4 of 10"), std::string::npos)
      << refused.message();
  EXPECT_EQ(kv.reserved_pages(2), 0);
  EXPECT_INVARIANTS(kv);

  // An unreserved sequence may take only what is not promised.
  EXPECT_EQ(kv.appendable_tokens(2), 16);
  ASSERT_TRUE(kv.append(2, 16));
  EXPECT_EQ(pages_of(kv, 2), range(0, 4));
  EXPECT_FALSE(kv.append(2, 1));
  EXPECT_EQ(kv.num_available_pages(), 0);

  // The reserved sequence still gets all of its pages, drawn from its reservation.
  for (int i = 0; i < 24; ++i) ASSERT_TRUE(kv.append(1, 1)) << i;
  EXPECT_EQ(pages_of(kv, 1), range(4, 10));
  EXPECT_EQ(kv.reserved_pages(1), 0);
  EXPECT_EQ(kv.num_reserved_pages(), 0);
  EXPECT_INVARIANTS(kv);
}

TEST(KVCacheManager, ReleaseReturnsTheUnboundReservation) {
  KVCacheManager kv = make(10);
  ASSERT_TRUE(kv.open(1, 40).ok());
  ASSERT_TRUE(kv.reserve(1, kv.estimate(30, 10)).ok());  // 10 pages
  ASSERT_TRUE(kv.append(1, 9));                          // binds 3
  EXPECT_EQ(kv.reserved_pages(1), 7);
  EXPECT_EQ(kv.num_available_pages(), 0);
  auto r = kv.release(1);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->pages_freed, 3);
  EXPECT_EQ(r->reservation_returned, 7);
  EXPECT_EQ(kv.num_reserved_pages(), 0);
  EXPECT_EQ(kv.num_available_pages(), 10);
  EXPECT_INVARIANTS(kv);
}

TEST(KVCacheManager, ReserveTopsUpToTheEstimate) {
  KVCacheManager kv = make(10);
  ASSERT_TRUE(kv.open(1, 40).ok());
  ASSERT_TRUE(kv.append(1, 8));                         // 2 pages held
  ASSERT_TRUE(kv.reserve(1, kv.estimate(12, 0)).ok());  // 3 pages in all: 1 more
  EXPECT_EQ(kv.reserved_pages(1), 1);
  ASSERT_TRUE(kv.reserve(1, kv.estimate(4, 0)).ok());  // already covered
  EXPECT_EQ(kv.reserved_pages(1), 1);
  EXPECT_INVARIANTS(kv);
}

TEST(KVCacheManager, ForkSharesPagesAndCopiesAPartialLastPageOnWrite) {
  KVCacheManager kv = make(8);
  ASSERT_TRUE(kv.open(1, 16).ok());
  ASSERT_TRUE(kv.append(1, 6));  // pages 0, 1 (page 1 half full)
  ASSERT_TRUE(kv.fork(1, 2).ok());
  EXPECT_FALSE(kv.fork(1, 2).ok());
  EXPECT_FALSE(kv.fork(42, 3).ok());
  EXPECT_EQ(pages_of(kv, 2), (Pages{0, 1}));
  EXPECT_EQ(kv.num_tokens(2), 6);
  EXPECT_EQ(kv.refcount(0), 2);
  EXPECT_EQ(kv.refcount(1), 2);
  EXPECT_EQ(kv.num_used_pages(), 2);
  EXPECT_INVARIANTS(kv);

  // The child writes into the shared partial page: it gets a private copy first.
  EXPECT_EQ(kv.appendable_tokens(2), 2 + 5 * 4);
  auto a = kv.append(2, 1);
  ASSERT_TRUE(a);
  ASSERT_TRUE(a->copy_on_write);
  EXPECT_EQ(*a->copy_on_write, (PageCopy{1, 2}));
  EXPECT_EQ(a->num_new_pages, 0);
  EXPECT_EQ(pages_of(kv, 2), (Pages{0, 2}));
  EXPECT_EQ(kv.refcount(1), 1);
  EXPECT_EQ(kv.refcount(2), 1);
  EXPECT_EQ(kv.refcount(0), 2);
  // The parent's last page is private again: no copy.
  auto b = kv.append(1, 2);
  ASSERT_TRUE(b);
  EXPECT_FALSE(b->copy_on_write);
  EXPECT_EQ(pages_of(kv, 1), (Pages{0, 1}));
  EXPECT_INVARIANTS(kv);

  // Page 0 is freed only when its last holder lets go.
  auto r1 = kv.release(1);
  ASSERT_TRUE(r1);
  EXPECT_EQ(r1->references_dropped, 2);
  EXPECT_EQ(r1->pages_freed, 1);  // page 1
  EXPECT_EQ(kv.refcount(0), 1);
  auto r2 = kv.release(2);
  ASSERT_TRUE(r2);
  EXPECT_EQ(r2->pages_freed, 2);
  EXPECT_EQ(kv.free_pages_in_order(), (Pages{3, 4, 5, 6, 7, 1, 2, 0}));
  EXPECT_INVARIANTS(kv);
}

TEST(KVCacheManager, ForkAtAPageBoundaryNeedsNoCopy) {
  KVCacheManager kv = make(8);
  ASSERT_TRUE(kv.open(1, 16).ok());
  ASSERT_TRUE(kv.append(1, 8));
  ASSERT_TRUE(kv.fork(1, 2).ok());
  auto a = kv.append(2, 1);
  ASSERT_TRUE(a);
  EXPECT_FALSE(a->copy_on_write);
  EXPECT_EQ(pages_of(kv, 2), (Pages{0, 1, 2}));
  EXPECT_INVARIANTS(kv);
}

TEST(KVCacheManager, CopyOnWriteDrawsFromTheReservationAndFailsCleanly) {
  KVCacheManager kv = make(3);
  ASSERT_TRUE(kv.open(1, 12).ok());
  ASSERT_TRUE(kv.append(1, 10));  // all 3 pages, last one partial
  ASSERT_TRUE(kv.fork(1, 2).ok());
  EXPECT_EQ(kv.appendable_tokens(2), 0) << "a shared partial page needs a copy, and none is free";
  EXPECT_FALSE(kv.append(2, 1));
  EXPECT_EQ(pages_of(kv, 2), (Pages{0, 1, 2}));
  EXPECT_EQ(kv.appendable_tokens(1), 0);
  EXPECT_INVARIANTS(kv);
}

class RecordingListener : public KVEvictionListener {
 public:
  void on_page_evicted(PageId page) override { evicted.push_back(page); }
  Pages evicted;
};

// The cached list walked page by page (the disk tier's write-ahead walk, which must not copy it).
Pages walk_cached(const KVCacheManager& kv) {
  Pages out;
  for (PageId p = kv.first_cached_page(); p != kNoPage; p = kv.next_cached_page(p))
    out.push_back(p);
  return out;
}

TEST(KVCacheManager, CacheablePagesAreKeptInLruOrderAndEvictedOnlyWhenNoFreePageIsLeft) {
  KVCacheManager kv = make(6);
  RecordingListener listener;
  kv.set_eviction_listener(&listener);
  ASSERT_TRUE(kv.open(1, 16).ok());
  ASSERT_TRUE(kv.append(1, 12));  // pages 0, 1, 2
  for (PageId p : {0, 1, 2}) ASSERT_TRUE(kv.mark_cacheable(p).ok());
  EXPECT_FALSE(kv.mark_cacheable(5).ok()) << "a free page has no content to keep";
  EXPECT_FALSE(kv.mark_cacheable(6).ok());
  auto r = kv.release(1);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->pages_cached, 3);
  EXPECT_EQ(r->pages_freed, 0);
  EXPECT_EQ(kv.cached_pages_in_order(), (Pages{2, 1, 0}));  // deepest page evicted first
  EXPECT_EQ(walk_cached(kv), (Pages{2, 1, 0}));
  EXPECT_EQ(kv.free_pages_in_order(), (Pages{3, 4, 5}));
  EXPECT_EQ(kv.num_cached_pages(), 3);
  EXPECT_EQ(kv.num_available_pages(), 6);
  EXPECT_EQ(kv.page_state(1), PageState::kCached);
  EXPECT_INVARIANTS(kv);

  // A prefix hit takes page 1 out of the middle of the cached list.
  ASSERT_TRUE(kv.open(2, 16).ok());
  ASSERT_TRUE(kv.share_page(2, 1).ok());
  EXPECT_EQ(kv.page_state(1), PageState::kUsed);
  EXPECT_EQ(kv.refcount(1), 1);
  EXPECT_EQ(kv.num_tokens(2), 4);
  EXPECT_EQ(kv.cached_pages_in_order(), (Pages{2, 0}));
  EXPECT_EQ(walk_cached(kv), (Pages{2, 0}));
  EXPECT_INVARIANTS(kv);

  // Free pages go first; then cached ones, least recently released first.
  ASSERT_TRUE(kv.append(2, 12));  // pages 3, 4, 5
  EXPECT_TRUE(listener.evicted.empty());
  ASSERT_TRUE(kv.append(2, 4));  // evicts 2
  EXPECT_EQ(listener.evicted, (Pages{2}));
  EXPECT_EQ(pages_of(kv, 2), (Pages{1, 3, 4, 5, 2}));
  EXPECT_EQ(kv.cached_pages_in_order(), (Pages{0}));
  EXPECT_INVARIANTS(kv);

  // Page 1 is still cacheable: it goes back to the cached list; the others are freed.
  auto r2 = kv.release(2);
  ASSERT_TRUE(r2);
  EXPECT_EQ(r2->pages_cached, 1);
  EXPECT_EQ(r2->pages_freed, 4);
  EXPECT_EQ(kv.cached_pages_in_order(), (Pages{0, 1}));
  EXPECT_EQ(walk_cached(kv), (Pages{0, 1}));
  EXPECT_EQ(kv.free_pages_in_order(), (Pages{2, 5, 4, 3}));
  EXPECT_INVARIANTS(kv);
}

TEST(KVCacheManager, SharePageChecksItsArguments) {
  KVCacheManager kv = make(4);
  ASSERT_TRUE(kv.open(1, 16).ok());
  ASSERT_TRUE(kv.append(1, 5));
  ASSERT_TRUE(kv.open(2, 16).ok());
  EXPECT_FALSE(kv.share_page(2, 3).ok()) << "free page";
  EXPECT_FALSE(kv.share_page(2, 9).ok()) << "no such page";
  EXPECT_FALSE(kv.share_page(3, 0).ok()) << "unknown sequence";
  ASSERT_TRUE(kv.share_page(2, 0).ok());  // a used, full page
  EXPECT_EQ(kv.refcount(0), 2);
  ASSERT_TRUE(kv.append(2, 1));
  EXPECT_FALSE(kv.share_page(2, 0).ok()) << "not at a page boundary";
  EXPECT_INVARIANTS(kv);
}

TEST(KVCacheManager, ACachedPageCannotBeTakenWhenEverySparePageIsReserved) {
  KVCacheManager kv = make(2);
  ASSERT_TRUE(kv.open(1, 4).ok());
  ASSERT_TRUE(kv.append(1, 4));
  ASSERT_TRUE(kv.mark_cacheable(0).ok());
  ASSERT_TRUE(kv.release(1));
  ASSERT_TRUE(kv.open(2, 8).ok());
  ASSERT_TRUE(kv.reserve(2, kv.estimate(8, 0)).ok());  // both pages promised
  ASSERT_TRUE(kv.open(3, 4).ok());
  EXPECT_FALSE(kv.share_page(3, 0).ok());
  EXPECT_INVARIANTS(kv);
}

// Random opens, reservations, appends, forks, cacheable marks and releases, checked against the
// invariants after every operation; at the end every page is free or cached with refcount 0.
TEST(KVCacheManager, RandomOperationsKeepTheInvariants) {
  for (uint32_t seed = 1; seed <= 8; ++seed) {
    std::mt19937 rng(seed);
    KVCacheManager kv = make(24, 1 + int32_t(seed % 5));
    std::vector<SeqId> open;
    SeqId next = 0;
    int64_t reserve_failures = 0, append_failures = 0;
    for (int op = 0; op < 3000; ++op) {
      int kind = int(rng() % 10);
      if (kind == 0 || open.empty()) {
        SeqId id = next++;
        ASSERT_TRUE(kv.open(id, 64).ok());
        open.push_back(id);
        if (rng() % 2) {
          KVUsageEstimate e = kv.estimate(int64_t(rng() % 40), int64_t(rng() % 20));
          Status s = kv.reserve(id, e);
          EXPECT_EQ(s.ok(), kv.reserved_pages(id) == e.num_pages);
          reserve_failures += !s.ok();
        }
      } else if (kind <= 5) {
        SeqId id = open[rng() % open.size()];
        int32_t n = int32_t(rng() % 7);
        int64_t before = kv.num_tokens(id);
        bool fits = kv.appendable_tokens(id) >= n;
        auto a = kv.append(id, n);
        EXPECT_EQ(bool(a), fits);
        EXPECT_EQ(kv.num_tokens(id), before + (a ? n : 0));
        append_failures += !a;
      } else if (kind == 6) {
        SeqId parent = open[rng() % open.size()];
        SeqId child = next++;
        ASSERT_TRUE(kv.fork(parent, child).ok());
        open.push_back(child);
      } else if (kind == 7) {
        auto pages = kv.pages(open[rng() % open.size()]);
        if (!pages.empty()) {
          ASSERT_TRUE(kv.mark_cacheable(pages[rng() % pages.size()]).ok());
        }
      } else {
        size_t i = rng() % open.size();
        ASSERT_TRUE(kv.release(open[i]));
        EXPECT_FALSE(kv.release(open[i]));
        open.erase(open.begin() + std::ptrdiff_t(i));
      }
      Status s = kv.check_invariants();
      ASSERT_TRUE(s.ok()) << "seed " << seed << " op " << op << ": " << s.message();
    }
    for (SeqId id : open) ASSERT_TRUE(kv.release(id));
    EXPECT_INVARIANTS(kv);
    EXPECT_EQ(kv.num_used_pages(), 0);
    EXPECT_EQ(kv.num_reserved_pages(), 0);
    EXPECT_EQ(kv.num_free_pages() + kv.num_cached_pages(), kv.num_pages());
    for (PageId p = 0; p < kv.num_pages(); ++p) EXPECT_EQ(kv.refcount(p), 0);
    EXPECT_GT(append_failures, 0) << "the test should reach full capacity";
  }
}

}  // namespace
}  // namespace drift
