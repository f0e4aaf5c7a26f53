// The prefix cache: finds full KV pages whose content a new sequence would compute again, so that
// it starts prefill after them and shares them (refcount up) instead.
//
// A full page is identified by a chained hash of (namespace, parent page's hash, the page's
// page_size token ids): equal hashes mean equal prefixes up to collisions, and collisions are
// harmless because every hit is verified exactly — the page's stored token ids must equal the
// sequence's, and its recorded parent must be the page matched just before (same page id and
// same registration epoch, so a parent evicted and reused for other content breaks the chain).
// By induction a matched run of pages holds exactly the K/V of the sequence's prefix.
//
// Pages stay owned by the KVCacheManager. A registered page is marked cacheable there: when its
// last holder releases it, it moves to the cached list instead of the free list, and it is
// reclaimed (least recently released first) only when no free page is left — the manager then
// tells this cache (KVEvictionListener), which forgets the page. A page some sequence holds is
// never on the cached list, so it is never evicted.
//
// KV groups (kv_layout.h): the chain above is group 0's (full attention). A page of another group
// registers under the same chain hash, its group, and an anchor instead of a parent: the group-0
// page registered for the same index (page id and epoch), so it is reached only through a
// verified chain, and a reused anchor breaks it. lookup() finds the longest prefix whose pages
// every group needs: full groups all of them, a sliding group only those a query after the prefix
// sees (vLLM's hybrid coordinator: group 0 from the left, then the rest from the right).
//
// Changes to the set of cached page hashes go to an optional KVEventSink (kv_event_sink.h), as
// vLLM reports its block pool's: a page registered under a hash no other registered page has is
// "stored", the last registered page of a hash evicted is "removed", and a flush that leaves
// nothing registered is "all cleared" (instead of one removal per page). The sink sees the chain
// hashes below: stable across processes and replicas (no seed), each chaining its parent's. Only
// group 0's pages are reported: a router matches text, one hash per page of it.
//
// No allocation after construction: the hash table (open addressing, linear probing, at most
// num_pages entries in at least 2 * num_pages slots) and the per-page records are sized once,
// so registering a page in a decode step allocates nothing.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kv/kv_cache_manager.h"
#include "kv/kv_digest.h"
#include "kv/kv_event_sink.h"
#include "kv/kv_types.h"
#include "util/error.h"

