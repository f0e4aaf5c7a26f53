// KVCacheManager over KV groups (docs/design-notes.md "Sliding-window KV groups"): one page list
// per group, a sliding group dropping the pages that leave its window at exact times, promises
// kept through who pays for a shared sliding page, and the invariants over thousands of random
// operations — with a sequence that holds a promise never failing an append within it.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <vector>

#include "kv/kv_cache_manager.h"

namespace drift {
namespace {

using Pages = std::vector<PageId>;
constexpr PageId X = kNoPage;

// Group 0 full attention, group 1 sliding with `window`; pages of `page_size` tokens.
KVCacheManager make(int32_t num_pages, int32_t page_size, int32_t window, int32_t num_sliding = 1) {
  KVLayout layout{.num_layers = 1, .num_kv_heads = 1, .head_dim = 4, .page_size = page_size};
  layout.groups = {KVGroup{0}};
  for (int32_t g = 0; g < num_sliding; ++g) layout.groups.push_back(KVGroup{window});
  auto kv = KVCacheManager::create(layout, num_pages);
  EXPECT_TRUE(kv.ok()) << kv.error().message;
  return std::move(kv).value();
}

Pages pages_of(const KVCacheManager& kv, SeqId seq, int32_t group) {
  auto span = kv.pages(seq, group);
  return Pages(span.begin(), span.end());
}

#define EXPECT_INVARIANTS(kv)             \
  do {                                    \
    Status s_ = (kv).check_invariants();  \
    EXPECT_TRUE(s_.ok()) << s_.message(); \
  } while (0)

TEST(KVSlidingGroups, EveryGroupGetsAPagePerPageOfTokens) {
  KVCacheManager kv = make(16, 4, 6);
  ASSERT_TRUE(kv.open(1, 32).ok());
  auto a = kv.append(1, 5);  // tokens 0-4: two pages in each group, group 0 first
  ASSERT_TRUE(a);
  EXPECT_EQ(a->num_new_pages, 2);
  EXPECT_EQ(pages_of(kv, 1, 0), (Pages{0, 1}));
  EXPECT_EQ(pages_of(kv, 1, 1), (Pages{2, 3}));
  EXPECT_EQ(kv.held_pages(1), 4);
  EXPECT_EQ(kv.appendable_tokens(1), 3 + 12 / 2 * 4);  // slack, then 2 pages a page of tokens
  EXPECT_EQ(kv.pool_pages_to_append(1, 4), 2);
  EXPECT_INVARIANTS(kv);
}

TEST(KVSlidingGroups, PagesLeaveTheSlidingGroupExactlyWhenNoQueryCanSeeThem) {
  KVCacheManager kv = make(16, 4, 6);  // a query at p sees p-5 .. p
  ASSERT_TRUE(kv.open(1, 32).ok());
  ASSERT_TRUE(kv.append(1, 9));  // positions 0-8: pages 0,1,2 (full), 3,4,5 (sliding)
  // The next query, at 9, sees 4..9: page 3 (positions 0-3) is out of every window.
  KVRelease r = kv.free_outside_window(1, 9);
  EXPECT_EQ(r.references_dropped, 1);
  EXPECT_EQ(r.pages_freed, 1);
  EXPECT_EQ(pages_of(kv, 1, 1), (Pages{X, 4, 5}));
  EXPECT_EQ(pages_of(kv, 1, 0), (Pages{0, 1, 2}));  // full attention keeps everything
  EXPECT_EQ(kv.refcount(3), 0);
  EXPECT_EQ(kv.free_pages_in_order().back(), 3);
  // At 10 (sees 5..10) page 4 (4-7) still holds position 5..7: nothing more goes.
  EXPECT_EQ(kv.free_outside_window(1, 10).references_dropped, 0);
  ASSERT_TRUE(kv.append(1, 4));  // 9-12: page 6 (full), 7 (sliding)
  EXPECT_EQ(pages_of(kv, 1, 1), (Pages{X, 4, 5, 7}));
  // At 13 (sees 8..13) page 4 goes; freeing again is idempotent.
  EXPECT_EQ(kv.free_outside_window(1, 13).references_dropped, 1);
  EXPECT_EQ(kv.free_outside_window(1, 13).references_dropped, 0);
  EXPECT_EQ(pages_of(kv, 1, 1), (Pages{X, X, 5, 7}));
  EXPECT_EQ(kv.held_pages(1), 4 + 2);
  EXPECT_INVARIANTS(kv);
  // Release returns the rest, deepest first, the sliding group's page before group 0's.
  auto released = kv.release(1);
  ASSERT_TRUE(released);
  EXPECT_EQ(released->references_dropped, 6);
  const Pages order = kv.free_pages_in_order();
  EXPECT_EQ(Pages(order.end() - 6, order.end()), (Pages{7, 6, 5, 2, 1, 0}));
  EXPECT_INVARIANTS(kv);
}

TEST(KVSlidingGroups, AFreedCacheablePageGoesToTheCachedList) {
  KVCacheManager kv = make(16, 4, 4);
  ASSERT_TRUE(kv.open(1, 32).ok());
  ASSERT_TRUE(kv.append(1, 8));  // full 0,1; sliding 2,3
  ASSERT_TRUE(kv.mark_cacheable(2).ok());
  KVRelease r = kv.free_outside_window(1, 8);  // sees 5..8: page 2 (0-3) goes
  EXPECT_EQ(r.pages_cached, 1);
  EXPECT_EQ(kv.page_state(2), PageState::kCached);
  EXPECT_EQ(kv.cached_pages_in_order(), (Pages{2}));
  EXPECT_INVARIANTS(kv);
}

TEST(KVSlidingGroups, AGuaranteedSequenceIsPaidBackWhatItFrees) {
  // 4,096 tokens would take 2 x 256 pages; freeing, the sliding group holds at most
  // ceil((8 - 1 + 1 + 3) / 4) = 3 pages at steps of one token.
  KVCacheManager kv = make(40, 4, 8);
  const KVUsageEstimate e = kv.estimate(100, 0, /*max_step_tokens=*/1);
  EXPECT_EQ(e.num_pages, 25 + 3);
  EXPECT_EQ(kv.estimate(100, 0).num_pages, 50);  // without freeing
  ASSERT_TRUE(kv.open(1, 100).ok());
  ASSERT_TRUE(kv.reserve(1, e).ok());
  EXPECT_EQ(kv.reserved_pages(1), 28);
  // Another sequence takes everything else.
  ASSERT_TRUE(kv.open(2, 100).ok());
  ASSERT_TRUE(kv.append(2, int32_t(kv.appendable_tokens(2))));
  EXPECT_EQ(kv.num_available_pages(), 0);
  for (int32_t t = 0; t < 100; ++t) {
    ASSERT_TRUE(kv.append(1, 1)) << "token " << t;
    KVRelease r = kv.free_outside_window(1, t + 1);
    EXPECT_EQ(r.reservation_regained, r.pages_freed);
    ASSERT_EQ(kv.promised_pages(1), 28);
    ASSERT_LE(kv.held_pages(1) - pages_of(kv, 1, 0).size(), 3u);
  }
  EXPECT_EQ(kv.reserved_pages(1), 28 - 25 - 2);  // two sliding pages live at the end
  EXPECT_INVARIANTS(kv);
}

TEST(KVSlidingGroups, SharingPutsNoPageBelowASlidingWindow) {
  KVCacheManager kv = make(16, 4, 4);
  ASSERT_TRUE(kv.open(1, 32).ok());
  ASSERT_TRUE(kv.append(1, 12));        // full 0,1,2; sliding 3,4,5
  (void)kv.free_outside_window(1, 12);  // sees 9..12: pages 3, 4 go
  ASSERT_TRUE(kv.open(2, 32).ok());
  // A hit of 3 pages: group 0's, and in the sliding group only what position 12 sees.
  ASSERT_TRUE(kv.share_pages(2, Pages{0, X}).ok());
  ASSERT_TRUE(kv.share_pages(2, Pages{1, X}).ok());
  EXPECT_FALSE(kv.share_pages(2, Pages{X, 5}).ok()) << "a full group needs its page";
  EXPECT_FALSE(kv.share_pages(2, Pages{2}).ok()) << "one page per group";
  EXPECT_FALSE(kv.share_pages(2, Pages{2, 2}).ok()) << "one page in two groups";
  ASSERT_TRUE(kv.share_pages(2, Pages{2, 5}).ok());
  EXPECT_FALSE(kv.share_pages(2, Pages{X, X}).ok()) << "no hole after a held page";
  EXPECT_EQ(pages_of(kv, 2, 1), (Pages{X, X, 5}));
  EXPECT_EQ(kv.refcount(5), 2);
  EXPECT_EQ(kv.payer(5), SeqId{1});
  EXPECT_INVARIANTS(kv);
}

// A load from the disk tier appends rows that hold some pages from RAM and take others for its
// reads: every shared page leaves the cached list before a page is taken, so a take never
// evicts a page the rows share.
TEST(KVSlidingGroups, AppendRowsSharesBeforeItTakes) {
  KVCacheManager kv = make(6, 4, 4);
  ASSERT_TRUE(kv.open(1, 12).ok());
  ASSERT_TRUE(kv.append(1, 12));  // full 0,1,2; sliding 3,4,5: every page in use
  for (PageId p = 0; p < 6; ++p) ASSERT_TRUE(kv.mark_cacheable(p).ok());
  ASSERT_TRUE(kv.release(1));
  ASSERT_EQ(kv.cached_pages_in_order(), (Pages{5, 2, 4, 1, 3, 0})) << "last row, last group first";
  ASSERT_TRUE(kv.open(2, 12).ok());
  Pages row = {kTakePage, 5};  // page 5 is the first the pool would reclaim
  ASSERT_TRUE(kv.append_rows(2, row).ok());
  EXPECT_EQ(row, (Pages{2, 5})) << "the take reclaimed the page after it";
  EXPECT_EQ(pages_of(kv, 2, 0), (Pages{2}));
  EXPECT_EQ(pages_of(kv, 2, 1), (Pages{5}));
  EXPECT_EQ(kv.payer(5), SeqId{2});
  EXPECT_INVARIANTS(kv);

  const int32_t available = kv.num_available_pages();
  Pages full_group_without_page = {X, kTakePage};
  EXPECT_FALSE(kv.append_rows(2, full_group_without_page).ok());
  Pages hole_after_a_page = {kTakePage, X};
  EXPECT_FALSE(kv.append_rows(2, hole_after_a_page).ok());
  Pages too_many = {kTakePage, kTakePage, kTakePage, kTakePage, kTakePage, kTakePage};
  EXPECT_FALSE(kv.append_rows(2, too_many).ok()) << "4 pages are left";
  EXPECT_EQ(kv.num_available_pages(), available) << "nothing changed";
  EXPECT_EQ(kv.num_tokens(2), 4);
  ASSERT_TRUE(kv.open(3, 8).ok());
  Pages below_the_window = {0, X, kTakePage, kTakePage};  // two rows
  ASSERT_TRUE(kv.append_rows(3, below_the_window).ok());
  EXPECT_EQ(pages_of(kv, 3, 1)[0], X);
  EXPECT_EQ(kv.num_tokens(3), 8);
  EXPECT_INVARIANTS(kv);
}

TEST(KVSlidingGroups, ThePaymentForASharedSlidingPageMovesToTheHolderThatStays) {
  KVCacheManager kv = make(24, 4, 4);
  ASSERT_TRUE(kv.open(1, 32).ok());
  ASSERT_TRUE(kv.reserve(1, kv.estimate(24, 0, 4)).ok());
  ASSERT_TRUE(kv.append(1, 8));  // full 0,1; sliding 2,3
  ASSERT_TRUE(kv.open(2, 32).ok());
  ASSERT_TRUE(kv.share_pages(2, Pages{0, 2}).ok());
  ASSERT_TRUE(kv.share_pages(2, Pages{1, 3}).ok());
  // Sequence 2 shares sliding pages it does not pay for: its promise counts them not.
  const int64_t promised2_before = kv.promised_pages(2);
  EXPECT_EQ(promised2_before, 2);  // its two full pages, held for good
  ASSERT_TRUE(kv.reserve(2, kv.estimate(24, 0, 4)).ok());
  const int32_t reserved1 = kv.reserved_pages(1), reserved2 = kv.reserved_pages(2);
  // Sequence 1 moves on: page 2 leaves its window; sequence 2 still holds it.
  KVRelease r = kv.free_outside_window(1, 8);
  EXPECT_EQ(r.references_dropped, 1);
  EXPECT_EQ(r.pages_freed, 0);
  EXPECT_EQ(r.reservation_regained, 1);
  EXPECT_EQ(kv.payer(2), SeqId{2});
  EXPECT_EQ(kv.reserved_pages(1), reserved1 + 1);
  EXPECT_EQ(kv.reserved_pages(2), reserved2 - 1);
  EXPECT_EQ(kv.num_reserved_pages(), reserved1 + reserved2);
  // Sequence 2 drops it too: now it returns to the pool and pays sequence 2 back.
  r = kv.free_outside_window(2, 8);
  EXPECT_EQ(r.pages_freed, 1);
  EXPECT_EQ(r.reservation_regained, 1);
  EXPECT_EQ(kv.reserved_pages(2), reserved2);
  EXPECT_FALSE(kv.payer(2));
  // A payer that ends leaves a shared page unpaid; its holder dropping it later gains nothing.
  ASSERT_TRUE(kv.release(1));
  EXPECT_FALSE(kv.payer(3));
  EXPECT_EQ(kv.refcount(3), 1);
  r = kv.free_outside_window(2, 12);
  EXPECT_EQ(r.pages_freed, 1);
  EXPECT_EQ(r.reservation_regained, 0);
  EXPECT_INVARIANTS(kv);
}

TEST(KVSlidingGroups, CopyOnWriteCopiesTheSharedPartialPageOfEveryGroup) {
  KVCacheManager kv = make(16, 4, 8, /*num_sliding=*/2);
  ASSERT_TRUE(kv.open(1, 32).ok());
  ASSERT_TRUE(kv.append(1, 6));  // group 0: 0,1; group 1: 2,3; group 2: 4,5
  ASSERT_TRUE(kv.fork(1, 2).ok());
  std::vector<PageCopy> copies;
  auto a = kv.append(2, 1, &copies);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->num_copies, 3);
  EXPECT_EQ(copies, (std::vector<PageCopy>{{1, 6}, {3, 7}, {5, 8}}));
  EXPECT_EQ(a->copy_on_write, (PageCopy{1, 6}));
  EXPECT_EQ(pages_of(kv, 2, 2), (Pages{4, 8}));
  EXPECT_EQ(kv.refcount(5), 1);
  EXPECT_INVARIANTS(kv);
}

TEST(KVSlidingGroups, CompressDropsTheSamePagesInEveryGroup) {
  KVCacheManager kv = make(16, 4, 100);
  ASSERT_TRUE(kv.open(1, 32).ok());
  ASSERT_TRUE(kv.reserve(1, kv.estimate(16, 0)).ok());
  ASSERT_TRUE(kv.append(1, 14));  // 4 pages a group
  auto r = kv.compress(1, 0, 6, /*keep_promise=*/true);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->references_dropped, 4);
  EXPECT_EQ(pages_of(kv, 1, 0).size(), 2u);
  EXPECT_EQ(pages_of(kv, 1, 1).size(), 2u);
  EXPECT_EQ(kv.promised_pages(1), 8);
  EXPECT_INVARIANTS(kv);
}

