// Byte access to the executor's KV pages, for tiers that move a page's K/V out of RAM and back
// (prefix_disk_tier.h). The only window kv/ has onto KV memory: a page is an opaque run of bytes
// (its layers, heads, scales: whatever the executor's layout is), copied whole.
#pragma once

#include <cstdint>
#include <span>

#include "kv/kv_types.h"

namespace drift {

class KVPageMemory {
 public:
  virtual ~KVPageMemory() = default;
  // Bytes of one page; every page has this many.
  virtual uint64_t page_bytes() const = 0;
  // The memory of page `page` ([page_bytes()]), valid for the executor's life. A tier reads it
  // while no step runs (the worker thread, between steps) and writes it only while the page is
  // held by no step's plan (a page it loads into is held by a sequence of its own until then).
  virtual std::span<uint8_t> page(PageId page) = 0;
};

}  // namespace drift
