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

  // Starts reading the pages of `tokens` after `hit` (its `hit_pages`, one group) that the disk
  // holds, up to `max_pages` pages in all, for waiting request `waiter`. True if reads started
  // (the request should wait for complete_loads); false if the disk has none of them or the pool
  // has no pages to read into.
  bool fetch(SeqId waiter, uint64_t cache_namespace, std::span<const TokenId> tokens,
             const PrefixHit& hit, std::span<const PageId> hit_pages, int32_t max_pages);
  // Whether a load for `waiter` is still reading.
  bool loading_for(SeqId waiter) const;
  // Registers the pages of every finished load and releases its sequence. Returns pages
  // registered.
  int32_t complete_loads();
  // Loads in flight (their sequences are open in the KV manager).
  int32_t num_loads() const { return int32_t(loads_.size()); }
  // Writes every cached page that is not on disk yet, waiting for staging slots (shutdown: what
  // RAM holds survives the restart). Returns pages queued.
  int32_t write_back_cached();

  const PrefixDiskTierStats& stats() const { return stats_; }
  KVDiskStore& store() { return store_; }
  const KVDiskStore& store() const { return store_; }

 private:
  PrefixDiskTier(KVCacheManager& kv, PrefixCache& cache, KVDiskStore& store, KVPageMemory& memory);

  struct Load {
    SeqId seq = 0;                // its own sequence in the KV manager
    SeqId waiter = 0;             // the request it reads for
    PrefixCursor cursor;          // the chain after the request's RAM hit
    std::vector<TokenId> tokens;  // [pages][page_size] of the pages read
    std::vector<KVDigest> digests;
    std::vector<PageId> pages;
    std::vector<uint64_t> tickets;
    std::vector<int8_t> state;  // per page: 0 reading, 1 good, -1 bad
    int32_t pending = 0;
  };
  void finish(Load& load);

  KVCacheManager& kv_;
  PrefixCache& cache_;
  KVDiskStore& store_;
  KVPageMemory& memory_;
  std::vector<Load> loads_;
  std::vector<std::pair<uint64_t, bool>> completed_;  // scratch
  SeqId next_seq_ = kLoaderSeqBase;
  PrefixDiskTierStats stats_;
};

}  // namespace drift