// Random operations over two or three groups: sequences with a promise (reserved for their
// final length at steps of at most `step` tokens, freeing after each step), prefix shares of a
// running sequence's pages, forks, cacheable marks, compressions, releases. Invariants after
// every operation; and without forks or sequences lacking a promise, a promised sequence never
// fails an append within its estimate, whatever it shares and whoever drops what first.
struct RandomCounts {
  int64_t appends = 0, freed = 0, shared_sliding = 0, moved_payments = 0;
};

class RandomOperations {
 public:
  RandomOperations(uint32_t seed, bool only_promised, RandomCounts& counts)
      : seed_(seed),
        only_promised_(only_promised),
        counts_(counts),
        rng_(seed),
        page_size_(1 + int32_t(rng_() % 4)),
        window_(1 + int32_t(rng_() % 12)),
        step_(1 + int32_t(rng_() % 6)),
        kv_(make(120, page_size_, window_, 1 + int32_t(seed % 2))) {}

  void run() {
    for (op_ = 0; op_ < 3000; ++op_) {
      const int kind = int(rng_() % 14);
      if (kind <= 1 || live_.empty()) {
        admit();
      } else if (kind <= 8) {
        grow();
      } else if (kind == 9 && !only_promised_) {
        fork();
      } else if (kind == 9) {
        take_what_is_available();
      } else if (kind == 10) {
        mark_cacheable();
      } else if (kind == 11) {
        compress();
      } else {
        release();
      }
      if (::testing::Test::HasFatalFailure()) return;
      check();
      if (::testing::Test::HasFatalFailure()) return;
    }
    for (const auto& entry : live_) ASSERT_TRUE(kv_.release(entry.first));
    EXPECT_INVARIANTS(kv_);
    EXPECT_EQ(kv_.num_used_pages(), 0);
    EXPECT_EQ(kv_.num_reserved_pages(), 0);
  }

