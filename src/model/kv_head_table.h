// The entries each KV head of a compressed sequence holds (KV-Compress, docs/design-notes.md
// "KV-Compress"). Once a sequence is compressed, the heads of one layer no longer hold the same
// positions, nor necessarily as many: each (layer, KV head) keeps its own entries compacted at
// slots [0, length) of the sequence's page table, in increasing position, and this table says
// which position each slot holds and how much attention it has received. The pages themselves
// stay shared by all layers and heads (one page table per sequence), so the sequence needs pages
// for its longest head: max_length() slots.
//
// A sequence without a table holds, in every head, position p at slot p.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace drift {

class KvHeadTable {
 public:
  // Room for `capacity` entries per head (the most positions the sequence may reach); the metric
  // sums the squared attention of the last `metric_intervals` intervals between compressions.
  KvHeadTable(int64_t n_layers, int64_t n_kv_heads, int64_t capacity, int64_t metric_intervals = 1);

  int64_t n_layers() const { return n_layers_; }
  int64_t n_kv_heads() const { return n_kv_heads_; }
  int64_t capacity() const { return capacity_; }

  // Entries (layer, head) holds, at slots [0, length).
  int64_t length(int64_t layer, int64_t head) const { return length_[index(layer, head)]; }
  int64_t max_length() const;
  // [length] the position each slot holds, increasing.
  std::span<const int32_t> positions(int64_t layer, int64_t head) const {
    return {&positions_[index(layer, head) * capacity_], static_cast<size_t>(length(layer, head))};
  }
  // [capacity] squared attention each slot received in the current interval
  // (kernels/attention_metric.h): the sums the attention kernel adds to.
  float* metric_sums(int64_t layer, int64_t head) { return &metric_[at(current_, layer, head)]; }
  // [length] the metric of the slots the head holds: the sums of the last metric_intervals
  // intervals (added up in `scratch` when there are several).
  std::span<const float> metric(int64_t layer, int64_t head, std::vector<float>& scratch) const;

  // Every head gets positions [start_pos, start_pos + n) at its next slots, metric 0. False (and
  // nothing changes) when a head would exceed the capacity.
  bool append(int64_t start_pos, int64_t n);
  // Head (layer, head) keeps only the slots `kept` (increasing): slot kept[j] moves to slot j,
  // with its position and metric. The K/V bytes are the caller's to move the same way.
  void keep(int64_t layer, int64_t head, std::span<const int32_t> kept);
  // Starts the next interval of the metric: the oldest interval's sums are dropped (all of them
  // with one interval), so the metric covers the queries of the last metric_intervals intervals.
  void next_metric_interval();

 private:
  int64_t index(int64_t layer, int64_t head) const { return layer * n_kv_heads_ + head; }
  // Offset of (interval, layer, head)'s sums in metric_.
  int64_t at(int64_t interval, int64_t layer, int64_t head) const {
    return (interval * n_layers_ * n_kv_heads_ + index(layer, head)) * capacity_;
  }

  int64_t n_layers_, n_kv_heads_, capacity_, intervals_;
  int64_t current_ = 0;             // the interval the kernel adds to
  std::vector<int64_t> length_;     // [layer][head]
  std::vector<int32_t> positions_;  // [layer][head][capacity]
  std::vector<float> metric_;       // [interval][layer][head][capacity]
};

}  // namespace drift
