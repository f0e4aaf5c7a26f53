#include "kv/kv_groups.h"

#include <algorithm>

namespace drift {

Expected<KVGrouping> group_kv_layers(std::span<const int32_t> layer_windows, bool hybrid) {
  if (layer_windows.empty()) return make_error("kv groups: the model has no layer");
  for (size_t il = 0; il < layer_windows.size(); ++il)
    if (layer_windows[il] < 0)
      return make_error("kv groups: layer {} has sliding window {}", il, layer_windows[il]);
  const auto n_layers = static_cast<int32_t>(layer_windows.size());

  // The kinds, full attention (0) first, then each window in increasing order.
  std::vector<int32_t> kinds(layer_windows.begin(), layer_windows.end());
  std::sort(kinds.begin(), kinds.end());
  kinds.erase(std::unique(kinds.begin(), kinds.end()), kinds.end());

  KVGrouping g;
  g.layer_group.assign(size_t(n_layers), 0);
  g.layer_slot.resize(size_t(n_layers));
  if (!hybrid || kinds.size() == 1 || kinds.front() != 0) {
    g.groups = {KVGroup{}};
    g.layers_per_group = n_layers;
    for (int32_t il = 0; il < n_layers; ++il) g.layer_slot[size_t(il)] = il;
    return g;
  }
  int32_t size = n_layers;
  for (int32_t kind : kinds)
    size = std::min(size, int32_t(std::count(layer_windows.begin(), layer_windows.end(), kind)));
  g.layers_per_group = size;
  for (int32_t kind : kinds) {
    int32_t placed = 0;
    const auto first_group = static_cast<int32_t>(g.groups.size());
    for (int32_t il = 0; il < n_layers; ++il) {
      if (layer_windows[size_t(il)] != kind) continue;
      if (placed % size == 0) g.groups.push_back(KVGroup{kind});
      g.layer_group[size_t(il)] = first_group + placed / size;
      g.layer_slot[size_t(il)] = placed % size;
      ++placed;
    }
  }
  return g;
}

KVLayout kv_layout_with_groups(KVLayout base, const KVGrouping& grouping) {
  base.num_layers = grouping.layers_per_group;
  base.groups.clear();
  if (grouping.num_groups() > 1) base.groups = grouping.groups;
  return base;
}

}  // namespace drift