 private:
  struct Live {
    int64_t final_len = 0;  // appends within it never fail (a promise, without forks)
    bool promised = false;
    bool compressed = false;  // compressed once: never frees by window again
    bool hog = false;         // takes what is available; shares nothing with anyone
  };

  SeqId pick() {
    auto it = live_.begin();
    std::advance(it, rng_() % live_.size());
    return it->first;
  }

  // A sequence without a promise takes every available page: a promise must not count on them.
  void take_what_is_available() {
    const SeqId id = next_++;
    ASSERT_TRUE(kv_.open(id, 1 << 14).ok());
    const auto n = int32_t(kv_.appendable_tokens(id));
    if (n == 0 || !kv_.append(id, n)) {
      ASSERT_TRUE(kv_.release(id));
    } else {
      live_[id] = Live{0, false, false, true};
    }
  }

  // Admit: maybe share the full pages of a running sequence's prefix (as a hit would: what it
  // holds, kNoPage where its sliding groups freed), then reserve the worst case.
  void admit() {
    const SeqId id = next_++;
    ASSERT_TRUE(kv_.open(id, 256).ok());
    if (!live_.empty() && rng_() % 2) {
      const SeqId from = pick();
      const int64_t full = kv_.num_tokens(from) / page_size_;
      const bool donor = !live_[from].compressed && !live_[from].hog;
      const int64_t n = donor ? int64_t(rng_() % uint32_t(full + 1)) : 0;
      for (int64_t i = 0; i < n; ++i) {
        std::vector<PageId> row;
        for (int32_t g = 0; g < kv_.layout().num_groups(); ++g)
          row.push_back(kv_.pages(from, g)[size_t(i)]);
        if (!kv_.share_pages(id, row).ok()) break;
        for (size_t g = 1; g < row.size(); ++g) counts_.shared_sliding += row[g] != kNoPage;
      }
      (void)kv_.free_outside_window(id, kv_.num_tokens(id));
    }
    const int64_t final_len = kv_.num_tokens(id) + 1 + int64_t(rng_() % 80);
    const bool promise = only_promised_ || rng_() % 2;
    if (promise && !kv_.reserve(id, kv_.estimate(final_len, 0, step_)).ok()) {
      ASSERT_TRUE(kv_.release(id));
    } else {
      live_[id] = Live{final_len, promise, false};
    }
  }

