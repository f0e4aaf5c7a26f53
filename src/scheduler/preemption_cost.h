// Swap or recompute: what the pool does with a sequence it must preempt (issue 29's tiered
// preemption; docs/design-notes.md "Tiered preemption"). Recomputing costs the prefill of every
// token the sequence had computed; swapping costs writing its pages to the disk tier that are not
// there yet, now, and reading them all back at re-admission. The faster is chosen:
//
//   swap      = pages to write * file bytes / write bandwidth + pages * file bytes / read bandwidth
//   recompute = tokens * seconds per prefill token
//               + seconds per attended position * tokens * (tokens + 1) / 2
//
// Bandwidths are the disk store's own measurements (bytes and seconds of the pages it wrote and
// read); prefill costs are the engine's step cost model (engine/step_cost_model.h), handed to the
// scheduler as figures because the scheduler reads no clock. Pure arithmetic: no state.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace drift {

// The operator's choice (SchedulerConfig::preemption): by the cost model, or always one way.
enum class PreemptionPolicy : uint8_t { kAuto, kSwap, kRecompute };
std::string_view preemption_policy_name(PreemptionPolicy policy);  // "auto", "swap", "recompute"
std::optional<PreemptionPolicy> parse_preemption_policy(std::string_view name);

enum class PreemptionMode : uint8_t { kRecompute, kSwap };
std::string_view preemption_mode_name(PreemptionMode mode);  // "recompute", "swap"

// What recomputing costs per token, from the step cost model (StepCosts' two prefill terms).
struct RecomputeCosts {
  double per_prefill_token = 0;
  double per_attended_position = 0;
  bool measured() const { return per_prefill_token > 0; }
};

// Seconds to compute `tokens` prompt tokens at positions first_position, first_position + 1, ...:
// each token's own cost plus attention over every position up to its own.
double prefill_seconds(const RecomputeCosts& costs, int64_t first_position, int64_t tokens);

// The disk's speed as the store measured it; 0: not measured yet.
struct DiskBandwidth {
  double write_bytes_per_second = 0;
  double read_bytes_per_second = 0;
};

struct PreemptionCostInputs {
  int64_t tokens = 0;          // the sequence's computed tokens (what recomputing redoes)
  int64_t pages = 0;           // the pages it holds, every group's (what swapping reads back)
  int64_t pages_to_write = 0;  // of those, not on disk yet
  uint64_t file_bytes = 0;     // one page's file
  DiskBandwidth disk;
  RecomputeCosts recompute;
};

struct PreemptionChoice {
  PreemptionMode mode = PreemptionMode::kRecompute;
  // Predicted seconds of each way (0 when a figure it needs is not measured yet).
  double swap_seconds = 0;
  double recompute_seconds = 0;
};

// Until the store has measured a direction, it is assumed this fast: a conservative figure for a
// local SSD behind the page cache (pages are written without fsync), so that the first
// preemptions can swap; the measured figure replaces it after the first page each way.
inline constexpr double kAssumedDiskBytesPerSecond = 200e6;

// kRecompute when there is nothing to swap (no full page), when the policy says so, or — under
// kAuto — when the prefill costs are not measured yet or swapping is not predicted faster.
PreemptionChoice choose_preemption(PreemptionPolicy policy, const PreemptionCostInputs& in);

}  // namespace drift
