// The physical KV cache: fixed-size pages of token slots, addressed by page id through each
// sequence's page table. Page ids are handed out by the KV cache manager (kv/); this class only
// owns the memory and knows where a (page, layer, head, slot) lives.
//
// Layout of one page, fp16:  [layer][K, V][kv_head][...]: the keys of one head in one page are a
// contiguous [head_dim][page_size] matrix (transposed, so that a decode query scores consecutive
// positions in SIMD lanes), the values a [page_size][head_dim_v] matrix
// (kernels/paged_attention.h).
#pragma once

#include <cstdint>
#include <memory>

#include "model/model_config.h"
#include "util/error.h"

namespace drift {

class KvPages {
 public:
  // num_pages * bytes_per_page() bytes, allocated (and bounds-checked) here.
  static Expected<KvPages> create(const ModelConfig& config, int64_t num_pages, int64_t page_size);
  static int64_t bytes_per_page(const ModelConfig& config, int64_t page_size);

  int64_t num_pages() const { return num_pages_; }
  int64_t page_size() const { return page_size_; }
  // fp16 elements from a (layer, head) block of one page to the same block of the next page.
  int64_t page_stride() const { return page_elements_; }

  // Copies every K/V byte of page `src` into page `dst` (copy-on-write of a shared page).
  void copy_page(int64_t src, int64_t dst);

  // [head_dim][page_size] keys (element e of slot j at [e][j]) of one head of one layer in one
  // page.
  uint16_t* keys(int64_t page, int64_t layer, int64_t kv_head) {
    return base(page, layer) + kv_head * page_size_ * head_dim_;
  }
  // [page_size][head_dim_v] values of one head of one layer in one page.
  uint16_t* values(int64_t page, int64_t layer, int64_t kv_head) {
    return base(page, layer) + n_kv_heads_ * page_size_ * head_dim_ +
           kv_head * page_size_ * head_dim_v_;
  }

 private:
  KvPages() = default;
  uint16_t* base(int64_t page, int64_t layer) {
    return memory_.get() + page * page_elements_ + layer * layer_elements_;
  }

  struct FreeDeleter {
    void operator()(uint16_t* p) const;
  };
  std::unique_ptr<uint16_t, FreeDeleter> memory_;
  int64_t num_pages_ = 0;
  int64_t page_size_ = 0;
  int64_t n_kv_heads_ = 0;
  int64_t head_dim_ = 0;
  int64_t head_dim_v_ = 0;
  int64_t layer_elements_ = 0;  // fp16 elements of one layer's K and V in a page
  int64_t page_elements_ = 0;   // fp16 elements of one page
};

}  // namespace drift
