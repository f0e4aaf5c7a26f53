// Where the prefix cache reports changes to the set of page hashes it holds, so that a router
// outside the process can track which replica caches which prefix (vLLM's KV events: BlockStored,
// BlockRemoved, AllBlocksCleared). The kv library only calls this interface; the ZeroMQ publisher
// that implements it lives in kv_events/ and is wired in by runtime/.
//
// The calls come from the engine's worker thread in the middle of a step (the disk tier's from its
// I/O thread): an implementation must not block and must not allocate (a decode step after
// warm-up allocates nothing).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace drift {

using TokenId = int32_t;

// What an implementation has done with the events so far (its own counters; read from any
// thread).
struct KVEventCounts {
  uint64_t events = 0;   // events handed to it
  uint64_t dropped = 0;  // of those, lost because its queue was full (a slow consumer)
  uint64_t batches = 0;  // messages sent
};

// A full page the disk tier found on disk at start (a restarted replica's): what its BlockStored
// names.
struct KVFoundBlock {
  uint64_t hash = 0;
  std::optional<uint64_t> parent_hash;
  std::vector<TokenId> tokens;  // [page_size]
};

class KVEventSink {
 public:
  virtual ~KVEventSink() = default;
  // A full page with chained hash `hash` is now cached. `parent_hash` is the hash of the page
  // before it in its sequence (nullopt for a sequence's first page); `tokens` are its page_size
  // token ids, valid only during the call.
  virtual void block_stored(uint64_t hash, std::optional<uint64_t> parent_hash,
                            std::span<const TokenId> tokens) = 0;
  // No cached page has hash `hash` any more.
  virtual void block_removed(uint64_t hash) = 0;
  // No cached page is left at all.
  virtual void all_blocks_cleared() = 0;
  // The disk tier under the prefix cache (kv_disk_store.h) wrote, or deleted, a page of this
  // hash: the same events with vLLM's medium "DISK". Called on the tier's I/O thread; ignored
  // unless overridden.
  virtual void disk_block_stored(uint64_t hash, std::optional<uint64_t> parent_hash,
                                 std::span<const TokenId> tokens) {}
  virtual void disk_block_removed(uint64_t hash) {}
  // The pages the disk tier found at start, before any other disk event: BlockStored with medium
  // "DISK" for each, in order, so that a router learns what a restarted replica holds. Called
  // once, from the thread that opens the tier (it may allocate); ignored unless overridden.
  virtual void disk_blocks_found(std::vector<KVFoundBlock> blocks) {}
  virtual KVEventCounts counts() const = 0;
};

}  // namespace drift
