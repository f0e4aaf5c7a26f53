#include "scheduler/preemption_cost.h"

namespace drift {

std::string_view preemption_policy_name(PreemptionPolicy policy) {
  switch (policy) {
    case PreemptionPolicy::kAuto:
      return "auto";
    case PreemptionPolicy::kSwap:
      return "swap";
    case PreemptionPolicy::kRecompute:
      return "recompute";
  }
  return "?";
}

std::optional<PreemptionPolicy> parse_preemption_policy(std::string_view name) {
  for (PreemptionPolicy p :
       {PreemptionPolicy::kAuto, PreemptionPolicy::kSwap, PreemptionPolicy::kRecompute})
    if (preemption_policy_name(p) == name) return p;
  return std::nullopt;
}

std::string_view preemption_mode_name(PreemptionMode mode) {
  return mode == PreemptionMode::kSwap ? "swap" : "recompute";
}

double prefill_seconds(const RecomputeCosts& costs, int64_t first_position, int64_t tokens) {
  const auto n = double(tokens);
  const double attended = n * double(first_position) + n * (n + 1) / 2;
  return n * costs.per_prefill_token + costs.per_attended_position * attended;
}

PreemptionChoice choose_preemption(PreemptionPolicy policy, const PreemptionCostInputs& in) {
  PreemptionChoice choice;
  auto or_assumed = [](double measured) {
    return measured > 0 ? measured : kAssumedDiskBytesPerSecond;
  };
  const double bytes = double(in.file_bytes);
  choice.swap_seconds =
      double(in.pages_to_write) * bytes / or_assumed(in.disk.write_bytes_per_second) +
      double(in.pages) * bytes / or_assumed(in.disk.read_bytes_per_second);
  choice.recompute_seconds = prefill_seconds(in.recompute, 0, in.tokens);
  if (in.pages <= 0 || policy == PreemptionPolicy::kRecompute) return choice;
  if (policy == PreemptionPolicy::kSwap ||
      (in.recompute.measured() && choice.swap_seconds < choice.recompute_seconds))
    choice.mode = PreemptionMode::kSwap;
  return choice;
}

}  // namespace drift