  void grow() {
    if (only_promised_ && rng_() % 2) take_what_is_available();
    const SeqId id = pick();
    Live& seq = live_[id];
    // Mostly whole steps: the sliding groups then reach the most the estimate allows. A sequence
    // with a promise never grows past the length it was promised (the scheduler's never do): a
    // holder beyond its estimate could not pay for a page it shares.
    auto n = rng_() % 4 ? step_ : int32_t(1 + rng_() % uint32_t(step_));
    if (seq.promised) n = int32_t(std::min<int64_t>(n, seq.final_len - kv_.num_tokens(id)));
    if (n == 0) return;
    // (A compressed sequence frees no page by window: its promise is not this estimate.)
    const bool within = seq.promised && !seq.compressed && kv_.num_tokens(id) + n <= seq.final_len;
    const bool fits = kv_.appendable_tokens(id) >= n;
    auto a = kv_.append(id, n);
    ASSERT_EQ(bool(a), fits) << "seed " << seed_ << " op " << op_;
    if (only_promised_ && within)
      ASSERT_TRUE(a) << "seed " << seed_ << " op " << op_ << ": a promised append failed";
    counts_.appends += bool(a);
    if (a && !seq.compressed) {
      const KVRelease r = kv_.free_outside_window(id, kv_.num_tokens(id));
      counts_.freed += r.pages_freed + r.pages_cached;
      counts_.moved_payments += r.references_dropped - r.pages_freed - r.pages_cached;
    }
  }