namespace drift {

// Hash of one page in the chain: of its parent's hash (or the namespace's root hash) and its
// tokens. Injectable so that tests can force collisions.
using PrefixHashFn = uint64_t (*)(uint64_t parent_hash, std::span<const TokenId> tokens);
uint64_t default_prefix_hash(uint64_t parent_hash, std::span<const TokenId> tokens);

// Where a sequence stands in the chain: the registered page that holds the content of its last
// covered full page (possibly another sequence's identical page).
struct PrefixCursor {
  uint64_t cache_namespace = 0;  // e.g. model or adapter: pages are shared only within one
  int32_t num_pages = 0;         // leading full pages of the sequence covered
  uint64_t hash = 0;             // chained hash after them (the namespace's root hash at 0)
  PageId page = kNoPage;         // registered page holding page num_pages - 1; kNoPage at 0
  uint32_t epoch = 0;            // that page's registration epoch
  KVDigest digest;               // 128-bit digest of the prefix so far (kv_digest.h)
  // A page could not be registered in its place (see PrefixCache::insert): later pages of the
  // sequence stay unregistered, since nothing could reach them.
  bool broken = false;
};

// Counted like vLLM's: queried and hit tokens, per admission.
struct PrefixCacheStats {
  uint64_t queries = 0;         // lookups at admission (re-admissions after preemption included)
  uint64_t hits = 0;            // lookups that matched at least one page
  uint64_t misses = 0;          // lookups that matched none
  uint64_t queried_tokens = 0;  // tokens of the looked-up sequences
  uint64_t hit_tokens = 0;      // of those, tokens found cached (not computed again)
  uint64_t pages_inserted = 0;  // pages registered
  uint64_t evictions = 0;       // registered pages reclaimed for reuse (or flushed)
  uint64_t evicted_bytes = 0;   // evictions * bytes per page
};

// A lookup's result: the leading full pages of a sequence that every group can share.
struct PrefixHit {
  int32_t num_pages = 0;  // pages (of page_size tokens) covered
  PrefixCursor cursor;    // group 0's chain after them
};

// A registered page that the pool reclaims for reuse (LRU), told before its bytes are
// overwritten, so that a slower tier can keep a copy (prefix_disk_tier.h). Not told for a flush:
// a flush drops content on purpose (reset, or K/V of a failed executor). A page of group g > 0
// is described by the group-0 page of its index: its chain hash, digests and tokens.
struct EvictedPrefixPage {
  PageId page = kNoPage;
  int32_t group = 0;  // the KV group whose layers it holds
  uint64_t cache_namespace = 0;
  uint64_t hash = 0;                    // its chain hash
  std::optional<uint64_t> parent_hash;  // nullopt for a sequence's first page (and group g > 0)
  KVDigest digest;                      // of the prefix through it
  KVDigest parent_digest;               // of the prefix before it
  std::span<const TokenId> tokens;      // [page_size], valid during the call
};

class PrefixSpillListener {
 public:
  virtual ~PrefixSpillListener() = default;
  virtual void on_prefix_page_evicted(const EvictedPrefixPage& page) = 0;
};

class PrefixCache final : public KVEvictionListener {
 public:
  // Becomes `kv`'s eviction listener; `kv` must outlive the cache and stay at its address, and
  // so must `events` (null: no events).
  explicit PrefixCache(KVCacheManager& kv, PrefixHashFn hash = default_prefix_hash,
                       KVEventSink* events = nullptr);
  ~PrefixCache() override;
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  // The seed of the 128-bit digests (kv_digest_root): set before the first registration (a tier
  // sets its directory's), 0 otherwise.
  void set_digest_seed(uint64_t seed) { digest_seed_ = seed; }
  // Told about every page reclaimed for reuse (null: nobody); must outlive the cache or be unset.
  void set_spill_listener(PrefixSpillListener* listener) { spill_ = listener; }
  // What a spill listener would be told of registered page `page` (e.g. to write back a page that
  // stays cached at shutdown).
  EvictedPrefixPage describe(PageId page) const;

  // The cursor of an empty sequence in `cache_namespace`.
  PrefixCursor root(uint64_t cache_namespace) const;
  // The chain hash it gives a page of `tokens` after a prefix of hash `parent` (a tier names
  // pages it writes for a sequence that never registered them).
  uint64_t chain_hash(uint64_t parent, std::span<const TokenId> tokens) const {
    return hash_fn_(parent, tokens);
  }

  // The longest run of registered group-0 pages that hold the next full pages of `tokens` (token
  // 0 of `tokens` is the first token after `from`), at most `max_pages`; their ids are appended
  // to `pages` (no allocation within its capacity). Returns the cursor after them. Changes
  // nothing.
  PrefixCursor match(const PrefixCursor& from, std::span<const TokenId> tokens, int32_t max_pages,
                     std::vector<PageId>& pages) const;

  // The registered page of group `group` (> 0) that holds `tokens` beside the group-0 page
  // `anchor` stands on (the cursor after that page); kNoPage if none.
  PageId group_page(const PrefixCursor& anchor, std::span<const TokenId> tokens,
                    int32_t group) const;

  // The longest prefix of `tokens` (from the namespace's root), at most `max_pages` pages, whose
  // pages every group holds where a sequence resuming after it needs them: full groups every
  // page, sliding groups the pages a query at num_pages * page_size sees. Writes its pages to
  // `pages` row by row, [num_pages][num_groups], kNoPage where a sliding group needs none (no
  // allocation within its capacity). Changes nothing but scratch.
  PrefixHit lookup(uint64_t cache_namespace, std::span<const TokenId> tokens, int32_t max_pages,
                   std::vector<PageId>& pages) const;

