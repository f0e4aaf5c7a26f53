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
// A reservation (guaranteed mode) promises a sequence pages for its worst case without binding
// page ids: it lowers num_available_pages() at once, and the sequence's appends draw page ids
// from it first. An append beyond a sequence's reservation (optimistic mode) takes only what is
// available; "cannot allocate" is a returned value, and the caller decides what to preempt.
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
  std::optional<PageCopy> copy_on_write;
};

// What a release did.
struct KVRelease {
  int32_t references_dropped = 0;    // the sequence's page list length
  int32_t pages_freed = 0;           // refcount reached 0: back to the free list
  int32_t pages_cached = 0;          // refcount reached 0 on a cacheable page: to the cached list
  int32_t reservation_returned = 0;  // reserved pages the sequence never bound
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
  KVUsageEstimate estimate(int64_t prompt_len, int64_t max_new_tokens) const;
  // Whether a new sequence with this estimate can be reserved now.
  bool can_reserve(const KVUsageEstimate& estimate) const {
    return estimate.num_pages <= num_available_pages();
  }

  // ---- Sequences ----

  // Starts an empty sequence. `max_tokens` sizes its page list up front so that appends up to
  // that length never allocate memory. Error if `seq` is already open.
  Status open(SeqId seq, int64_t max_tokens);
  // Tops the sequence's held plus reserved pages up to `estimate.num_pages`, binding no page id.
  // Error (nothing changes) if the sequence is not open or the pages are not available.
  Status reserve(SeqId seq, const KVUsageEstimate& estimate);
  // Grows the sequence by `num_tokens` token slots, adding pages when it crosses page boundaries
  // (from its reservation first, then from what is available) and replacing a shared partial last
  // page by a private copy. nullopt — nothing changes — when the pages are not available, or the
  // sequence is not open.
  std::optional<KVAppend> append(SeqId seq, int32_t num_tokens);
  // How many tokens an append to `seq` could take now. 0 for an unknown sequence.
  int64_t appendable_tokens(SeqId seq) const;
  // Pages an append of `num_tokens` to `seq` would take from the available pool (beyond its own
  // reservation; a copy-on-write page included). 0 for an unknown sequence.
  int64_t pool_pages_to_append(SeqId seq, int32_t num_tokens) const;
  // KV-Compress: the executor has moved the entries `seq` keeps into its first `num_tokens` slots
  // (every head the same count), rewriting slots [keep_from, num_tokens) in place. Drops the
  // pages past those slots (to the free list once no one else holds them) and, with
  // `keep_promise`, adds them to the sequence's reservation, so that a guaranteed sequence can
  // still grow to the estimate it was admitted with. Error, nothing changed: unknown sequence,
  // num_tokens beyond its tokens or below keep_from, or a page covering [keep_from, num_tokens)
  // that is shared or cacheable — compaction never writes a page another sequence or the prefix
  // cache reads (the scheduler keeps such pages below keep_from).
  Expected<KVRelease> compress(SeqId seq, int64_t keep_from, int64_t num_tokens, bool keep_promise);
  // Whether compressing `seq` from slot `keep_from` on would write a page that is shared or
  // cacheable (false for an unknown sequence).
  bool writes_shared_page(SeqId seq, int64_t keep_from) const;
  // Opens `child` sharing every page of `parent` (refcounts up), with the same token count and no
  // reservation. The first append into a shared partial last page makes a private copy.
  Status fork(SeqId parent, SeqId child);
  // Ends the sequence: drops its reference to every page it holds, exactly once, walking its list
  // from the back (so a prefix's deepest pages are evicted first), and returns its unbound
  // reservation. nullopt if the sequence is not open (never opened, or already released).
  std::optional<KVRelease> release(SeqId seq);

  bool contains(SeqId seq) const { return seqs_.contains(seq); }
  int32_t num_sequences() const { return static_cast<int32_t>(seqs_.size()); }
  // Page ids of the sequence in token order (empty for an unknown sequence). The span is valid
  // until the sequence's next append, fork source change or release.
  std::span<const PageId> pages(SeqId seq) const;
  int64_t num_tokens(SeqId seq) const;
  int32_t reserved_pages(SeqId seq) const;

  // ---- Pages ----

  int32_t refcount(PageId page) const { return refcount_[page]; }
  PageState page_state(PageId page) const;

  // ---- Hooks for the prefix cache (a later layer; nothing here depends on it) ----

  void set_eviction_listener(KVEvictionListener* listener) { eviction_listener_ = listener; }
  // Marks a used page so that when its refcount reaches 0 it becomes cached instead of free.
  Status mark_cacheable(PageId page);
  // Appends a full page that holds the next page_size tokens of `seq` (a prefix cache hit): the
  // page must be used or cached and `seq` must end at a page boundary. A cached page leaves the
  // cached list and becomes used.
  Status share_page(SeqId seq, PageId page);
  bool cacheable(PageId page) const { return cacheable_[page] != 0; }
  // Moves every cached page to the free list, least recently released first, telling the
  // eviction listener about each (a prefix cache flush). Returns how many pages moved.
  int32_t evict_all_cached();

  // ---- Checks (tests, debugging) ----

  // O(pages + sequences): lists linked and sized right, every page in exactly one state,
  // free + used + cached == total, each refcount equal to the number of page lists holding the
  // page, reservations summed right and covered by free + cached pages, each sequence holding
  // exactly the pages its token count needs.
  Status check_invariants() const;
  std::vector<PageId> free_pages_in_order() const { return lists_.to_vector(kFreeList); }
  std::vector<PageId> cached_pages_in_order() const { return lists_.to_vector(kCachedList); }

 private:
  static constexpr int32_t kFreeList = 0;
  static constexpr int32_t kCachedList = 1;

  struct Sequence {
    std::vector<PageId> pages;  // token t lives in pages[t / page_size] at slot t % page_size
    int64_t num_tokens = 0;
    int32_t reserved = 0;  // reserved pages not yet bound
  };

  KVCacheManager(const KVLayout& layout, int32_t num_pages);
  PageId take_page();  // precondition: a free or cached page exists
  void drop_reference(PageId page, KVRelease& counts);

  KVLayout layout_;
  int32_t num_pages_;
  std::vector<int32_t> refcount_;   // [num_pages]
  std::vector<uint8_t> cacheable_;  // [num_pages]: becomes cached, not free, at refcount 0
  PageLists lists_;                 // kFreeList and kCachedList
  int32_t num_reserved_ = 0;
  std::unordered_map<SeqId, Sequence> seqs_;
  KVEvictionListener* eviction_listener_ = nullptr;
};

}  // namespace drift
