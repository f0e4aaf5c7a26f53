// Percentiles of latencies gathered by a command (TTFT, inter-token gaps), for the summaries that
// `drift generate` prints and writes as JSON.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

namespace drift::cli {

// The p-th percentile (0..100) by linear interpolation between closest ranks (numpy's default);
// 0 for no samples.
inline double percentile(std::vector<double> samples, double p) {
  if (samples.empty()) return 0.0;
  std::sort(samples.begin(), samples.end());
  const double rank = p / 100.0 * static_cast<double>(samples.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, samples.size() - 1);
  return samples[lo] + (samples[hi] - samples[lo]) * (rank - static_cast<double>(lo));
}

}  // namespace drift::cli
