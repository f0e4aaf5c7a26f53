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

namespace drift {

using TokenId = int32_t;

// What an implementation has done with the events so far (its own counters; read from any
// thread).
struct KVEventCounts {
  uint64_t events = 0;   // events handed to it
  uint64_t dropped = 0;  // of those, lost because its queue was full (a slow consumer)
  uint64_t batches = 0;  // messages sent
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
  virtual KVEventCounts counts() const = 0;
};

}  // namespace drift
