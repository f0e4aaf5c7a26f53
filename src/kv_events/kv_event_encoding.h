// vLLM's KV event wire format (vllm/distributed/kv_events.py, vLLM 0.33): one message payload is a
// msgspec-encoded KVEventBatch, which is array-like, [ts, events, data_parallel_rank]; its events
// are tagged structs that are NOT array-like, so each is a map whose first key "type" names the
// class, then the fields in declaration order, fields left at their default omitted:
//
//   {"type": "BlockStored", "block_hashes": [h], "parent_block_hash": p | nil,
//    "token_ids": [...], "block_size": n, "lora_id": nil, "medium": "GPU", "lora_name": nil,
//    "group_idx": 0}
//   {"type": "BlockRemoved", "block_hashes": [h], "medium": "GPU", "group_idx": 0}
//   {"type": "AllBlocksCleared"}
//
// Block hashes are ExternalBlockHash = bytes | int; drift sends the prefix cache's 64-bit chain
// hashes as unsigned integers (vLLM does the same with VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES).
// "GPU" is vLLM's MEDIUM_GPU, the engine's own KV memory: routers filter on it, and drift's KV
// pages play that role on the CPU; pages of the disk tier under it (--kv-cache-dir) are "DISK".
// group_idx 0 is the one KV cache group drift has.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "kv_events/kv_event_queue.h"

namespace drift {

// The msgpack payload of one KVEventBatch: `events` sent at `timestamp` (seconds since the Unix
// epoch) by data-parallel rank `rank`, for pages of `block_size` tokens.
std::string encode_kv_event_batch(std::span<const KVEvent> events, double timestamp,
                                  int32_t block_size, int32_t rank = 0);

}  // namespace drift
