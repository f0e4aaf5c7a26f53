// Small value types the KV cache exchanges with the scheduler. No tensors: a page is an id.
#pragma once

#include <cstdint>

namespace drift {

// A physical KV page: page_size token slots of K and V for every layer and KV head. Ids are
// 0..num_pages-1; the KVCacheManager is their single owner.
using PageId = int32_t;

// A sequence (one completion of one request), as the scheduler names it.
using SeqId = uint64_t;

// What a sequence needs from the cache, worst case.
struct KVUsageEstimate {
  int64_t num_tokens = 0;  // tokens whose K/V must be held
  int64_t num_pages = 0;   // pages that hold them
  uint64_t num_bytes = 0;  // num_pages * bytes_per_page
};

// Copy-on-write order for the executor: before the step, copy every K/V byte of page `src` into
// page `dst`. Issued when a sequence is about to write into a partial last page that it shares
// with another sequence (after a fork).
struct PageCopy {
  PageId src = 0;
  PageId dst = 0;
  bool operator==(const PageCopy&) const = default;
};

}  // namespace drift
