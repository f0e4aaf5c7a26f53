#include "model/kv_pages.h"

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

int64_t KvPages::bytes_per_page(const ModelConfig& c, int64_t page_size, kernels::KvFormat format) {
  return c.n_layers * c.n_kv_heads *
         (kernels::kv_block_bytes(format, c.head_dim, page_size) +
          kernels::kv_block_bytes(format, c.head_dim_v, page_size));
}

Expected<KvPages> KvPages::create(const ModelConfig& c, int64_t num_pages, int64_t page_size,
                                  kernels::KvFormat format) {
  if (num_pages < 1) return make_error("the KV cache needs at least one page, got {}", num_pages);
  if (page_size < 1 || page_size > 4096)
    return make_error("KV page size must be 1 to 4096 tokens, got {}", page_size);
  DRIFT_RETURN_IF_ERROR(kernels::kv_format_check(format, c.head_dim, page_size));
  DRIFT_RETURN_IF_ERROR(kernels::kv_format_check(format, c.head_dim_v, page_size));
  auto total = checked_mul(static_cast<uint64_t>(num_pages),
                           static_cast<uint64_t>(bytes_per_page(c, page_size, format)));
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
  pages.key_block_bytes_ = kernels::kv_block_bytes(format, c.head_dim, page_size);
  pages.value_block_bytes_ = kernels::kv_block_bytes(format, c.head_dim_v, page_size);
  pages.layer_bytes_ = c.n_kv_heads * (pages.key_block_bytes_ + pages.value_block_bytes_);
  pages.page_bytes_ = pages.layer_bytes_ * c.n_layers;
  return pages;
}

}  // namespace drift
