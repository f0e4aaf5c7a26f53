// How many pages the KV cache gets: from a memory budget given as explicit bytes or as a fraction
// of the machine's physical RAM.
#pragma once

#include <cstdint>
#include <optional>

#include "kv/kv_layout.h"
#include "util/error.h"

namespace drift {

// Exactly one of the two is set.
struct KVMemoryBudget {
  std::optional<uint64_t> bytes;       // the cache takes this many bytes
  std::optional<double> ram_fraction;  // or this share of physical RAM, in (0, 1]

  static KVMemoryBudget of_bytes(uint64_t n) { return {n, std::nullopt}; }
  static KVMemoryBudget of_ram_fraction(double f) { return {std::nullopt, f}; }
};

// Physical memory of this machine in bytes (sysconf), or nullopt if the system cannot tell.
std::optional<uint64_t> physical_ram_bytes();

// The number of whole pages of `layout` that fit in `budget`; `ram_bytes` is the physical RAM the
// fraction applies to. Errors name the field: a budget with both or neither amount set, a fraction
// outside (0, 1], a budget smaller than one page, or more pages than page ids can number.
Expected<int32_t> kv_pages_for_budget(const KVLayout& layout, const KVMemoryBudget& budget,
                                      uint64_t ram_bytes);

}  // namespace drift
