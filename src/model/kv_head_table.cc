#include "model/kv_head_table.h"

#include <algorithm>
#include <cassert>

namespace drift {

KvHeadTable::KvHeadTable(int64_t n_layers, int64_t n_kv_heads, int64_t capacity)
    : n_layers_(n_layers),
      n_kv_heads_(n_kv_heads),
      capacity_(capacity),
      length_(static_cast<size_t>(n_layers * n_kv_heads), 0),
      positions_(static_cast<size_t>(n_layers * n_kv_heads * capacity), 0),
      metric_(static_cast<size_t>(n_layers * n_kv_heads * capacity), 0.0f) {}

int64_t KvHeadTable::max_length() const {
  return length_.empty() ? 0 : *std::max_element(length_.begin(), length_.end());
}

bool KvHeadTable::append(int64_t start_pos, int64_t n) {
  if (max_length() + n > capacity_) return false;
  for (int64_t i = 0; i < n_layers_ * n_kv_heads_; ++i) {
    int32_t* positions = &positions_[i * capacity_];
    float* metric = &metric_[i * capacity_];
    for (int64_t j = 0; j < n; ++j) {
      positions[length_[i] + j] = static_cast<int32_t>(start_pos + j);
      metric[length_[i] + j] = 0.0f;
    }
    length_[i] += n;
  }
  return true;
}

void KvHeadTable::keep(int64_t layer, int64_t head, std::span<const int32_t> kept) {
  const int64_t i = index(layer, head);
  int32_t* positions = &positions_[i * capacity_];
  float* metric = &metric_[i * capacity_];
  for (size_t j = 0; j < kept.size(); ++j) {
    assert(kept[j] >= static_cast<int32_t>(j) && kept[j] < length_[i]);
    positions[j] = positions[kept[j]];
    metric[j] = metric[kept[j]];
  }
  length_[i] = static_cast<int64_t>(kept.size());
}

void KvHeadTable::clear_metric() { std::fill(metric_.begin(), metric_.end(), 0.0f); }

}  // namespace drift
