// Where the worker publishes its metrics for readers on other threads: it copies a snapshot in
// at the end of each step (before that step's events are delivered, so a caller that saw a
// request finish reads metrics that include it), and submitters count their immediate rejections.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>

#include "engine/engine_metrics.h"

namespace drift {

class MetricsBoard {
 public:
  // Worker. Copy-assignment into equally sized histograms: no allocation.
  void publish(const EngineMetrics& metrics) {
    std::lock_guard<std::mutex> lock(mutex_);
    published_ = metrics;
  }
  // Submitting threads: a request rejected before it reached the worker.
  void count_rejected_at_submit() { rejected_at_submit_.fetch_add(1, std::memory_order_relaxed); }

  // The latest snapshot (without the requests the worker has not taken yet).
  EngineMetrics read() const {
    EngineMetrics m;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      m = published_;
    }
    m.finished_by_reason[size_t(FinishReason::kRejected)] +=
        rejected_at_submit_.load(std::memory_order_relaxed);
    return m;
  }

 private:
  mutable std::mutex mutex_;
  EngineMetrics published_;
  std::atomic<uint64_t> rejected_at_submit_{0};
};

}  // namespace drift
