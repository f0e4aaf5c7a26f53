// The disk tier under the prefix cache: a registered page that the pool reclaims (LRU) is
// written to the KVDiskStore before its bytes are reused; a waiting request whose cached prefix
// continues onto pages on disk has them read back into fresh pages, which are then registered in
// the prefix cache as if they had been computed, so that its admission hits them
// (docs/design-notes.md "A disk tier for the KV cache").
//
// A load holds its pages in a sequence of its own in the KV manager (ids from kLoaderSeqBase):
// the pages the request's RAM hit already covers (so that the chain its pages hang on cannot be
// evicted meanwhile) and the fresh pages the reads fill. No step's plan names them, so the I/O
// thread writes them while steps run. complete_loads() (the worker, at a step boundary)
// registers each page read good, in chain order up to the first failure, and releases the
// load's sequence: registered pages go to the cached list, the rest back to the free list. A
// page read back is exactly the file the reader expected (kv_disk_store.h), whose digest chain
// is the request's own tokens, and a failure only means recomputing.
//
// Only layouts of one KV group: with sliding-window groups a prefix needs a different set of
// pages per group (the engine refuses the tier there).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "kv/kv_cache_manager.h"
#include "kv/kv_disk_store.h"
#include "kv/kv_page_memory.h"
#include "kv/prefix_cache.h"
#include "util/error.h"

namespace drift {

// Sequence ids of loads: far above any request id the engine hands out.
inline constexpr SeqId kLoaderSeqBase = SeqId{0xD15C} << 48;

struct PrefixDiskTierStats {
  uint64_t loads = 0;                // reads started for a waiting request's prefix
  uint64_t pages_loaded = 0;         // read back good and registered
  uint64_t pages_load_failed = 0;    // read back bad (or after a bad one): recomputed
  uint64_t pages_spilled = 0;        // handed to the store's writer (at eviction or ahead of it)
  uint64_t spill_skipped = 0;        // not written: on disk already, or no staging slot free
  uint64_t pages_written_ahead = 0;  // handed to the writer while still cached (write_ahead)
  uint64_t swaps = 0;                // preempted sequences whose pages were swapped out
  uint64_t pages_swapped_out = 0;    // of their pages, handed to the writer (not on disk yet)
  uint64_t tails_swapped_out = 0;    // of those, partial last pages
  uint64_t tails_loaded = 0;         // partial last pages read back good for their sequence
};

// A swapped-out sequence's partial last page, read back for it and held by a sequence of the
// tier's own (`holder`) until its admission copies the page into one of its own (a plan's page
// copy) — or it is dropped.
struct SwapTail {
  SeqId waiter = 0;
  SeqId holder = 0;
  int32_t page_index = 0;  // of the page in the waiter's sequence
  int32_t num_tokens = 0;  // its tokens, fewer than a page
  PageId page = kNoPage;
};

class PrefixDiskTier final : public PrefixSpillListener {
 public:
  // Becomes `cache`'s spill listener and sets its digest seed (before any page is registered).
  // Error: a layout of more than one KV group, or page memory of another size than the store's.
  static Expected<std::unique_ptr<PrefixDiskTier>> create(KVCacheManager& kv, PrefixCache& cache,
                                                          KVDiskStore& store, KVPageMemory& memory);
  ~PrefixDiskTier() override;
  PrefixDiskTier(const PrefixDiskTier&) = delete;
  PrefixDiskTier& operator=(const PrefixDiskTier&) = delete;

  void on_prefix_page_evicted(const EvictedPrefixPage& page) override;

  // Hands the store the first `pages_at_risk` pages of the pool's eviction order that are not on
  // disk yet, as many as its free staging slots take (a cached page's bytes no longer change).
  // Called at a step boundary with the pages the next step may reclaim, so that a step that
  // reclaims more pages than the store has slots finds them written or staged, not dropped.
  // Returns pages queued.
  int32_t write_ahead(int32_t pages_at_risk);