  // Page `page` — used by the sequence at `cursor`, full, its K/V written — holds the page_size
  // `tokens` after the cursor. Registers it (and marks it cacheable in the KV manager) unless a
  // page with the same content and parent is registered already, in which case the cursor moves
  // to that one. Returns the advanced cursor. A broken cursor, or a page that is registered
  // under another identity, leaves the page unregistered and returns a broken cursor.
  PrefixCursor insert(const PrefixCursor& cursor, std::span<const TokenId> tokens, PageId page);
  // The same with the page of each group ([num_groups]; group 0's as above, the others anchored
  // to the group-0 page the returned cursor stands on; kNoPage: none).
  PrefixCursor insert(const PrefixCursor& cursor, std::span<const TokenId> tokens,
                      std::span<const PageId> page_of_group);

  // Counts one admission's lookup: `queried` tokens of which `hit` were found cached.
  void record_query(int64_t queried, int64_t hit);

  // Evicts every cached page to the free list (pages in use stay registered). Returns how many.
  // Tells the event sink "all cleared" when no page stays registered, else each removed hash.
  int32_t flush();

  // KVEvictionListener: the manager reclaims `page`; forget its content.
  void on_page_evicted(PageId page) override;

  bool registered(PageId page) const { return registered_[size_t(page)] != 0; }
  int32_t num_registered() const { return num_registered_; }
  const PrefixCacheStats& stats() const { return stats_; }

  // O(pages + table slots): every table entry is a registered page reachable by probing from its
  // home slot, the count matches, each registered page is cacheable and not free in the manager,
  // and every cached page of the manager is registered.
  Status check_invariants() const;

 private:
  // The table slot holding a registered page of `group` whose hash, namespace, parent (group 0)
  // or anchor (other groups) and tokens are these; -1 if none.
  int64_t find(uint64_t hash, const PrefixCursor& parent, std::span<const TokenId> tokens,
               int32_t group = 0) const;
  // Registers `page` of `group` under `hash` with `parent` (its chain parent, or its anchor).
  void register_page(PageId page, int32_t group, uint64_t hash, const PrefixCursor& parent,
                     std::span<const TokenId> tokens);
  // Whether a registered group-0 page in the table has this hash.
  bool hash_registered(uint64_t hash) const;
  // Group `group`'s registered page for index i of the chain lookup() walked (anchored to
  // chain_[i]); kNoPage if none.
  PageId member_page(int32_t group, int32_t i, std::span<const TokenId> tokens) const;
  void table_insert(PageId page);
  void table_remove(PageId page);
  size_t home(uint64_t hash) const { return size_t(hash) & mask_; }
  std::span<const TokenId> tokens_of(PageId page) const {
    return {tokens_.data() + size_t(page) * size_t(page_size_), size_t(page_size_)};
  }

  KVCacheManager& kv_;
  PrefixHashFn hash_fn_;
  KVEventSink* events_;          // null: nobody listens
  bool quiet_removals_ = false;  // during a flush that clears everything: one event for all
  bool flushing_ = false;        // during a flush: evictions are not spilled
  PrefixSpillListener* spill_ = nullptr;
  uint64_t digest_seed_ = 0;
  int32_t page_size_;

  // Per page, [num_pages]; meaningful while registered_.
  std::vector<uint8_t> registered_;
  std::vector<uint64_t> hash_;
  std::vector<uint64_t> namespace_;
  std::vector<PageId> parent_;
  std::vector<uint32_t> parent_epoch_;
  std::vector<uint32_t> epoch_;          // bumped at every registration of the page
  std::vector<int32_t> group_;           // the KV group whose layers the page holds
  std::vector<KVDigest> digest_;         // of the prefix through the page (group 0's chain)
  std::vector<KVDigest> parent_digest_;  // of the prefix before it (its anchor's, group g > 0)
  std::vector<uint64_t> parent_hash_;    // its parent's chain hash (group 0, not a first page)
  std::vector<TokenId> tokens_;          // [num_pages * page_size]
  // lookup()'s walk of group 0's chain: the cursor after each page, [num_pages].
  mutable std::vector<PrefixCursor> chain_;

  std::vector<PageId> table_;  // [power of two >= 2 * num_pages]: page ids, kNoPage when empty
  size_t mask_ = 0;
  int32_t num_registered_ = 0;
  PrefixCacheStats stats_;
};

}  // namespace drift
