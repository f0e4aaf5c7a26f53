// The physical KV cache: fixed-size pages of token slots, addressed by page id through each
// sequence's page table. Page ids are handed out by the KV cache manager (kv/); this class only
// owns the memory and knows where a (page, layer, head, slot) lives.
//
// Layout of one page: [layer slot][K, V][kv_head][block], a block being the data and scales of one
// head's keys or values in the cache's element format (kernels/kv_format.h): keys a transposed
// [head_dim][page_size] matrix (so that a decode query scores consecutive positions in SIMD
// lanes), values a [page_size][head_dim_v] matrix, int8/int4 blocks followed by their fp16 scales.
// A page carries its own scales, so copying a page's bytes copies its quantized K/V exactly.
//
// KV groups (kv/kv_groups.h decides them): a page holds the layers of one group, each layer at
// its slot; a sequence's page table then has one list per group, [groups][pages], and layer il
// reads and writes through its group's list. Without groups, a page holds every layer, layer il
// at slot il.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "kernels/kv_format.h"
#include "model/model_config.h"
#include "util/error.h"

namespace drift {

// Where each model layer's K/V lives: its group and its slot among a page's layers. Empty: one
// group, layer il at slot il.
struct KvLayerPlacement {
  int64_t layers_per_page = 0;
  std::vector<int32_t> group;  // [n_layers]
  std::vector<int32_t> slot;   // [n_layers]

  bool empty() const { return group.empty(); }
};

class KvPages {
 public:
  // num_pages * bytes_per_page() bytes, allocated (and bounds-checked) here. Error: a placement
  // that does not give every layer of the model its own (group, slot).
  static Expected<KvPages> create(const ModelConfig& config, int64_t num_pages, int64_t page_size,
                                  kernels::KvFormat format = kernels::KvFormat::kF16,
                                  const KvLayerPlacement& placement = {});
  // The bytes of one page of `layers_per_page` layers (0: every layer); equals
  // KVLayout::bytes_per_page() of the same shape and dtype (the capacity the KV manager plans
  // with is the memory allocated here).
  static int64_t bytes_per_page(const ModelConfig& config, int64_t page_size,
                                kernels::KvFormat format = kernels::KvFormat::kF16,
                                int64_t layers_per_page = 0);

  int64_t num_pages() const { return num_pages_; }
  int64_t num_groups() const { return num_groups_; }
  int64_t group_of(int64_t layer) const { return layer_group_[size_t(layer)]; }
  // Layer il's page list in a sequence's page table of every group, [groups][pages].
  std::span<const int32_t> layer_pages(std::span<const int32_t> page_table, int64_t layer) const {
    const size_t per_group = page_table.size() / size_t(num_groups_);
    return page_table.subspan(size_t(group_of(layer)) * per_group, per_group);
  }
  int64_t page_size() const { return page_size_; }
  kernels::KvFormat format() const { return format_; }
  // Bytes from a (layer, head) block of one page to the same block of the next page.
  int64_t page_stride() const { return page_bytes_; }

  // The bytes of one page, [page_stride()]: every layer slot's K and V with their scales (a disk
  // tier copies them whole).
  std::span<uint8_t> page_bytes(int64_t page) {
    return {memory_.get() + page * page_bytes_, size_t(page_bytes_)};
  }

  // Copies every K/V byte (and scale) of page `src` into page `dst` (copy-on-write of a shared
  // page).
  void copy_page(int64_t src, int64_t dst);
  // Moves one token's K and V of head `kv_head` of layer `layer` from (src_page, src_slot) to
  // (dst_page, dst_slot), bit for bit with their scales (KV-Compress's compaction).
  void move_entry(int64_t layer, int64_t kv_head, int64_t src_page, int64_t src_slot,
                  int64_t dst_page, int64_t dst_slot);

  // Key block of one head of one layer in one page ([head_dim][page_size], then scales).
  uint8_t* keys(int64_t page, int64_t layer, int64_t kv_head) {
    return base(page, layer) + kv_head * key_block_bytes_;
  }
  // Value block of one head of one layer in one page ([page_size][head_dim_v], then scales).
  uint8_t* values(int64_t page, int64_t layer, int64_t kv_head) {
    return base(page, layer) + n_kv_heads_ * key_block_bytes_ + kv_head * value_block_bytes_;
  }

 private:
  KvPages() = default;
  uint8_t* base(int64_t page, int64_t layer) {
    return memory_.get() + page * page_bytes_ + layer_slot_[size_t(layer)] * layer_bytes_;
  }

  struct FreeDeleter {
    void operator()(uint8_t* p) const;
  };
  std::unique_ptr<uint8_t, FreeDeleter> memory_;
  int64_t num_pages_ = 0;
  int64_t page_size_ = 0;
  kernels::KvFormat format_ = kernels::KvFormat::kF16;
  int64_t n_kv_heads_ = 0;
  int64_t head_dim_ = 0;
  int64_t head_dim_v_ = 0;
  int64_t key_block_bytes_ = 0;    // one head's keys (and scales) in one page of one layer
  int64_t value_block_bytes_ = 0;  // one head's values (and scales)
  int64_t layer_bytes_ = 0;        // one layer's K and V in a page
  int64_t page_bytes_ = 0;         // one page
  int64_t num_groups_ = 1;
  std::vector<int32_t> layer_group_;  // [n_layers]
  std::vector<int32_t> layer_slot_;   // [n_layers]
};

}  // namespace drift
