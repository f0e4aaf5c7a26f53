// The disk tier under the prefix cache: a registered page that the pool reclaims (LRU) is
// written to the KVDiskStore before its bytes are reused; a waiting request whose cached prefix
// continues onto pages on disk has them read back into fresh pages, which are then registered in
// the prefix cache as if they had been computed, so that its admission hits them
// (docs/design-notes.md "A disk tier for the KV cache", and part 3 for KV groups).
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
// KV groups (sliding-window layers, kv_layout.h): the unit is a page row, one page per group. A
// page of group g > 0 is spilled when the pool reclaims it, like a group-0 page (a sliding page
// left its window onto the cached list long before its row's group-0 page), and is named on disk
// by (its row's group-0 digest, g). A load reads the rows after the RAM hit that every full
// group has (group 0's page from RAM while RAM's chain goes on, else from disk) and, of the
// sliding groups, only the pages a query after the rows sees — cut back to the longest run whose
// windows are whole, as PrefixCache::lookup does in RAM — so that the request's next lookup hits
// them all.
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

// A swapped-out sequence's partial last page row, read back for it and held by a sequence of the
// tier's own (`holder`, one page per group: kv.pages(holder, g)[0]) until its admission copies
// the pages into its own (a plan's page copies) — or it is dropped.
struct SwapTail {
  SeqId waiter = 0;
  SeqId holder = 0;
  int32_t page_index = 0;  // of the row in the waiter's sequence
  int32_t num_tokens = 0;  // its tokens, fewer than a page
};

// What swapping a preempted sequence out moves: the pages it holds for its computed tokens (every
// group's live pages, its partial last row too), all read back at re-admission, and of those the
// ones the disk does not hold yet.
struct SwapPages {
  int32_t pages = 0;
  int32_t to_write = 0;
};