  void fork() {
    const SeqId child = next_++;
    const SeqId parent = pick();
    ASSERT_TRUE(kv_.fork(parent, child).ok());
    live_[child] = Live{0, false, live_[parent].compressed, live_[parent].hog};
  }

  void mark_cacheable() {
    const SeqId id = pick();
    const auto group = int32_t(rng_() % uint32_t(kv_.layout().num_groups()));
    auto pages = kv_.pages(id, group);
    const PageId page = pages.empty() ? kNoPage : pages[rng_() % pages.size()];
    if (page != kNoPage) ASSERT_TRUE(kv_.mark_cacheable(page).ok());
  }

  // Compress a sequence that holds no freed page (its slots then stop being positions).
  void compress() {
    const SeqId id = pick();
    bool holes = false;
    for (int32_t g = 0; g < kv_.layout().num_groups(); ++g)
      holes |= !kv_.pages(id, g).empty() && kv_.pages(id, g)[0] == kNoPage;
    const int64_t tokens = kv_.num_tokens(id);
    if (holes || tokens == 0) return;
    const int64_t keep = int64_t(rng_() % uint32_t(tokens + 1));
    const int64_t promised = kv_.promised_pages(id);
    const bool writes_shared = kv_.writes_shared_page(id, 0);
    auto r = kv_.compress(id, 0, keep, live_[id].promised);
    ASSERT_EQ(r.ok(), !writes_shared);
    if (r.ok()) {
      live_[id].compressed = true;
      if (live_[id].promised) ASSERT_EQ(kv_.promised_pages(id), promised);
    }
  }

