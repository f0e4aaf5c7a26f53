// The bounded hand-over between the engine's worker, which reports prefix cache changes in the
// middle of a step, and the publisher thread, which encodes and sends them. Every slot and its
// token storage is allocated at construction, so a push never allocates; a push into a full queue
// drops the event and counts it (the consumer is behind: a slow subscriber, or no CPU for the
// publisher) rather than stall a step.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <span>
#include <vector>

#include "kv/kv_event_sink.h"

namespace drift {

enum class KVEventKind : uint8_t { kBlockStored, kBlockRemoved, kAllBlocksCleared };
// Where the page is: the engine's KV pool (vLLM's "GPU", the engine's own KV memory) or the disk
// tier under it ("DISK").
enum class KVMedium : uint8_t { kPool, kDisk };

// One event as the publisher encodes it; `tokens` points into the queue's or a batch's storage.
struct KVEvent {
  KVEventKind kind = KVEventKind::kBlockStored;
  uint64_t hash = 0;
  bool has_parent = false;
  uint64_t parent_hash = 0;
  std::span<const TokenId> tokens;  // kBlockStored: the page's token ids
  KVMedium medium = KVMedium::kPool;
};

// Events taken out of the queue together, with their own copy of the tokens.
struct KVEventBatch {
  std::vector<KVEvent> events;
  std::vector<TokenId> tokens;  // [events.size() * page_size], the events' spans point here
};

class KVEventQueue {
 public:
  // `capacity` events of at most `page_size` tokens each (both at least 1).
  KVEventQueue(int32_t capacity, int32_t page_size);

  // Engine side: no allocation, never waits for the consumer. False (and counted) when the queue
  // is full or the tokens do not fit a slot.
  bool push(KVEventKind kind, uint64_t hash, std::optional<uint64_t> parent_hash,
            std::span<const TokenId> tokens, KVMedium medium = KVMedium::kPool);

  // Consumer side: waits up to `timeout` for an event, then moves up to `max_events` of them, in
  // order, into `out` (cleared first). Returns how many.
  size_t pop(KVEventBatch& out, size_t max_events, std::chrono::milliseconds timeout);

  // Wakes a consumer waiting in pop (at shutdown).
  void wake();

  uint64_t pushed() const;
  uint64_t dropped() const;
  int32_t page_size() const { return page_size_; }

 private:
  const int32_t capacity_;
  const int32_t page_size_;
  mutable std::mutex mutex_;
  std::condition_variable ready_;
  std::vector<KVEvent> slots_;    // [capacity], tokens spans unused here
  std::vector<int32_t> lengths_;  // [capacity], tokens of each slot
  std::vector<TokenId> tokens_;   // [capacity * page_size]
  size_t head_ = 0;               // oldest event
  size_t size_ = 0;
  bool woken_ = false;
  uint64_t pushed_ = 0;
  uint64_t dropped_ = 0;
};

}  // namespace drift
