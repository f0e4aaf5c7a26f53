#include "executor/kv_compressor.h"

namespace drift {

int64_t KvCompressor::compress(int64_t seq_len, KvHeadTable& heads, KvPages& kv,
                               std::span<const int32_t> page_table) {
  return compress_to(seq_len, kv_keep_target(config_, seq_len), 0, heads, kv, page_table);
}

int64_t KvCompressor::compress_to(int64_t seq_len, int64_t target, int64_t keep_from,
                                  KvHeadTable& heads, KvPages& kv,
                                  std::span<const int32_t> page_table) {
  const int64_t ps = kv.page_size();
  for (int64_t il = 0; il < heads.n_layers(); ++il) {
    // The layer's entries move within its own group's pages (every group keeps the same slots).
    const std::span<const int32_t> pages = kv.layer_pages(page_table, il);
    for (int64_t h = 0; h < heads.n_kv_heads(); ++h) {
      if (heads.length(il, h) <= target) continue;
      select_kept_entries(config_, seq_len, keep_from, heads.positions(il, h),
                          heads.metric(il, h, metric_), target, kept_);
      // kept_ increases and kept_[j] >= j: moving in increasing j never overwrites an entry
      // still to move.
      for (size_t j = 0; j < kept_.size(); ++j) {
        const int64_t from = kept_[j], to = static_cast<int64_t>(j);
        if (from != to) kv.move_entry(il, h, pages[from / ps], from % ps, pages[to / ps], to % ps);
      }
      heads.keep(il, h, kept_);
    }
  }
  heads.next_metric_interval();
  return heads.max_length();
}

}  // namespace drift