  void release() {
    const SeqId id = pick();
    ASSERT_TRUE(kv_.release(id));
    live_.erase(id);
    if (rng_() % 8 == 0) kv_.evict_all_cached();
  }

  void check() {
    Status s = kv_.check_invariants();
    ASSERT_TRUE(s.ok()) << "seed " << seed_ << " op " << op_ << ": " << s.message();
    // What the scheduler checks of a guaranteed sequence: its promise still covers its worst
    // case (a moved payment that went unpaid would leave it a page short).
    for (const auto& [id, seq] : live_)
      if (only_promised_ && seq.promised && !seq.compressed)
        ASSERT_GE(kv_.promised_pages(id), kv_.estimate(seq.final_len, 0, step_).num_pages)
            << "seed " << seed_ << " op " << op_ << " sequence " << id;
  }

  const uint32_t seed_;
  const bool only_promised_;
  RandomCounts& counts_;
  std::mt19937 rng_;
  const int32_t page_size_, window_, step_;
  KVCacheManager kv_;
  std::map<SeqId, Live> live_;
  SeqId next_ = 0;
  int op_ = 0;
};

void random_operations(uint32_t seed, bool only_promised, RandomCounts& counts) {
  RandomOperations(seed, only_promised, counts).run();
}

TEST(KVSlidingGroups, RandomOperationsKeepTheInvariants) {
  RandomCounts counts;
  for (uint32_t seed = 1; seed <= 12; ++seed) random_operations(seed, false, counts);
  EXPECT_GT(counts.appends, 8000);
  EXPECT_GT(counts.freed, 800);
  EXPECT_GT(counts.shared_sliding, 400);
  EXPECT_GT(counts.moved_payments, 100);
}

TEST(KVSlidingGroups, RandomOperationsKeepEveryPromise) {
  RandomCounts counts;
  for (uint32_t seed = 1; seed <= 12; ++seed) random_operations(seed, true, counts);
  EXPECT_GT(counts.appends, 5000);
  EXPECT_GT(counts.freed, 2000);
  EXPECT_GT(counts.shared_sliding, 200);
  EXPECT_GT(counts.moved_payments, 15);
}

}  // namespace
}  // namespace drift