class PrefixDiskTier final : public PrefixSpillListener {
 public:
  // Becomes `cache`'s spill listener and sets its digest seed (before any page is registered).
  // Error: page memory of another size than the store's.
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
    kNoneOnDisk,  // RAM and the disk together hold no longer run (whole windows) than the hit
    kNoRoom,      // they do, but the pool has no room to read it into now
  };
  // How much of that run a load may read when the pool cannot take all of it now: the longest
  // part it can (the rest is computed), or nothing (kNoRoom; the request may wait for room).
  // A swapped sequence's load is always whole.
  enum class LoadShape : uint8_t { kWhatFits, kWhole };
  // The run the last fetch found after the hit, whole, whatever it then read: its rows and the
  // pages of the pool they take (a read page, or a RAM page taken off the cached list).
  struct Offer {
    int32_t rows = 0;
    int64_t pool_pages = 0;
  };
  // Starts reading the page rows of `tokens` after `hit` (`hit_pages`: its rows,
  // [hit.num_pages][num_groups] as PrefixCache::lookup gives them) that RAM and the disk hold
  // together, up to `max_pages` rows in all, for waiting request `waiter` — and, for a sequence
  // swapped out with `swapped_tokens` computed tokens, its partial last row when those rows
  // reach it (tail_for once read).
  Fetch fetch(SeqId waiter, uint64_t cache_namespace, std::span<const TokenId> tokens,
              const PrefixHit& hit, std::span<const PageId> hit_pages, int32_t max_pages,
              int32_t swapped_tokens = 0, LoadShape shape = LoadShape::kWhatFits);
  const Offer& last_offer() const { return offer_; }
  // Preemption by swap (scheduler/preemption_cost.h), of sequence `seq` whose first `num_tokens`
  // tokens' K/V are written: what it moves; and writing its live pages (the pages it freed below
  // a sliding window are registered, in RAM or on disk like any) under the digests of its own
  // tokens, registered in
  // the prefix cache or not, so that its re-admission reads them back through fetch like any
  // prefix, and its partial last row for fetch to find when given the same `num_tokens`. The
  // writes wait for staging slots (a dropped page would be recomputed, the cost the swap was
  // chosen to avoid). Returns pages queued.
  SwapPages swap_pages(SeqId seq, uint64_t cache_namespace, std::span<const TokenId> tokens,
                       int32_t num_tokens) const;
  int32_t swap_out(SeqId seq, uint64_t cache_namespace, std::span<const TokenId> tokens,
                   int32_t num_tokens);
  // The partial last page read back for `waiter` (nullptr: none); take_tail hands it to the
  // waiter's admission (its holder lets go at the next complete_loads, after the step that
  // copied it), drop_tail lets go of it (not used, or the waiter ended) — at once, or when its
  // read ends.
  const SwapTail* tail_for(SeqId waiter) const;
  void take_tail(SeqId waiter);
  void drop_tail(SeqId waiter);

  // Whether a load for `waiter` is still reading.
  bool loading_for(SeqId waiter) const;
  // Whether another request's load is reading the page row that follows `hit` for these
  // `tokens` (the sequence's whole token list): a second request for the same document waits
  // for those pages to join the prefix cache instead of reading them into pages of its own.
  bool loading_after(const PrefixCursor& hit, std::span<const TokenId> tokens) const;
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

  // Where fetch finds each page of the rows after a RAM hit (survey): rows [first, end), every
  // full group's page in RAM or on disk; a sliding group's page perhaps in neither.
  struct RowSurvey {
    int32_t first = 0;
    int32_t end = 0;
    std::vector<KVDigest> digests;  // [end - first + 1]: before row `first`, then after each row
    std::vector<PageId> ram;        // [end - first][groups]: a registered page (kNoPage: none)
    std::vector<uint8_t> on_disk;   // [end - first][groups]: the store holds it (where not in RAM)
  };
  // What a load reads or holds of one page.
  enum class PageRead : int8_t { kNone, kHeld, kReading, kGood, kBad };
  struct Tail {
    SeqId holder = 0;
    int32_t page_index = 0;
    std::vector<TokenId> tokens;  // fewer than a page
    KVDigest digest;
    std::vector<uint64_t> tickets;  // [groups]
    int32_t pending = 0;            // reads not finished
    bool good = true;               // every finished read checked good
    bool abandoned = false;         // its sequence ended while it was read (drop_tail)
  };
  struct Load {
    SeqId seq = 0;                      // its own sequence in the KV manager
    SeqId waiter = 0;                   // the request it reads for
    PrefixCursor cursor;                // the chain after the request's RAM hit
    std::vector<TokenId> tokens;        // [rows][page_size] of the rows after the hit
    std::vector<PageId> rows;           // [rows][groups]: their pages (kNoPage: none needed)
    std::vector<PageRead> reads;        // [rows][groups]
    std::vector<uint64_t> tickets;      // of the reads, in order
    std::vector<int32_t> ticket_pages;  // the index in `rows` each ticket fills
    std::optional<Tail> tail;           // a swapped sequence's partial last row, after the rows
    int32_t pending = 0;
  };

  // Fills survey_: the rows after `hit` that every full group has, up to `max_pages`.
  void survey(uint64_t cache_namespace, std::span<const TokenId> tokens, const PrefixHit& hit,
              int32_t max_pages);
  // Whether the survey has page (row i, group g) in RAM or on disk; whether a resume after `n`
  // rows needs it.
  bool available(int32_t i, int32_t g) const;
  bool needed(int32_t i, int32_t g, int32_t n) const;
  // The longest run of at most `n` rows whose sliding groups' windows the survey has whole.
  int32_t servable(int32_t n) const;
  // Pages a load of `n` rows takes from the pool: reads, and cached pages it holds.
  int64_t pool_pages(int32_t n, std::span<const PageId> hit_pages) const;
  // Opens the load's sequence over `n` rows (holding what RAM has, taking pages for the reads)
  // and queues its reads. False: no room after all.
  bool start_load(Load& load, int32_t n, std::span<const PageId> hit_pages,
                  std::span<const TokenId> tokens, uint64_t cache_namespace);
  void finish(Load& load);
  std::optional<Tail> find_tail(uint64_t cache_namespace, std::span<const TokenId> tokens,
                                const KVDigest& parent, int32_t swapped_tokens) const;
  // Opens the tail's holder, takes its row and queues its reads. False: no pages.
  bool read_tail(Tail& tail, const KVDigest& parent, uint64_t cache_namespace);
  // A fresh sequence id of the tier's own.
  SeqId next_sequence();
  // Marks a finished read `ticket` in the load or tail it belongs to.
  void complete_read(uint64_t ticket, bool ok);

  KVCacheManager& kv_;
  PrefixCache& cache_;
  KVDiskStore& store_;
  KVPageMemory& memory_;
  std::vector<Load> loads_;
  std::vector<SwapTail> ready_tails_;  // read back, waiting for their sequence's admission
  std::vector<SwapTail> taken_tails_;  // copied by the step being run: let go after it
  std::vector<std::pair<uint64_t, bool>> completed_;  // scratch
  RowSurvey survey_;                                  // fetch's, reused
  Offer offer_;                                       // last_offer
  std::vector<PageId> match_scratch_;                 // survey's
  std::vector<PageId> row_scratch_;                   // start_load's rows
  SeqId next_seq_ = kLoaderSeqBase;
  PrefixDiskTierStats stats_;
};

}  // namespace drift
