// The shape of the KV cache, derived from the model plus a page size, and what one page costs.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "util/error.h"

namespace drift {

// Element type of the stored K/V values (independent of the weights' type). int8 stores a code
// per element and a fp16 scale per kKVGroup elements of a token's row of one head (per row when
// head_dim is not a multiple of kKVGroup); int4 two codes a byte and a fp16 scale per
// kKVInt4Group elements (head_dim must be a multiple of kKVGroup) — the executor's
// kernels/kv_format.h, whose byte counts bytes_per_page() repeats.
enum class KVDtype : uint8_t { kF16, kF32, kBF16, kInt8, kInt4 };
inline constexpr int32_t kKVGroup = 32;
inline constexpr int32_t kKVInt4Group = 16;

std::string_view kv_dtype_name(KVDtype dtype);  // "f16", "f32", "bf16", "int8", "int4"
std::optional<KVDtype> parse_kv_dtype(std::string_view name);
uint32_t kv_dtype_bits(KVDtype dtype);  // of one element, scales excluded

struct KVLayout {
  int32_t num_layers = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t page_size = 16;  // tokens per page
  KVDtype dtype = KVDtype::kF16;

  // An error naming the first field out of range, or a page too large to address.
  Status validate() const;

  // The memory of one page: 2 * num_layers * num_kv_heads blocks of head_dim x page_size elements
  // plus their scales (int8/int4), each rounded up to 4 bytes. Only for a validated layout.
  uint64_t bytes_per_page() const;
  // Pages that hold `num_tokens` tokens (rounded up).
  int64_t pages_for_tokens(int64_t num_tokens) const;
};

}  // namespace drift
