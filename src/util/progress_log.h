// A ring buffer of the last 512 engine events (enqueue, admit, prefill chunk, decode, finish,
// release, error, ...) for post-mortem debugging: when the process crashes, the dump says what
// the engine was doing. Recording is a handful of relaxed atomic stores, never allocates and
// never blocks, so it stays on in the hot path; dumping is async-signal-safe.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>

namespace drift {

enum class ProgressEvent : uint8_t {
  kEnqueue,       // a = prompt tokens, b = max new tokens
  kReject,        // a = pages needed, b = pages in the cache
  kAdmit,         // a = steps waited, b = pages reserved (guaranteed mode; 0 otherwise)
  kPrefillChunk,  // a = start position, b = tokens
  kDecode,        // a = position, b = pages held
  kPreempt,       // a = tokens to recompute, b = pages freed
  kFinish,        // a = finish reason (FinishReason value), b = generated tokens
  kCancel,        // a = phase when cancelled (SequencePhase value)
  kRelease,       // a = page references dropped, b = reserved pages returned
  kError,         // a = step, b = item index (-1 when the whole step failed)
  kStep,          // seq = step number, a = tokens scheduled, b = items
};

// "prefill_chunk" etc.; a static string.
const char* progress_event_name(ProgressEvent event);

// One retained event, as copied out of the log.
struct ProgressRecord {
  uint64_t index = 0;   // how many events were recorded before this one
  int64_t time_ns = 0;  // steady clock
  uint64_t seq_id = 0;  // the sequence (or step, for kStep) the event concerns
  ProgressEvent event = ProgressEvent::kEnqueue;
  int64_t a = 0;  // event-specific values, see ProgressEvent
  int64_t b = 0;
};

// Multi-writer, lock-free: each record takes a ticket with one fetch_add and publishes its slot
// with a sequence stamp (a seqlock), so a reader — the crash dump included — skips a slot that is
// being overwritten instead of printing a torn record.
class ProgressLog {
 public:
  static constexpr size_t kCapacity = 512;

  ProgressLog() = default;
  ProgressLog(const ProgressLog&) = delete;
  ProgressLog& operator=(const ProgressLog&) = delete;

  void record(ProgressEvent event, uint64_t seq_id, int64_t a = 0, int64_t b = 0) noexcept;

  // Copies the retained events, oldest first, into `out` (at most out.size() of the newest);
  // returns how many were copied.
  size_t snapshot(std::span<ProgressRecord> out) const noexcept;

  // Events recorded since construction (the log keeps the last kCapacity of them).
  uint64_t total_recorded() const noexcept { return next_.load(std::memory_order_acquire); }

  // Writes the retained events, oldest first, one per line, to `fd` with write(2) only: no
  // allocation, no locks, no stdio, so it may run inside a signal handler.
  void dump(int fd) const noexcept;

 private:
  struct Slot {
    // 2 * (index + 1) once the record with that index is complete; odd while being written.
    std::atomic<uint64_t> stamp{0};
    std::atomic<int64_t> time_ns{0};
    std::atomic<uint64_t> seq_id{0};
    std::atomic<uint8_t> event{0};
    std::atomic<int64_t> a{0};
    std::atomic<int64_t> b{0};
  };
  bool read_slot(uint64_t index, ProgressRecord& out) const noexcept;

  std::atomic<uint64_t> next_{0};
  std::array<Slot, kCapacity> slots_;
};

// Makes SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL and std::terminate dump `log` to stderr before the
// process dies as it otherwise would (the previous handlers run afterwards). The log must outlive
// the installation. Signal handlers take no arguments, so this keeps the one process-wide pointer
// of the engine — the single documented exception to "no mutable globals". Installing again
// replaces the log; uninstalling restores the previous handlers.
void install_progress_crash_handler(const ProgressLog& log);
void uninstall_progress_crash_handler();

}  // namespace drift
