#include "kv/kv_capacity.h"

#include <unistd.h>

#include <cmath>
#include <limits>

#include "util/checked_math.h"

namespace drift {

std::optional<uint64_t> physical_ram_bytes() {
  long pages = sysconf(_SC_PHYS_PAGES);
  long page_bytes = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_bytes <= 0) return std::nullopt;
  return checked_mul(uint64_t(pages), uint64_t(page_bytes));
}

Expected<int32_t> kv_pages_for_budget(const KVLayout& layout, const KVMemoryBudget& budget,
                                      uint64_t ram_bytes) {
  DRIFT_RETURN_IF_ERROR(layout.validate());
  if (budget.bytes.has_value() == budget.ram_fraction.has_value())
    return make_error("kv budget: set exactly one of bytes or ram_fraction");
  uint64_t bytes = 0;
  if (budget.bytes) {
    bytes = *budget.bytes;
  } else {
    double f = *budget.ram_fraction;
    if (!std::isfinite(f) || f <= 0.0 || f > 1.0)
      return make_error("kv budget: ram_fraction must be in (0, 1], got {}", f);
    bytes = static_cast<uint64_t>(std::floor(f * static_cast<double>(ram_bytes)));
  }
  uint64_t page_bytes = layout.bytes_per_page();
  uint64_t pages = bytes / page_bytes;
  if (pages == 0)
    return make_error(
        "kv budget: {} bytes hold no page; one page ({} tokens, {} layers, {} kv heads, head dim "
        "{}, {}) takes {} bytes",
        bytes, layout.page_size, layout.num_layers, layout.num_kv_heads, layout.head_dim,
        kv_dtype_name(layout.dtype), page_bytes);
  if (pages > uint64_t(std::numeric_limits<int32_t>::max()))
    return make_error("kv budget: {} bytes make {} pages, more than the {} page ids available",
                      bytes, pages, std::numeric_limits<int32_t>::max());
  return static_cast<int32_t>(pages);
}

}  // namespace drift
