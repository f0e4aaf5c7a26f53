// Where the worker hands engine snapshots (engine_snapshot.h) to readers on other threads without
// ever waiting for them: it fills a snapshot of its own, then swaps it with the published one
// under a lock it only tries to take (a reader copying out at that moment makes it skip this
// boundary and swap at the next). A swap moves three pointers; nothing is copied, and no lock is
// held across a step.
//
// Snapshots cost the worker a walk over the sequences and the KV pages, so it fills them only
// while someone reads them (a reader's read() keeps them coming for kInterest), at most every
// kInterval, and whenever the engine goes idle (so the last picture of a busy period is exact).
#pragma once

#include <atomic>
#include <chrono>
#include <mutex>

#include "engine/engine_snapshot.h"

namespace drift {

class SnapshotBoard {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::milliseconds kInterval{100};
  static constexpr std::chrono::seconds kInterest{3};

  // Readers: the latest snapshot (version 0 before the first); asks for more for kInterest.
  EngineSnapshot read() const {
    const int64_t until = (Clock::now() + kInterest).time_since_epoch().count();
    wanted_until_.store(until, std::memory_order_relaxed);
    std::lock_guard<std::mutex> lock(mutex_);
    return published_;
  }

  // Worker: whether a snapshot should be filled now.
  bool due(Clock::time_point now, bool idle) const {
    if (idle) return true;
    if (now.time_since_epoch().count() >= wanted_until_.load(std::memory_order_relaxed))
      return false;
    return now - last_published_ >= kInterval;
  }
  // Worker: publishes `filled` unless a reader holds the lock; `filled` then holds an older
  // snapshot whose memory the next fill reuses. Returns whether it was published.
  bool try_publish(EngineSnapshot& filled, Clock::time_point now) {
    std::unique_lock<std::mutex> lock(mutex_, std::try_to_lock);
    if (!lock.owns_lock()) return false;
    filled.version = published_.version + 1;
    std::swap(published_, filled);
    last_published_ = now;
    return true;
  }

 private:
  mutable std::mutex mutex_;
  EngineSnapshot published_;
  mutable std::atomic<int64_t> wanted_until_{0};  // Clock ticks
  Clock::time_point last_published_{};            // the worker's only
};

}  // namespace drift
