// The single owner of KV page ids. It hands pages to sequences, counts references to shared
// pages, holds reservations for guaranteed admission, and keeps every page in exactly one state:
//
//   free    refcount 0, content worthless; reused first
//   used    refcount > 0, in the page list of at least one sequence
//   cached  refcount 0, content kept for a later prefix cache hit; reclaimed, least recently
//           released first, only when no free page is left
//
// so that free + used + cached == total always holds (check_invariants() verifies it and much
// more). Free and cached pages sit in intrusive doubly linked lists: allocation takes the front
// of the free list, then the front of the cached list; a release appends to the back; a prefix
// hit takes a cached page out of the middle — all O(1), and the eviction order is exact.
//
// KV groups (kv_layout.h): a sequence holds one page list per group, every list as long as its
// tokens need; a page holds one group's layers. A sliding-window group drops the pages that left
// its window (free_outside_window), leaving kNoPage at their place.
//
// A reservation (guaranteed mode) promises a sequence pages for its worst case without binding
// page ids: it lowers num_available_pages() at once, and the sequence's appends draw page ids
// from it first. An append beyond a sequence's reservation (optimistic mode) takes only what is
// available; "cannot allocate" is a returned value, and the caller decides what to preempt.
// A sequence's promise is what it holds for good (its full groups' pages), the sliding pages it
// pays for (each used page has one payer: the sequence that took it from the pool), and its
// reservation: a page it drops mid-life is paid back into its reservation, by the pool when the
// page returns there, else by the holder the payment moves to (docs/design-notes.md
// "Sliding-window KV groups").
//
// Nothing here knows tensors; the executor maps page ids to memory.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "kv/kv_layout.h"
#include "kv/kv_types.h"
#include "kv/page_lists.h"
#include "util/error.h"

namespace drift {

enum class PageState : uint8_t { kFree, kUsed, kCached };

// In a page list: the page was freed (a sliding group's pages below its window) or never held.
inline constexpr PageId kNoPage = -1;
// In a row given to append_rows: a page to take from what is available.
inline constexpr PageId kTakePage = -2;

// Told when a cached page is reclaimed for reuse, so that whoever mapped content to it (the
// prefix cache) forgets the mapping. Called before the page id is handed out again.
class KVEvictionListener {
 public:
  virtual ~KVEvictionListener() = default;
  virtual void on_page_evicted(PageId page) = 0;
};

// What an append did.
struct KVAppend {
  int32_t num_new_pages = 0;  // page ids added to the end of the sequence's list
  // Set when the sequence's partial last page was shared: it now has a private copy at
  // copy_on_write->dst in its list, and the executor must copy src into dst before the step.
  // With several groups, the first group's copy; append() lists them all where asked.
  std::optional<PageCopy> copy_on_write;
  int32_t num_copies = 0;  // groups whose partial last page was copied
};

// What a release did.
struct KVRelease {
  int32_t references_dropped = 0;    // the sequence's page list length
  int32_t pages_freed = 0;           // refcount reached 0: back to the free list
  int32_t pages_cached = 0;          // refcount reached 0 on a cacheable page: to the cached list
  int32_t reservation_returned = 0;  // reserved pages the sequence never bound
  // free_outside_window / compress of a sequence with a promise: pages paid back into its
  // reservation (by the pool, or by the holder a payment moved to).
  int32_t reservation_regained = 0;
};

class KVCacheManager {
 public:
  // `num_pages` pages of `layout` (see kv_pages_for_budget), ids 0..num_pages-1, all free.
  static Expected<KVCacheManager> create(const KVLayout& layout, int32_t num_pages);

  const KVLayout& layout() const { return layout_; }
  int32_t page_size() const { return layout_.page_size; }
  int32_t num_pages() const { return num_pages_; }
  int32_t num_free_pages() const { return lists_.size(kFreeList); }
  int32_t num_cached_pages() const { return lists_.size(kCachedList); }
  int32_t num_used_pages() const { return num_pages_ - num_free_pages() - num_cached_pages(); }
  // Pages promised to reservations and not yet bound to a sequence.
  int32_t num_reserved_pages() const { return num_reserved_; }
  // free + cached - reserved: what a new reservation, or an append beyond one, may take.
  int32_t num_available_pages() const {
    return num_free_pages() + num_cached_pages() - num_reserved_;
  }

  // The worst case of a sequence with `prompt_len` prompt tokens that generates up to
  // `max_new_tokens`: K/V for prompt_len + max_new_tokens tokens (one more than is ever written,
  // since the last sampled token is not fed back — kept for simplicity and safety).
  // `max_step_tokens` set: the sequence frees its sliding groups' pages as they leave the window
  // and a step adds at most that many tokens (KVLayout::pages_to_hold); unset, every group holds
  // every token.
  KVUsageEstimate estimate(int64_t prompt_len, int64_t max_new_tokens,
                           std::optional<int64_t> max_step_tokens = std::nullopt) const;
  // Whether a new sequence with this estimate can be reserved now.
  bool can_reserve(const KVUsageEstimate& estimate) const {
    return estimate.num_pages <= num_available_pages();
  }

