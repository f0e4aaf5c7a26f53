#include "kv/kv_layout.h"

#include <algorithm>

#include "util/checked_math.h"

namespace drift {

std::string_view kv_dtype_name(KVDtype dtype) {
  switch (dtype) {
    case KVDtype::kF16:
      return "f16";
    case KVDtype::kF32:
      return "f32";
    case KVDtype::kBF16:
      return "bf16";
    case KVDtype::kInt8:
      return "int8";
    case KVDtype::kInt4:
      return "int4";
  }
  return "unknown";
}

std::optional<KVDtype> parse_kv_dtype(std::string_view name) {
  for (KVDtype dtype :
       {KVDtype::kF16, KVDtype::kF32, KVDtype::kBF16, KVDtype::kInt8, KVDtype::kInt4}) {
    if (name == kv_dtype_name(dtype)) return dtype;
  }
  return std::nullopt;
}

uint32_t kv_dtype_bits(KVDtype dtype) {
  switch (dtype) {
    case KVDtype::kF32:
      return 32;
    case KVDtype::kInt8:
      return 8;
    case KVDtype::kInt4:
      return 4;
    default:
      return 16;
  }
}

Status KVLayout::validate() const {
  if (num_layers < 1) return make_error("kv layout: num_layers must be >= 1, got {}", num_layers);
  if (num_kv_heads < 1)
    return make_error("kv layout: num_kv_heads must be >= 1, got {}", num_kv_heads);
  if (head_dim < 1) return make_error("kv layout: head_dim must be >= 1, got {}", head_dim);
  if (page_size < 1) return make_error("kv layout: page_size must be >= 1, got {}", page_size);
  if (kv_dtype_name(dtype) == "unknown")
    return make_error("kv layout: dtype has invalid value {}", static_cast<int>(dtype));
  if (dtype == KVDtype::kInt4 && (head_dim % kKVGroup != 0 || page_size % 2 != 0))
    return make_error(
        "kv layout: int4 needs a head_dim that is a multiple of {} and an even page_size, got "
        "head_dim {}, page_size {}",
        kKVGroup, head_dim, page_size);
  for (size_t g = 0; g < groups.size(); ++g) {
    if (groups[g].sliding_window < 0)
      return make_error("kv layout: group {} has sliding window {}", g, groups[g].sliding_window);
  }
  if (group(0).sliding())
    return make_error(
        "kv layout: group 0 must attend to the whole context (its pages anchor the "
        "prefix cache)");
  std::optional<uint64_t> bytes = uint64_t{2 * 4};  // 2 blocks, at most 4 bytes an element
  for (uint64_t factor :
       {uint64_t(num_layers), uint64_t(num_kv_heads), uint64_t(head_dim), uint64_t(page_size)}) {
    if (bytes) bytes = checked_mul(*bytes, factor);
  }
  if (!bytes || *bytes > (uint64_t{1} << 48))
    return make_error(
        "kv layout: one page of {} tokens x {} layers x {} kv heads x {} head dim is too large",
        page_size, num_layers, num_kv_heads, head_dim);
  return Status::Ok();
}

uint64_t KVLayout::bytes_per_page() const {
  const uint64_t dim = uint64_t(head_dim), slots = uint64_t(page_size);
  const uint64_t data = dim * slots * kv_dtype_bits(dtype) / 8;
  uint64_t key_scales = 0, value_scales = 0;
  if (dtype == KVDtype::kInt8) {  // fp16, one per group of a slot's elements
    key_scales = (head_dim % kKVGroup == 0 ? dim / kKVGroup : 1) * slots * 2;
    value_scales = key_scales;
  }
  if (dtype == KVDtype::kInt4) {
    key_scales = slots * 2 + dim / kKVInt4KeyGroup * slots;  // fp16 masters, int8 sub-scales
    const uint64_t value_group = head_dim % kKVInt4ValueGroup == 0 ? kKVInt4ValueGroup : kKVGroup;
    value_scales = dim / value_group * slots * 2;
  }
  const uint64_t key_block = (data + key_scales + 3) / 4 * 4;
  const uint64_t value_block = (data + value_scales + 3) / 4 * 4;
  return uint64_t(num_layers) * uint64_t(num_kv_heads) * (key_block + value_block);
}

int64_t KVLayout::pages_for_tokens(int64_t num_tokens) const {
  return num_tokens <= 0 ? 0 : (num_tokens + page_size - 1) / page_size;
}

bool KVLayout::has_sliding_groups() const {
  for (const KVGroup& g : groups)
    if (g.sliding()) return true;
  return false;
}

int64_t KVLayout::first_page_seen(int32_t g, int64_t position) const {
  const KVGroup kind = group(g);
  if (!kind.sliding()) return 0;
  return std::max<int64_t>(0, position - kind.sliding_window + 1) / page_size;
}

int64_t KVLayout::pages_to_hold(int64_t num_tokens, std::optional<int64_t> max_step_tokens) const {
  // Between steps a sliding group holds the pages from the one of position n - window + 1 on;
  // a step appends up to max_step_tokens: window - 1 + max_step_tokens positions, which span at
  // most pages_for_tokens(that + page_size - 1) pages when they start mid-page.
  const int64_t all = pages_for_tokens(num_tokens);
  int64_t pages = 0;
  for (int32_t g = 0; g < num_groups(); ++g) {
    const KVGroup kind = group(g);
    if (!kind.sliding() || !max_step_tokens) {
      pages += all;
      continue;
    }
    const int64_t span = int64_t(kind.sliding_window) - 1 + std::max<int64_t>(1, *max_step_tokens);
    pages += std::min(all, pages_for_tokens(span + page_size - 1));
  }
  return pages;
}

int64_t KVLayout::tokens_held(int64_t num_pages, std::optional<int64_t> max_step_tokens) const {
  // pages_to_hold grows with the length, by at least a page per page_size tokens (group 0 is
  // full attention), so the answer is below num_pages * page_size: a binary search.
  int64_t lo = 0, hi = std::max<int64_t>(0, num_pages) * page_size;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo + 1) / 2;
    if (pages_to_hold(mid, max_step_tokens) <= num_pages) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

}  // namespace drift
