#include "util/progress_log.h"

#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <exception>

#include "util/signal_stack.h"

namespace drift {
namespace {

struct EventInfo {
  const char* name;
  const char* a;  // field names; nullptr when the field is unused
  const char* b;
};

EventInfo event_info(ProgressEvent event) {
  switch (event) {
    case ProgressEvent::kEnqueue:
      return {"enqueue", "prompt_tokens", "max_new_tokens"};
    case ProgressEvent::kReject:
      return {"reject", "pages_needed", "pages_total"};
    case ProgressEvent::kAdmit:
      return {"admit", "steps_waited", "pages_reserved"};
    case ProgressEvent::kPrefillChunk:
      return {"prefill_chunk", "start", "tokens"};
    case ProgressEvent::kDecode:
      return {"decode", "position", "pages"};
    case ProgressEvent::kPreempt:
      return {"preempt", "recompute_tokens", "pages_freed"};
    case ProgressEvent::kFinish:
      return {"finish", "reason", "generated"};
    case ProgressEvent::kCancel:
      return {"cancel", "phase", nullptr};
    case ProgressEvent::kRelease:
      return {"release", "pages", "reserved_returned"};
    case ProgressEvent::kError:
      return {"error", "step", "item"};
    case ProgressEvent::kStep:
      return {"step", "tokens", "items"};
  }
  return {"unknown", "a", "b"};
}

int64_t now_ns() noexcept {
  // clock_gettime is async-signal-safe; steady_clock is the same clock on Linux.
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

// A fixed line buffer filled without allocation, for the signal-safe dump.
class LineWriter {
 public:
  explicit LineWriter(int fd) : fd_(fd) {}

  void text(const char* s) noexcept {
    while (*s) put(*s++);
  }
  void number(int64_t v) noexcept {
    uint64_t magnitude = v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
    if (v < 0) put('-');
    unsigned_number(magnitude);
  }
  void unsigned_number(uint64_t v) noexcept {
    char digits[20];
    int n = 0;
    do {
      digits[n++] = static_cast<char>('0' + v % 10);
      v /= 10;
    } while (v);
    while (n) put(digits[--n]);
  }
  // Seconds with microseconds: "12.000345".
  void seconds(int64_t ns) noexcept {
    if (ns < 0) {
      put('-');
      ns = -ns;
    }
    unsigned_number(static_cast<uint64_t>(ns / 1'000'000'000));
    put('.');
    int64_t micros = (ns % 1'000'000'000) / 1000;
    for (int64_t scale = 100000; scale; scale /= 10)
      put(static_cast<char>('0' + micros / scale % 10));
  }
  void flush() noexcept {
    size_t done = 0;
    while (done < size_) {
      ssize_t n = ::write(fd_, buf_ + done, size_ - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    size_ = 0;
  }

 private:
  void put(char c) noexcept {
    if (size_ == sizeof(buf_)) flush();
    buf_[size_++] = c;
  }

  int fd_;
  char buf_[512];
  size_t size_ = 0;
};

}  // namespace

const char* progress_event_name(ProgressEvent event) { return event_info(event).name; }

void ProgressLog::record(ProgressEvent event, uint64_t seq_id, int64_t a, int64_t b) noexcept {
  uint64_t index = next_.fetch_add(1, std::memory_order_relaxed);
  Slot& slot = slots_[index % kCapacity];
  // Seqlock write: odd stamp, fields, then the even stamp that publishes them.
  slot.stamp.store(2 * index + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  slot.time_ns.store(now_ns(), std::memory_order_relaxed);
  slot.seq_id.store(seq_id, std::memory_order_relaxed);
  slot.event.store(static_cast<uint8_t>(event), std::memory_order_relaxed);
  slot.a.store(a, std::memory_order_relaxed);
  slot.b.store(b, std::memory_order_relaxed);
  slot.stamp.store(2 * (index + 1), std::memory_order_release);
}

bool ProgressLog::read_slot(uint64_t index, ProgressRecord& out) const noexcept {
  const Slot& slot = slots_[index % kCapacity];
  uint64_t expected = 2 * (index + 1);
  if (slot.stamp.load(std::memory_order_acquire) != expected) return false;
  out.index = index;
  out.time_ns = slot.time_ns.load(std::memory_order_relaxed);
  out.seq_id = slot.seq_id.load(std::memory_order_relaxed);
  out.event = static_cast<ProgressEvent>(slot.event.load(std::memory_order_relaxed));
  out.a = slot.a.load(std::memory_order_relaxed);
  out.b = slot.b.load(std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  return slot.stamp.load(std::memory_order_relaxed) == expected;
}

size_t ProgressLog::snapshot(std::span<ProgressRecord> out) const noexcept {
  uint64_t end = total_recorded();
  uint64_t keep = end < kCapacity ? end : kCapacity;
  if (keep > out.size()) keep = out.size();
  size_t copied = 0;
  for (uint64_t index = end - keep; index < end; ++index) {
    if (read_slot(index, out[copied])) ++copied;
  }
  return copied;
}

void ProgressLog::dump(int fd) const noexcept {
  uint64_t end = total_recorded();
  uint64_t begin = end < kCapacity ? 0 : end - kCapacity;
  int64_t now = now_ns();
  LineWriter w(fd);
  w.text("drift: last ");
  w.unsigned_number(end - begin);
  w.text(" of ");
  w.unsigned_number(end);
  w.text(" engine events, oldest first (age in seconds before this dump):\n");
  for (uint64_t index = begin; index < end; ++index) {
    ProgressRecord r;
    if (!read_slot(index, r)) continue;
    EventInfo info = event_info(r.event);
    w.text("  #");
    w.unsigned_number(r.index);
    w.text(" -");
    w.seconds(now - r.time_ns);
    w.text("s ");
    w.text(info.name);
    w.text(r.event == ProgressEvent::kStep ? " step=" : " seq=");
    w.unsigned_number(r.seq_id);
    if (info.a) {
      w.text(" ");
      w.text(info.a);
      w.text("=");
      w.number(r.a);
    }
    if (info.b) {
      w.text(" ");
      w.text(info.b);
      w.text("=");
      w.number(r.b);
    }
    w.text("\n");
  }
  w.flush();
}

// ---- Crash handler: the one process-wide pointer (see the header). ----

namespace {

constexpr int kCrashSignals[] = {SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL};
constexpr int kNumCrashSignals = sizeof(kCrashSignals) / sizeof(kCrashSignals[0]);

std::atomic<const ProgressLog*> g_crash_log{nullptr};
std::atomic<bool> g_dumped{false};
struct sigaction g_previous_actions[kNumCrashSignals];
std::terminate_handler g_previous_terminate = nullptr;
bool g_installed = false;

void dump_once(const char* cause) noexcept {
  if (g_dumped.exchange(true)) return;
  const ProgressLog* log = g_crash_log.load(std::memory_order_acquire);
  if (!log) return;
  LineWriter w(STDERR_FILENO);
  w.text("\ndrift: ");
  w.text(cause);
  w.text("\n");
  w.flush();
  log->dump(STDERR_FILENO);
}

const char* signal_cause(int sig) noexcept {
  switch (sig) {
    case SIGSEGV:
      return "fatal signal SIGSEGV";
    case SIGABRT:
      return "fatal signal SIGABRT";
    case SIGBUS:
      return "fatal signal SIGBUS";
    case SIGFPE:
      return "fatal signal SIGFPE";
    case SIGILL:
      return "fatal signal SIGILL";
  }
  return "fatal signal";
}

void crash_signal_handler(int sig) {
  int saved_errno = errno;
  dump_once(signal_cause(sig));
  // Hand the signal to whoever had it before (the default action kills the process; a
  // sanitizer's handler prints its report): restore it, then re-raise. The signal is blocked
  // while this handler runs, so it is delivered when we return — or, for a fault, the faulting
  // instruction runs again and raises it anew.
  for (int i = 0; i < kNumCrashSignals; ++i) {
    if (kCrashSignals[i] == sig) sigaction(sig, &g_previous_actions[i], nullptr);
  }
  raise(sig);
  errno = saved_errno;
}

void crash_terminate_handler() {
  dump_once("std::terminate called");
  if (g_previous_terminate) g_previous_terminate();
  abort();
}

}  // namespace

void install_progress_crash_handler(const ProgressLog& log) {
  ensure_alternate_signal_stack();  // the installing thread: usually the main thread
  g_crash_log.store(&log, std::memory_order_release);
  g_dumped.store(false);
  if (g_installed) return;
  struct sigaction action;
  std::memset(&action, 0, sizeof(action));
  action.sa_handler = crash_signal_handler;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_ONSTACK;
  for (int i = 0; i < kNumCrashSignals; ++i) {
    sigaction(kCrashSignals[i], &action, &g_previous_actions[i]);
  }
  g_previous_terminate = std::set_terminate(crash_terminate_handler);
  g_installed = true;
}

void uninstall_progress_crash_handler() {
  if (!g_installed) return;
  for (int i = 0; i < kNumCrashSignals; ++i) {
    sigaction(kCrashSignals[i], &g_previous_actions[i], nullptr);
  }
  std::set_terminate(g_previous_terminate);
  g_previous_terminate = nullptr;
  g_crash_log.store(nullptr, std::memory_order_release);
  g_installed = false;
}

}  // namespace drift
