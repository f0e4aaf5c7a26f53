// How a model's layers are split into KV groups (docs/design-notes.md "Sliding-window KV
// groups"): layers of one attention kind per group, every group the same number of layer slots,
// so that one pool of equal pages serves all groups and a sliding group's pages can leave the
// pool's use as they leave its window. Arithmetic over each layer's window only.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kv/kv_layout.h"
#include "util/error.h"

namespace drift {

struct KVGrouping {
  std::vector<KVGroup> groups;       // [num_groups]: full-attention groups first
  int32_t layers_per_group = 0;      // layer slots of one page (a padded group leaves some unused)
  std::vector<int32_t> layer_group;  // [num_layers] the group holding each model layer's K/V
  std::vector<int32_t> layer_slot;   // [num_layers] its slot among the page's layers

  int32_t num_groups() const { return static_cast<int32_t>(groups.size()); }
};

// `layer_windows[il]`: layer il's sliding window, 0 for full attention. With `hybrid`, layers of
// each kind (window) fill groups of the smallest kind's count, in layer order, the last group of
// a kind padded (vLLM's rule); full attention first. One group of every layer (each at its own
// slot, as before groups existed) when `hybrid` is off, when every layer has the same kind, or
// when no layer attends to the whole context (group 0 anchors the prefix cache). Error: no
// layer, or a negative window.
Expected<KVGrouping> group_kv_layers(std::span<const int32_t> layer_windows, bool hybrid);

// `base` (its num_layers ignored) with the grouping's groups and page slots; a single group
// leaves `groups` empty, the layout of a model without sliding layers.
KVLayout kv_layout_with_groups(KVLayout base, const KVGrouping& grouping);

}  // namespace drift