  // ---- Sequences ----

  // Starts an empty sequence. `max_tokens` sizes its page list up front so that appends up to
  // that length never allocate memory. Error if `seq` is already open.
  Status open(SeqId seq, int64_t max_tokens);
  // Tops the sequence's promise (promised_pages) up to `estimate.num_pages`, binding no page id,
  // and makes it a sequence with a promise: pages it drops mid-life are paid back into its
  // reservation. Error (nothing changes) if the sequence is not open or the pages are not
  // available.
  Status reserve(SeqId seq, const KVUsageEstimate& estimate);
  // Grows the sequence by `num_tokens` token slots, adding a page to every group when it crosses a
  // page boundary (from its reservation first, then from what is available) and replacing a
  // shared partial last page by a private copy; every copy is appended to `copies` when given.
  // nullopt — nothing changes — when the pages are not available, or the sequence is not open.
  std::optional<KVAppend> append(SeqId seq, int32_t num_tokens,
                                 std::vector<PageCopy>* copies = nullptr);
  // Drops, in every sliding group, the pages wholly below `next_position` - window + 1: no query
  // at `next_position` or later sees them. A page no one else holds returns to the pool (cached
  // if cacheable); a sequence with a promise regains what it paid for them (see the top). Zero
  // counts for an unknown sequence or a layout without sliding groups.
  KVRelease free_outside_window(SeqId seq, int64_t next_position);
  // How many tokens an append to `seq` could take now. 0 for an unknown sequence.
  int64_t appendable_tokens(SeqId seq) const;
  // Pages an append of `num_tokens` to `seq` would take from the available pool (beyond its own
  // reservation; a copy-on-write page included). 0 for an unknown sequence.
  int64_t pool_pages_to_append(SeqId seq, int32_t num_tokens) const;
  // KV-Compress: the executor has moved the entries `seq` keeps into its first `num_tokens` slots
  // (every head of every group the same count), rewriting slots [keep_from, num_tokens) in
  // place. Drops every group's pages past those slots (to the free list) and, with
  // `keep_promise`, adds them to the sequence's reservation, so that a guaranteed sequence can
  // still grow to the estimate it was admitted with. Error, nothing changed: unknown sequence,
  // num_tokens beyond its tokens or below keep_from, or a page covering [keep_from, num_tokens)
  // that is shared or cacheable — compaction never writes a page another sequence or the prefix
  // cache reads (the scheduler keeps such pages below keep_from).
  Expected<KVRelease> compress(SeqId seq, int64_t keep_from, int64_t num_tokens, bool keep_promise);
  // Whether compressing `seq` from slot `keep_from` on would write a page that is shared or
  // cacheable (false for an unknown sequence).
  bool writes_shared_page(SeqId seq, int64_t keep_from) const;
  // Opens `child` sharing every page of `parent` in every group (refcounts up), with the same token
  // count and no reservation. The first append into a shared partial last page makes a private
  // copy.
  Status fork(SeqId parent, SeqId child);
  // Ends the sequence: drops its reference to every page it holds, exactly once, walking its lists
  // from the back, the last group first at each index (so a prefix's deepest pages are evicted
  // first, and group 0's page, which the others' prefix cache entries hang on, after them), and
  // returns its unbound reservation. nullopt if the sequence is not open (never opened, or
  // already released).
  std::optional<KVRelease> release(SeqId seq);

  bool contains(SeqId seq) const { return seqs_.contains(seq); }
  int32_t num_sequences() const { return static_cast<int32_t>(seqs_.size()); }
  // Page ids of the sequence's group `group` in token order, kNoPage where a sliding group freed
  // them (empty for an unknown sequence). The span is valid until the sequence's next append,
  // fork source change or release.
  std::span<const PageId> pages(SeqId seq, int32_t group = 0) const;
  int64_t num_tokens(SeqId seq) const;
  int32_t reserved_pages(SeqId seq) const;
  // Pages the sequence holds over every group (kNoPage entries not counted).
  int64_t held_pages(SeqId seq) const;
  // Its full groups' pages, the sliding pages it pays for, and its reservation: the most pages it
  // can hold at once without taking from what is available.
  int64_t promised_pages(SeqId seq) const;

  // ---- Pages ----

  int32_t refcount(PageId page) const { return refcount_[page]; }
  PageState page_state(PageId page) const;

  // ---- Hooks for the prefix cache (a later layer; nothing here depends on it) ----

