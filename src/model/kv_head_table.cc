#include "model/kv_head_table.h"

#include <algorithm>
#include <cassert>

namespace drift {

KvHeadTable::KvHeadTable(int64_t n_layers, int64_t n_kv_heads, int64_t capacity,
                         int64_t metric_intervals)
    : n_layers_(n_layers),
      n_kv_heads_(n_kv_heads),
      capacity_(capacity),
      intervals_(std::max<int64_t>(1, metric_intervals)),
      length_(static_cast<size_t>(n_layers * n_kv_heads), 0),
      positions_(static_cast<size_t>(n_layers * n_kv_heads * capacity), 0),
      metric_(static_cast<size_t>(intervals_ * n_layers * n_kv_heads * capacity), 0.0f) {}

int64_t KvHeadTable::max_length() const {
  return length_.empty() ? 0 : *std::max_element(length_.begin(), length_.end());
}

std::span<const float> KvHeadTable::metric(int64_t layer, int64_t head,
                                           std::vector<float>& scratch) const {
  const auto n = static_cast<size_t>(length(layer, head));
  if (intervals_ == 1) return {&metric_[at(0, layer, head)], n};
  scratch.assign(n, 0.0f);
  // Oldest interval first, so the sum's order does not depend on which one is current.
  for (int64_t k = 1; k <= intervals_; ++k) {
    const float* sums = &metric_[at((current_ + k) % intervals_, layer, head)];
    for (size_t j = 0; j < n; ++j) scratch[j] += sums[j];
  }
  return scratch;
}

bool KvHeadTable::append(int64_t start_pos, int64_t n) {
  if (max_length() + n > capacity_) return false;
  for (int64_t l = 0; l < n_layers_; ++l)
    for (int64_t h = 0; h < n_kv_heads_; ++h) {
      const int64_t i = index(l, h);
      int32_t* positions = &positions_[i * capacity_];
      for (int64_t j = 0; j < n; ++j)
        positions[length_[i] + j] = static_cast<int32_t>(start_pos + j);
      for (int64_t k = 0; k < intervals_; ++k)
        std::fill_n(&metric_[at(k, l, h) + length_[i]], n, 0.0f);
      length_[i] += n;
    }
  return true;
}

void KvHeadTable::keep(int64_t layer, int64_t head, std::span<const int32_t> kept) {
  const int64_t i = index(layer, head);
  int32_t* positions = &positions_[i * capacity_];
  for (size_t j = 0; j < kept.size(); ++j) {
    assert(kept[j] >= static_cast<int32_t>(j) && kept[j] < length_[i]);
    positions[j] = positions[kept[j]];
  }
  for (int64_t k = 0; k < intervals_; ++k) {
    float* metric = &metric_[at(k, layer, head)];
    for (size_t j = 0; j < kept.size(); ++j) metric[j] = metric[kept[j]];
  }
  length_[i] = static_cast<int64_t>(kept.size());
}

void KvHeadTable::next_metric_interval() {
  current_ = (current_ + 1) % intervals_;
  std::fill_n(&metric_[at(current_, 0, 0)], n_layers_ * n_kv_heads_ * capacity_, 0.0f);
}

}  // namespace drift
