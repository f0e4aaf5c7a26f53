// The shape of the KV cache, derived from the model plus a page size, and what one page costs.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "util/error.h"

namespace drift {

// Element type of the stored K/V values (independent of the weights' type). int8 stores a code
// per element and a fp16 scale per kKVGroup elements of a token's row of one head (per row when
// head_dim is not a multiple of kKVGroup); int4 two codes a byte, keys a fp16 master per row and
// an int8 sub-scale per kKVInt4KeyGroup elements, values a fp16 scale per kKVInt4ValueGroup
// elements (kKVGroup when head_dim is not a multiple of it); head_dim must be a multiple of
// kKVGroup — the executor's kernels/kv_format.h, whose byte counts bytes_per_page() repeats.
enum class KVDtype : uint8_t { kF16, kF32, kBF16, kInt8, kInt4 };
inline constexpr int32_t kKVGroup = 32;
inline constexpr int32_t kKVInt4KeyGroup = 16;
inline constexpr int32_t kKVInt4ValueGroup = 64;

std::string_view kv_dtype_name(KVDtype dtype);  // "f16", "f32", "bf16", "int8", "int4"
std::optional<KVDtype> parse_kv_dtype(std::string_view name);
uint32_t kv_dtype_bits(KVDtype dtype);  // of one element, scales excluded

// A KV group: model layers of one attention kind whose K/V share page ids, each sequence holding
// one page list per group (vLLM's KV cache groups; kv_groups.h splits a model's layers).
struct KVGroup {
  // 0: full attention. Else a query at position p sees positions > p - sliding_window, so a
  // sequence whose next query is at n needs none of this group's pages wholly below
  // n - sliding_window + 1.
  int32_t sliding_window = 0;

  bool sliding() const { return sliding_window > 0; }
  bool operator==(const KVGroup&) const = default;
};

struct KVLayout {
  int32_t num_layers = 0;  // layer slots of a page: every layer (one group), or one group's
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t page_size = 16;  // tokens per page
  KVDtype dtype = KVDtype::kBF16;
  // [num_groups], group 0 full attention; empty: one full-attention group (a page holds every
  // layer).
  std::vector<KVGroup> groups = {};

  int32_t num_groups() const { return groups.empty() ? 1 : static_cast<int32_t>(groups.size()); }
  KVGroup group(int32_t g) const { return groups.empty() ? KVGroup{} : groups[size_t(g)]; }
  // Whether some group slides (and may free pages during a sequence's life).
  bool has_sliding_groups() const;

  // An error naming the first field out of range, or a page too large to address.
  Status validate() const;

  // The memory of one page: num_layers * num_kv_heads key blocks and as many value blocks of
  // head_dim x page_size elements plus their scales (int8/int4), each rounded up to 4 bytes. Only
  // for a validated layout.
  uint64_t bytes_per_page() const;
  // Pages that hold `num_tokens` tokens (rounded up), in one group.
  int64_t pages_for_tokens(int64_t num_tokens) const;
  // The first page of group `g` that a query at `position` reads: 0 in a full group; in a
  // sliding group the page of position - sliding_window + 1 (the pages below it can be freed).
  int64_t first_page_seen(int32_t g, int64_t position) const;
  // The most pages, over every group, that a sequence of up to `num_tokens` tokens holds at once:
  // a full group a page per page_size tokens; a sliding group, when `max_step_tokens` is set (the
  // sequence frees what leaves its window after every step, and a step adds at most that many
  // tokens), at most the pages of window - 1 + max_step_tokens consecutive positions, wherever
  // they start; unset, all its pages too (nothing is freed: KV-Compress, or no bound known).
  int64_t pages_to_hold(int64_t num_tokens, std::optional<int64_t> max_step_tokens) const;
  // The longest sequence that `num_pages` pages hold alone (pages_to_hold <= num_pages).
  int64_t tokens_held(int64_t num_pages, std::optional<int64_t> max_step_tokens) const;
};

}  // namespace drift
