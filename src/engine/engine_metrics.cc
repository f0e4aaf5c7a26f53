#include "engine/engine_metrics.h"

#include <algorithm>

namespace drift {

Histogram Histogram::with_bounds(std::span<const double> upper_bounds) {
  Histogram h;
  h.upper_bounds.assign(upper_bounds.begin(), upper_bounds.end());
  h.counts.assign(upper_bounds.size() + 1, 0);
  return h;
}

void Histogram::observe(double value) {
  // lower_bound: a value equal to a bound belongs to that bound's bucket (Prometheus' "le").
  auto at = std::lower_bound(upper_bounds.begin(), upper_bounds.end(), value);
  ++counts[size_t(at - upper_bounds.begin())];
  ++count;
  sum += value;
}

uint64_t EngineMetrics::finished_total() const {
  uint64_t n = 0;
  for (uint64_t c : finished_by_reason) n += c;
  return n;
}

}  // namespace drift