  void set_eviction_listener(KVEvictionListener* listener) { eviction_listener_ = listener; }
  // Marks a used page so that when its refcount reaches 0 it becomes cached instead of free.
  Status mark_cacheable(PageId page);
  // Appends full pages that hold the next page_size tokens of `seq` (a prefix cache hit), one per
  // group: each used or cached, or kNoPage for a sliding group that holds no page so far (below
  // its window); `seq` must end at a page boundary. A cached page leaves the cached list, becomes
  // used and is paid by `seq`. Nothing changes on error.
  Status share_pages(SeqId seq, std::span<const PageId> page_of_group);
  // The same for a layout of one group.
  Status share_page(SeqId seq, PageId page) { return share_pages(seq, {&page, 1}); }
  // Appends `rows.size() / num_groups` full pages to every group of `seq` (at a page boundary),
  // row by row ([pages][num_groups]): each entry shared as share_pages does (used or cached, or
  // kNoPage in a sliding group that holds none so far), or kTakePage: a page taken from what is
  // available (never a reservation) and written into the row, paid by `seq` (a read from a
  // slower tier fills it). Every shared page leaves the cached list before any page is taken, so
  // no taken page evicts one the rows share. Nothing changes on error.
  Status append_rows(SeqId seq, std::span<PageId> rows);
  // The sequence that pays for a used page (nullopt: none, or a page not in use).
  std::optional<SeqId> payer(PageId page) const;
  bool cacheable(PageId page) const { return cacheable_[page] != 0; }
  // Moves every cached page to the free list, least recently released first, telling the
  // eviction listener about each (a prefix cache flush). Returns how many pages moved.
  int32_t evict_all_cached();

  // ---- Checks (tests, debugging) ----

  // O(pages + sequences): lists linked and sized right, every page in exactly one state,
  // free + used + cached == total, each refcount equal to the number of page lists holding the
  // page, a page in one group only, reservations summed right and covered by free + cached
  // pages, each sequence's lists as long as its token count needs with kNoPage only at the front
  // of a sliding group's, each payer a holder of its page and each sequence's count of paid
  // pages right.
  Status check_invariants() const;
  std::vector<PageId> free_pages_in_order() const { return lists_.to_vector(kFreeList); }
  std::vector<PageId> cached_pages_in_order() const { return lists_.to_vector(kCachedList); }
  // The cached list in eviction order without a copy: the page the pool reclaims first, and the
  // one it reclaims after `page` (kNoPage: none).
  PageId first_cached_page() const { return lists_.front(kCachedList).value_or(kNoPage); }
  PageId next_cached_page(PageId page) const { return lists_.next(page).value_or(kNoPage); }

 private:
  static constexpr int32_t kFreeList = 0;
  static constexpr int32_t kCachedList = 1;

  static constexpr SeqId kNoPayer = ~SeqId{0};

  struct GroupPages {
    // Token t's K/V of this group's layers is in pages[t / page_size] at slot t % page_size;
    // pages[0, first_live) are kNoPage (freed below a sliding window, or never held).
    std::vector<PageId> pages;
    int32_t first_live = 0;
  };
  struct Sequence {
    std::vector<GroupPages> groups;  // [num_groups], every list pages_for_tokens(num_tokens) long
    int64_t num_tokens = 0;
    int32_t reserved = 0;   // reserved pages not yet bound
    int32_t paid = 0;       // sliding-group pages it holds and pays for
    bool promised = false;  // reserve() was called: dropped pages are paid back
  };

  KVCacheManager(const KVLayout& layout, int32_t num_pages);
  PageId take_page(SeqId payer);  // precondition: a free or cached page exists
  void drop_reference(PageId page, KVRelease& counts);
  // Drops `seq`'s reference to `page`, its page `index` of sliding group `group` (where other
  // holders hold it too), mid-life, settling who pays for it (see the top).
  void drop_sliding_page(SeqId seq, Sequence& s, int32_t group, size_t index, PageId page,
                         KVRelease& counts);
  int64_t promised(const Sequence& s) const;
  // Groups whose partial last page another sequence holds (an append copies them first).
  int32_t shared_partial_pages(const Sequence& s) const;
  // Whether append_rows may append `rows` to `s`, counting the pages they take from the pool.
  Status check_rows(const Sequence& s, SeqId seq, std::span<const PageId> rows,
                    int64_t& from_pool) const;

  KVLayout layout_;
  int32_t num_pages_;
  std::vector<int32_t> refcount_;   // [num_pages]
  std::vector<uint8_t> cacheable_;  // [num_pages]: becomes cached, not free, at refcount 0
  std::vector<SeqId> payer_;        // [num_pages]: who pays for a used page (kNoPayer: none)
  PageLists lists_;                 // kFreeList and kCachedList
  int32_t num_reserved_ = 0;
  std::unordered_map<SeqId, Sequence> seqs_;
  std::vector<PageId> copy_scratch_;  // [num_groups] append's private copies, before they replace
  std::vector<PageId> row_scratch_;   // [num_groups] share_pages' row for append_rows
  mutable std::vector<uint8_t> held_scratch_;  // [num_groups] check_rows: a page held so far
  KVEvictionListener* eviction_listener_ = nullptr;
};

}  // namespace drift