  // What fetch did.
  enum class Fetch : uint8_t {
    kReading,     // reads started: the request should wait for complete_loads
    kNoneOnDisk,  // the disk holds none of the pages after the hit
    kNoRoom,      // it holds some, but the pool has no page to read them into now
  };
  // Starts reading the pages of `tokens` after `hit` (its `hit_pages`, one group) that the disk
  // holds, up to `max_pages` pages in all, for waiting request `waiter` — and, for a sequence
  // swapped out with `swapped_tokens` computed tokens, its partial last page when those pages
  // reach it (tail_for once read).
  Fetch fetch(SeqId waiter, uint64_t cache_namespace, std::span<const TokenId> tokens,
              const PrefixHit& hit, std::span<const PageId> hit_pages, int32_t max_pages,
              int32_t swapped_tokens = 0);
  // Preemption by swap (scheduler/preemption_cost.h): how many of the first `num_pages` full
  // pages of `tokens` the disk does not hold yet; and writing a preempted sequence's first
  // `num_tokens` tokens' pages (`pages`, group 0, their K/V written): its full pages under the
  // digests of its own tokens, registered in the prefix cache or not, so that its re-admission
  // reads them back through fetch like any prefix, and its partial last page for fetch to find
  // when given the same `num_tokens`. The writes wait for staging slots (a dropped page would be
  // recomputed, the cost the swap was chosen to avoid). Returns pages queued.
  int32_t pages_not_on_disk(uint64_t cache_namespace, std::span<const TokenId> tokens,
                            int32_t num_pages) const;
  int32_t swap_out(uint64_t cache_namespace, std::span<const TokenId> tokens,
                   std::span<const PageId> pages, int32_t num_tokens);
  // The partial last page read back for `waiter` (nullptr: none); take_tail hands it to the
  // waiter's admission (its holder lets go at the next complete_loads, after the step that
  // copied it), drop_tail lets go of it (not used, or the waiter ended) — at once, or when its
  // read ends.
  const SwapTail* tail_for(SeqId waiter) const;
  void take_tail(SeqId waiter);
  void drop_tail(SeqId waiter);

  // Whether a load for `waiter` is still reading.
  bool loading_for(SeqId waiter) const;
  // Registers the pages of every finished load and releases its sequence. Returns pages
  // registered.
  int32_t complete_loads();
  // Loads in flight.
  int32_t num_loads() const { return int32_t(loads_.size()); }
  // The sequences the tier holds open in the KV manager: loads and partial last pages.
  int32_t num_sequences_held() const {
    int32_t n = int32_t(loads_.size() + ready_tails_.size() + taken_tails_.size());
    for (const Load& load : loads_) n += load.tail.has_value();
    return n;
  }
  // Writes every cached page that is not on disk yet, waiting for staging slots (shutdown: what
  // RAM holds survives the restart). Returns pages queued.
  int32_t write_back_cached();

  const PrefixDiskTierStats& stats() const { return stats_; }
  KVDiskStore& store() { return store_; }
  const KVDiskStore& store() const { return store_; }

 private:
  PrefixDiskTier(KVCacheManager& kv, PrefixCache& cache, KVDiskStore& store, KVPageMemory& memory);

  struct Tail {
    SeqId holder = 0;
    int32_t page_index = 0;
    std::vector<TokenId> tokens;  // fewer than a page
    KVDigest digest;
    PageId page = kNoPage;
    uint64_t ticket = 0;
    bool good = false;       // read back and checked
    bool abandoned = false;  // its sequence ended while it was read (drop_tail)
  };
  struct Load {
    SeqId seq = 0;                // its own sequence in the KV manager
    SeqId waiter = 0;             // the request it reads for
    PrefixCursor cursor;          // the chain after the request's RAM hit
    std::vector<TokenId> tokens;  // [pages][page_size] of the pages read
    std::vector<KVDigest> digests;
    std::vector<PageId> pages;
    std::vector<uint64_t> tickets;
    std::vector<int8_t> state;  // per page: 0 reading, 1 good, -1 bad
    std::optional<Tail> tail;   // a swapped sequence's partial last page, after the pages
    int32_t pending = 0;
  };
  void finish(Load& load);
  std::optional<Tail> find_tail(uint64_t cache_namespace, std::span<const TokenId> tokens,
                                const KVDigest& parent, int32_t swapped_tokens) const;
  // Opens the tail's holder, takes its page and queues its read. False: no page.
  bool read_tail(Tail& tail, const KVDigest& parent, uint64_t cache_namespace);

  KVCacheManager& kv_;
  PrefixCache& cache_;
  KVDiskStore& store_;
  KVPageMemory& memory_;
  std::vector<Load> loads_;
  std::vector<SwapTail> ready_tails_;  // read back, waiting for their sequence's admission
  std::vector<SwapTail> taken_tails_;  // copied by the step being run: let go after it
  std::vector<std::pair<uint64_t, bool>> completed_;  // scratch
  SeqId next_seq_ = kLoaderSeqBase;
  PrefixDiskTierStats stats_;
};

}  // namespace drift
