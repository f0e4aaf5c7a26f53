#include "kv/kv_layout.h"

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
  }
  return "unknown";
}

std::optional<KVDtype> parse_kv_dtype(std::string_view name) {
  for (KVDtype dtype : {KVDtype::kF16, KVDtype::kF32, KVDtype::kBF16}) {
    if (name == kv_dtype_name(dtype)) return dtype;
  }
  return std::nullopt;
}

uint32_t kv_dtype_bytes(KVDtype dtype) { return dtype == KVDtype::kF32 ? 4 : 2; }

Status KVLayout::validate() const {
  if (num_layers < 1) return make_error("kv layout: num_layers must be >= 1, got {}", num_layers);
  if (num_kv_heads < 1)
    return make_error("kv layout: num_kv_heads must be >= 1, got {}", num_kv_heads);
  if (head_dim < 1) return make_error("kv layout: head_dim must be >= 1, got {}", head_dim);
  if (page_size < 1) return make_error("kv layout: page_size must be >= 1, got {}", page_size);
  if (kv_dtype_name(dtype) == "unknown")
    return make_error("kv layout: dtype has invalid value {}", static_cast<int>(dtype));
  std::optional<uint64_t> bytes = uint64_t{2};
  for (uint64_t factor : {uint64_t(num_layers), uint64_t(num_kv_heads), uint64_t(head_dim),
                          uint64_t(page_size), uint64_t(kv_dtype_bytes(dtype))}) {
    if (bytes) bytes = checked_mul(*bytes, factor);
  }
  if (!bytes || *bytes > (uint64_t{1} << 48))
    return make_error(
        "kv layout: one page of {} tokens x {} layers x {} kv heads x {} head dim is too large",
        page_size, num_layers, num_kv_heads, head_dim);
  return Status::Ok();
}

uint64_t KVLayout::bytes_per_token() const {
  return uint64_t{2} * uint64_t(num_layers) * uint64_t(num_kv_heads) * uint64_t(head_dim) *
         kv_dtype_bytes(dtype);
}

uint64_t KVLayout::bytes_per_page() const { return bytes_per_token() * uint64_t(page_size); }

int64_t KVLayout::pages_for_tokens(int64_t num_tokens) const {
  return num_tokens <= 0 ? 0 : (num_tokens + page_size - 1) / page_size;
}

}  // namespace drift
