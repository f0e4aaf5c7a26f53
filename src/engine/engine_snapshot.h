// A picture of the engine at one step boundary, for a live view (the server's /engine page):
// every unfinished request with its progress, the composition of the recent steps, and the state
// of each KV page. The worker fills it into memory it reuses (engine_worker.cc) and hands it over
// through a SnapshotBoard (snapshot_board.h); gauges, counters and histograms stay in
// EngineMetrics.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/request.h"
#include "kv/kv_cache_manager.h"
#include "scheduler/engine_scheduler.h"
#include "scheduler/sequence_state.h"

namespace drift {

// One unfinished request, as the scheduler holds it.
struct SequenceView {
  RequestId id = 0;
  SequencePhase phase = SequencePhase::kWaiting;
  int32_t num_preemptions = 0;  // a waiting sequence with preemptions is "preempted"
  int32_t prompt_tokens = 0;
  int32_t prefilled_tokens = 0;  // of the prompt, K/V written (0 again after a preemption)
  int32_t generated_tokens = 0;
  int32_t max_new_tokens = 0;
  int32_t pages = 0;  // KV pages its page list holds now

  bool preempted() const { return phase == SequencePhase::kWaiting && num_preemptions > 0; }
};

// What one step carried and how long its executor took.
struct StepRecord {
  uint64_t step = 0;  // the engine's count of steps run, this one included
  int32_t prefill_tokens = 0;
  int32_t decode_tokens = 0;
  int32_t sequences = 0;
  double seconds = 0;
};

// The last kSteps steps in a ring: one record written per step, no allocation.
class StepHistory {
 public:
  static constexpr size_t kSteps = 120;
  void record(const StepRecord& step) {
    ring_[next_ % kSteps] = step;
    ++next_;
  }
  // Oldest first, into `out` (whose capacity is reused).
  void copy_to(std::vector<StepRecord>& out) const;

 private:
  std::array<StepRecord, kSteps> ring_{};
  uint64_t next_ = 0;
};

// One character per KV page, as a page map draws it.
enum class PageMark : char {
  kFree = 'f',    // holds nothing
  kUsed = 'u',    // in the page list of one sequence
  kShared = 's',  // in the page lists of several sequences (a shared prefix)
  kCached = 'c',  // held by no sequence, kept for prefix reuse
};

struct EngineSnapshot {
  uint64_t version = 0;  // the board's count of snapshots published; 0 before the first
  uint64_t steps = 0;    // steps run when it was taken
  std::vector<SequenceView> sequences;   // running in run order, then waiting in admission order
  std::vector<StepRecord> recent_steps;  // oldest first, up to StepHistory::kSteps
  std::string page_map;                  // [num_pages] PageMark characters, by page id
};

// Fills `out` (reusing its memory) from the worker's state; only the worker may call it.
void fill_engine_snapshot(const EngineScheduler& scheduler, const KVCacheManager& kv,
                          const StepHistory& history, uint64_t steps, EngineSnapshot& out);

}  // namespace drift
