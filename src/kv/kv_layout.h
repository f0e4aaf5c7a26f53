// The shape of the KV cache, derived from the model plus a page size, and what one page costs.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "util/error.h"

namespace drift {

// Element type of the stored K/V values (independent of the weights' type).
enum class KVDtype : uint8_t { kF16, kF32, kBF16 };

std::string_view kv_dtype_name(KVDtype dtype);  // "f16", "f32", "bf16"
std::optional<KVDtype> parse_kv_dtype(std::string_view name);
uint32_t kv_dtype_bytes(KVDtype dtype);

struct KVLayout {
  int32_t num_layers = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t page_size = 16;  // tokens per page
  KVDtype dtype = KVDtype::kF16;

  // An error naming the first field out of range, or a page too large to address.
  Status validate() const;

  // K and V of one token across all layers and KV heads:
  // 2 * num_layers * num_kv_heads * head_dim * sizeof(dtype). Only for a validated layout.
  uint64_t bytes_per_token() const;
  // bytes_per_token() * page_size. Only for a validated layout.
  uint64_t bytes_per_page() const;
  // Pages that hold `num_tokens` tokens (rounded up).
  int64_t pages_for_tokens(int64_t num_tokens) const;
};

}  // namespace drift
