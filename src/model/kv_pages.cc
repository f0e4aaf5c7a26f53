#include "model/kv_pages.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "kernels/kv_slot_copy.h"
#include "util/checked_math.h"
#include "util/huge_pages.h"

namespace drift {

void KvPages::copy_page(int64_t src, int64_t dst) {
  std::memcpy(memory_.get() + dst * page_bytes_, memory_.get() + src * page_bytes_,
              static_cast<size_t>(page_bytes_));
}

void KvPages::move_entry(int64_t layer, int64_t kv_head, int64_t src_page, int64_t src_slot,
                         int64_t dst_page, int64_t dst_slot) {
  kernels::kv_copy_key_slot(format_, keys(src_page, layer, kv_head), src_slot,
                            keys(dst_page, layer, kv_head), dst_slot, head_dim_, page_size_);
  kernels::kv_copy_value_slot(format_, values(src_page, layer, kv_head), src_slot,
                              values(dst_page, layer, kv_head), dst_slot, head_dim_v_, page_size_);
}

void KvPages::FreeDeleter::operator()(uint8_t* p) const { std::free(p); }

int64_t KvPages::bytes_per_page(const ModelConfig& c, int64_t page_size, kernels::KvFormat format,
                                int64_t layers_per_page) {
  return (layers_per_page > 0 ? layers_per_page : c.n_layers) * c.n_kv_heads *
         (kernels::kv_key_block_bytes(format, c.head_dim, page_size) +
          kernels::kv_value_block_bytes(format, c.head_dim_v, page_size));
}

Expected<KvPages> KvPages::create(const ModelConfig& c, int64_t num_pages, int64_t page_size,
                                  kernels::KvFormat format, const KvLayerPlacement& placement) {
  if (num_pages < 1) return make_error("the KV cache needs at least one page, got {}", num_pages);
  std::vector<int32_t> group(size_t(c.n_layers), 0), slot(size_t(c.n_layers));
  int64_t layers_per_page = c.n_layers, num_groups = 1;
  for (int64_t il = 0; il < c.n_layers; ++il) slot[size_t(il)] = int32_t(il);
  if (!placement.empty()) {
    if (int64_t(placement.group.size()) != c.n_layers ||
        int64_t(placement.slot.size()) != c.n_layers || placement.layers_per_page < 1 ||
        placement.layers_per_page > c.n_layers)
      return make_error("KV layer placement of {} layers ({} per page) for a model of {}",
                        placement.group.size(), placement.layers_per_page, c.n_layers);
    group = placement.group;
    slot = placement.slot;
    layers_per_page = placement.layers_per_page;
    num_groups = 0;
    std::vector<uint8_t> taken;
    for (int64_t il = 0; il < c.n_layers; ++il) {
      const int32_t g = group[size_t(il)], k = slot[size_t(il)];
      if (g < 0 || g >= c.n_layers || k < 0 || k >= layers_per_page)
        return make_error("KV layer placement puts layer {} at group {} slot {}", il, g, k);
      num_groups = std::max<int64_t>(num_groups, g + 1);
      taken.resize(size_t(num_groups * layers_per_page), 0);
      if (taken[size_t(g * layers_per_page + k)]++)
        return make_error("KV layer placement puts two layers at group {} slot {}", g, k);
    }
  }
  if (page_size < 1 || page_size > 4096)
    return make_error("KV page size must be 1 to 4096 tokens, got {}", page_size);
  DRIFT_RETURN_IF_ERROR(kernels::kv_format_check(format, c.head_dim, page_size));
  DRIFT_RETURN_IF_ERROR(kernels::kv_format_check(format, c.head_dim_v, page_size));
  auto total =
      checked_mul(static_cast<uint64_t>(num_pages),
                  static_cast<uint64_t>(bytes_per_page(c, page_size, format, layers_per_page)));
  if (!total) return make_error("KV cache of {} pages overflows", num_pages);
  auto rounded = checked_align_up(*total, 64);
  if (!rounded) return make_error("KV cache of {} pages overflows", num_pages);
  void* memory = allocate_huge_page_backed(*rounded);
  if (memory == nullptr)
    return make_error("cannot allocate {} MiB for the KV cache ({} pages)", *total >> 20,
                      num_pages);
  KvPages pages;
  pages.memory_.reset(static_cast<uint8_t*>(memory));
  pages.num_pages_ = num_pages;
  pages.page_size_ = page_size;
  pages.format_ = format;
  pages.n_kv_heads_ = c.n_kv_heads;
  pages.head_dim_ = c.head_dim;
  pages.head_dim_v_ = c.head_dim_v;
  pages.key_block_bytes_ = kernels::kv_key_block_bytes(format, c.head_dim, page_size);
  pages.value_block_bytes_ = kernels::kv_value_block_bytes(format, c.head_dim_v, page_size);
  pages.layer_bytes_ = c.n_kv_heads * (pages.key_block_bytes_ + pages.value_block_bytes_);
  pages.page_bytes_ = pages.layer_bytes_ * layers_per_page;
  pages.num_groups_ = num_groups;
  pages.layer_group_ = std::move(group);
  pages.layer_slot_ = std::move(slot);
  return pages;
}

}  // namespace drift
